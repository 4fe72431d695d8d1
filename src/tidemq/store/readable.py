"""What readers may be served: the readable end of the commit log, and the waits on it.

``ReadableEnd.end()`` is the commit-log offset before which records may be served to readers:
what cannot be taken back. ASYNC_FLUSH: the log's end (what a crash can take back is served: the
mode's promise is only what was flushed); SYNC_FLUSH: the flushed (durable) offset; after a failure
of the log that froze it (log_failure.py), its durable end, in either mode; never past the limit set
by ``set_limit`` (MessageStore.set_commit_limit; SYNC replication: the in-sync set's high watermark). reader.py says which readers
are limited; MessageStore answers for it (readable_end, notify_readable, readable_advanced).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from .commit_log import CommitLog
from .segment_queue import SegmentQueue

log = logging.getLogger("tidemq.store")

READABLE_WAITERS_MAX = 4096        # ReadableEnd.wait (MessageStore.notify_readable)


class ReadableEnd:
    def __init__(self, running: Callable[[], bool], flush_waited: Callable[[], bool]) -> None:
        self._running = running                 # the store runs (else advanced() wakes every waiter)
        self._flush_waited = flush_waited       # a group commit runs (SYNC_FLUSH): readers wait for the fsync
        self.segments: SegmentQueue | None = None     # (attach, at start)
        self.commit_log: CommitLog | None = None
        self.commit_limit: Callable[[], int] | None = None    # set_limit
        self._lock = threading.Lock()
        self.waiters: list[tuple[int, Callable[[], None]]] = []    # wait

    def attach(self, segments: SegmentQueue, commit_log: CommitLog) -> None:
        """The log whose readable end this is (the store's start opens it)."""
        self.segments, self.commit_log = segments, commit_log

    def end(self) -> int:
        lim = self.limit()
        return self.segments.max_offset if lim is None else lim

    def limit(self) -> int | None:
        """end(), or None when it is the log's end and nothing else limits (no work for readers)."""
        cl = self.commit_log
        fn = self.commit_limit
        if self._flush_waited() or cl.frozen:
            end = cl.flushed_offset
        elif fn is None:
            return None
        else:
            end = self.segments.max_offset
        return end if fn is None else min(end, fn())

    def set_limit(self, fn: Callable[[], int] | None) -> None:
        """Serve readers no record ending after ``fn()`` (MessageStore.set_commit_limit)."""
        self.commit_limit = fn
        self.advanced()

    def wait(self, callback: Callable[[], None]) -> bool:
        """Call ``callback()`` once everything appended so far has become readable
        (MessageStore.notify_readable): False (and no call) when everything is readable now."""
        end = self.segments.max_offset
        spill = None
        with self._lock:
            if self.end() >= end:
                return False
            self.waiters.append((end, callback))
            if len(self.waiters) > READABLE_WAITERS_MAX:
                spill, self.waiters = self.waiters[:-READABLE_WAITERS_MAX // 2], \
                    self.waiters[-READABLE_WAITERS_MAX // 2:]
        for _end, fn in spill or ():
            fn()
        return True

    def advanced(self) -> None:
        """end() may have moved: call the waiters it reached (MessageStore.readable_advanced)."""
        if not self.waiters:
            return
        if not self._running():
            with self._lock:
                due, self.waiters = [fn for _e, fn in self.waiters], []
            for fn in due:
                fn()
            return
        with self._lock:
            now = self.end()
            due = [fn for e, fn in self.waiters if e <= now]
            if not due:
                return
            self.waiters = [(e, fn) for e, fn in self.waiters if e > now]
        for fn in due:
            try:
                fn()
            except Exception:  # noqa: BLE001 - a waiter's failure is its own
                log.exception("a readable-end waiter failed")
