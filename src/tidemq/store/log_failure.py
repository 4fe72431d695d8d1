"""A failed commit-log fsync (or write) is final for what it covered (PostgreSQL's "fsyncgate").

On Linux a failed writeback marks the dirty pages clean (ext4, XFS) and may drop them: a later
fsync that succeeds proves nothing about them, and the bytes a reader finds there may not be on
the disk. So an fsync error of the commit log, or a failed pwrite of it (other than ENOSPC, which
is a refusal like a full disk), is never retried over the same bytes:

1. The durable position freezes at the last successful flush, ``durable_end`` (D): the commit log
   takes no append and moves ``flushed_offset`` no further until the cut below is done.
2. The cut, under the put lock: the failed segment is sealed at D, every segment after it at its
   start, recorded durably in config/sealed.json first (commit_log.seal_failed; the failed
   segment is FAILED, segment_state.py). The consume-queue units of records after D are dropped
   and the topics' next queue offsets follow, so the records after D are out of the log as if a
   crash had taken them: no queue offset points at them, no reader is served them, and recovery
   at the next start goes on at the next segment there. The log goes on at ``resume_offset`` (S,
   the end of the last segment), in a new segment that placement puts in another writable
   commit-log directory: the failed one is marked failed (disk.py: ``tidemq disk``, the write
   verdict, the metrics' directory state) and takes nothing more in this process.
3. Every put whose record ends in (D, S] is answered PutReason.FLUSH_FAILED (status
   FLUSH_DISK_FAILED), final: the ones waiting for the group commit, those that come to wait
   later, and ``MessageStore.confirm(end)`` for a resend of one of them. It is not durable and
   never will be: the client must store it again (the broker's resend path does).
4. With no other writable commit-log directory, puts are refused (WRITE_ERROR) until a restart.
   Where the seal cannot be recorded or the queues cannot be cut, the log does not go on at all
   (``resume_offset`` None: every put refused, WRITE_ERROR, until a restart). A restart's recovery
   reads what is on disk (CRCs) and skips the sealed stretch.

What a reader may still read of the failed segment: its records up to D (made durable by fsyncs
that succeeded), by queue offset, by commit-log offset or by key; nothing at or after D.

``LogFailure`` says what failed; ``LogFailureHandler.listeners`` are told of each (after the
cut, from the thread that found it): the hook for a leader with followers, which steps down
instead of writing on (MessageStore.on_log_failed).

Consume queues and the index are derived from the log: their fsync errors degrade and never lose
(MessageStore: the checkpoint never again claims them flushed in this process; their units are
checked against the log at once and at the next start).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from .recovery import queue_end

if TYPE_CHECKING:
    from .commit_log import CommitLog
    from .consume_queue import ConsumeQueueTable
    from .disk import DiskMonitor
    from .dispatch import Dispatcher
    from .mapped_file import MappedFile
    from .topics import TopicTable

log = logging.getLogger("tidemq.store")


@dataclass
class LogFailure:
    """One failure of the commit log: what it covered and where the log went on."""
    directory: str                  # the failed segment's directory (marked failed)
    segment: str                    # the failed segment's path
    durable_end: int                # D: everything before it is durable; nothing after it is
    log_end: int                    # how far the log had been written when it failed
    error: str                      # the OSError, for people
    errno: int | None
    at_ms: int
    resume_offset: int | None = None    # S: where the log goes on; None: it cannot (a restart)
    units_cut: int = 0              # consume-queue units dropped (records after D)
    # the end of each consume queue the failure cut, by (topic, queue id): the queue offsets its next
    # messages take (a consumer's state past them is about records that are gone: broker/server.py)
    queue_ends: dict = field(default_factory=dict)

    def covers(self, end: int) -> bool:
        """Does a record ending at ``end`` lie in what the failure took (D, S]?"""
        return end > self.durable_end and (self.resume_offset is None or end <= self.resume_offset)

    def as_dict(self) -> dict:
        return {"directory": self.directory, "segment": self.segment, "durable_end": self.durable_end,
                "log_end": self.log_end, "resume_offset": self.resume_offset, "error": self.error,
                "errno": self.errno, "at_ms": self.at_ms, "units_cut": self.units_cut}


class LogFailed(OSError):
    """The commit log failed (``failure``); raised by CommitLog.flush after the cut."""

    def __init__(self, failure: LogFailure) -> None:
        super().__init__(failure.errno or 0, f"commit log failed in {failure.directory}: {failure.error}")
        self.failure = failure


class LogFailureHandler:
    """The cut (module docstring), built by the store with the parts it touches; CommitLog calls it
    (``commit_log.on_failure``) from the thread that found the failure, holding no lock.
    ``stop_writes(text)``: refuse every put (WRITE_ERROR) until a restart."""

    def __init__(self, commit_log: "CommitLog", queues: "ConsumeQueueTable", topics: "TopicTable",
                 dispatcher: "Dispatcher", disk: "DiskMonitor", put_lock, now_ms: Callable[[], int],
                 stop_writes: Callable[[str], None],
                 queue_failed: Callable[[str, str, OSError], None] = lambda where, what, e: None) -> None:
        """``queue_failed(directory, what, error)``: a consume-queue file could not be cut durably
        (the store's handling of a consume-queue fsync error; called holding no lock)."""
        self.commit_log = commit_log
        self.queues = queues
        self.topics = topics
        self.dispatcher = dispatcher
        self.disk = disk
        self.put_lock = put_lock
        self.now_ms = now_ms
        self.stop_writes = stop_writes
        self.queue_failed = queue_failed
        self.listeners: list[Callable[[LogFailure], None]] = []

    def __call__(self, mf: "MappedFile", error: OSError) -> LogFailure:
        cl = self.commit_log
        d = cl.flushed_offset            # frozen by the commit log when it found the failure
        f = LogFailure(directory=mf.directory, segment=mf.path, durable_end=d, log_end=cl.segments.max_offset,
                       error=str(error), errno=getattr(error, "errno", None), at_ms=self.now_ms())
        log.error("the commit log failed in %s: %s. Everything after offset %d (%d bytes written after the last "
                  "successful flush) is not durable: the puts it covered are answered FLUSH_FAILED, their records "
                  "are taken out of the log", mf.path, error, d, f.log_end - d)
        queue_errors: list[tuple[str, OSError]] = []
        why_not = None                   # why the log cannot go on, if it cannot
        with self.put_lock:
            try:
                resume = cl.seal_failed(mf, d)
            except OSError as e:
                resume, why_not = None, f"its seals could not be recorded ({e})"
            for cq in self.queues.all():
                try:
                    end = queue_end(cq, cl, d, d)
                except OSError as e:          # its units cannot be read: where it ends is unknown
                    why_not = why_not or f"consume queue {cq.topic}/{cq.queue_id} could not be read ({e})"
                    continue
                if cq.max_offset > end:
                    f.units_cut += cq.max_offset - end
                    f.queue_ends[(cq.topic, cq.queue_id)] = end
                try:
                    cq.truncate(end)
                except OSError as e:
                    # cut in memory (ConsumeQueue.truncate cuts memory first), the files perhaps not
                    # durably: readers and recovery skip sealed records whatever a unit says
                    queue_errors.append((cq.dir, e))
            for t in self.topics.topics.values():
                for qid, cq in enumerate(t.queues):
                    if cq is not None:
                        t.next_offsets[qid] = cq.max_offset
            disp = self.dispatcher
            if disp.pending_from is not None and disp.pending_from >= d:
                disp.pending_from, disp.error = None, None      # what it could not dispatch is gone
            if why_not is None:
                f.resume_offset = resume
                if disp.dispatched_offset >= d:
                    disp.dispatched_offset = resume
                cl.resume(f)
            else:
                # the queues end at D: so does what the checkpoint says was dispatched (the next start
                # dispatches again whatever it finds after D)
                disp.dispatched_offset = min(disp.dispatched_offset, d)
                cl.halt(f)               # readers stop at the durable end (MessageStore.readable_end)
        if why_not is not None:
            text = (f"the commit log failed in {mf.directory} ({error}) and cannot go on: {why_not}; "
                    f"writes refused until the broker restarts")
            log.error("%s", text)
            self.stop_writes(text)
        self.disk.mark_failed(mf.directory, f"commit-log {error}: what was written after offset {d} is not durable; "
                                            f"no new segment goes here until a restart")
        for where, e in queue_errors:
            self.queue_failed(where, "consume-queue", e)
        if f.resume_offset is not None:
            log.error("the commit log goes on at offset %d in a new segment (%d consume-queue unit(s) of records after "
                      "%d dropped)", f.resume_offset, f.units_cut, d)
        for fn in list(self.listeners):
            try:
                fn(f)
            except Exception:  # noqa: BLE001 - a listener's failure is its own
                log.exception("a listener of the commit log's failure failed")
        return f
