"""The store's read calls (MessageStore's part for readers): queue offsets, get / get_raw, look-ups
by commit-log offset, key and time (reader.py), and what readers may be served (readable.py:
readable_end, the commit limit, the long polls' wake-ups)."""

from __future__ import annotations

from typing import Callable, Iterable

from ..record import codec
from .types import GetResult, GetStatus


class StoreReads:
    """MessageStore's read calls (a part of its class: store.py builds what they use)."""

    def min_offset(self, topic: str, queue_id: int) -> int:
        self._reading("min_offset")
        cq = self.queues.get(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        self._reading("max_offset")
        cq = self.queues.get(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def queue_bytes(self, topic: str, queue_id: int, units_max: int = 4096) -> tuple[int, bool]:
        """(record bytes the queue holds, exact): exact up to ``units_max`` messages, estimated from
        the last ``units_max`` beyond (a bounded read; ConsumeQueue.message_bytes)."""
        self._reading("queue_bytes")
        cq = self.queues.get(topic, queue_id)
        return cq.message_bytes(units_max) if cq is not None else (0, True)

    @property
    def commitlog_min_offset(self) -> int:
        self._running("commitlog_min_offset")
        return self.segments.min_offset

    @property
    def commitlog_max_offset(self) -> int:
        self._running("commitlog_max_offset")
        return self.segments.max_offset

    def get(self, group: str, topic: str, queue_id: int, offset: int, max_count: int = 32,
            max_bytes: int = 256 * 1024, tags: Iterable[str] | None = None, match=None) -> GetResult:
        """Up to max_count messages of one queue from ``offset`` (RocketMQ's getMessage).

        ``tags``: only messages with one of these tags (None or '*': all); ``match``: only messages
        for which ``match(message)`` is true (a property filter, RocketMQ's isMatchedByCommitLog;
        None: all). The messages skipped by either are passed: next_offset is after them. The count
        and byte limits are also capped by the in-memory / from-disk pull limits.
        """
        if self.reader is None:
            return GetResult(GetStatus.SERVICE_NOT_AVAILABLE, offset, 0, 0)
        self._put_lock.drain()           # answered puts not dispatched yet: dispatched first (put_lock.py)
        r = self.reader.get(group, topic, queue_id, offset, max_count, max_bytes, tags, match)
        if r.messages:
            self._count_read(topic, len(r.messages), sum(len(m.body) for m in r.messages))
        return r

    def get_raw(self, topic: str, queue_id: int, offset: int, max_count: int = 4096,
                max_bytes: int = 16 << 20, room: int = 0, head=None) -> GetResult:
        """Up to max_count records of one queue from ``offset`` as stored bytes, copied after
        ``room`` bytes for a header, which ``head`` makes (reader.py)."""
        if self.reader is None:
            return GetResult(GetStatus.SERVICE_NOT_AVAILABLE, offset, 0, 0)
        self._put_lock.drain()           # answered puts not dispatched yet: dispatched first (put_lock.py)
        r = self.reader.get_raw(topic, queue_id, offset, max_count, max_bytes, room, head)
        if r.records is not None and len(r.records[0]):
            self._count_read(topic, len(r.records[0]), len(r.records[1]))
        return r

    def _count_read(self, topic: str, n: int, nbytes: int) -> None:
        """Messages and bytes handed to readers, per topic, since start (metrics: got / bytes out)."""
        c = self.read_counts.get(topic)
        if c is None:
            c = self.read_counts[topic] = [0, 0]
        c[0] += n
        c[1] += nbytes

    def get_by_commitlog_offset(self, offset: int, size: int | None = None) -> codec.StoredMessage | None:
        """The message whose record starts at ``offset``, or None."""
        self._reading("get_by_commitlog_offset")
        return self.reader.get_by_commitlog_offset(offset, size)

    def query_by_key(self, topic: str, key: str, max_count: int = 32, begin_ms: int = 0,
                     end_ms: int | None = None, whole_log: bool = False) -> list[codec.StoredMessage]:
        """Messages of ``topic`` with this key (or unique key) stored within [begin_ms, end_ms], newest
        first, readable ones only (readable_end) unless ``whole_log`` (the broker's own look-up of a
        resend's earlier store: it answers it only once ``confirm`` says so)."""
        self._reading("query_by_key")
        return self.reader.query_by_key(topic, key, max_count, begin_ms, end_ms, whole_log)

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after ``timestamp_ms``
        (max offset if none): a binary search on store time."""
        self._reading("offset_for_timestamp")
        return self.reader.offset_for_timestamp(topic, queue_id, timestamp_ms)

    # What readers may be served (reader.py says which readers are limited) ------------------
    def readable_end(self) -> int:
        """The commit-log offset before which records may be served to readers: what cannot be taken
        back (readable.py: in each flush mode, after a failure of the log, under ``set_commit_limit``)."""
        self._running("readable_end")
        return self.readable.end()

    def set_commit_limit(self, fn: Callable[[], int] | None) -> None:
        """Serve readers no record ending after ``fn()`` (a commit-log offset; None: no such limit),
        besides readable_end's own rule: the broker's SYNC replication sets the group's high
        watermark. ``fn`` is called on every read: cheap, any thread. When what it returns moves
        forward, call ``readable_advanced()`` so that waiting long polls look again."""
        self.readable.set_limit(fn)

    def readable_max_offset(self, topic: str, queue_id: int) -> int:
        """A queue's max offset as consumers see it: one past its last message readable now (QueryOffset
        END, the max every get carries); ``max_offset`` is the queue's own end."""
        self._reading("readable_max_offset")
        return self.reader.readable_max_offset(topic, queue_id)

    def notify_readable(self, callback: Callable[[], None], walking: int | None = None) -> bool:
        """Call ``callback()`` once, from whichever thread moves readable_end (the flush thread, the
        caller of ``readable_advanced``), when everything appended so far has become readable: a long
        poll woken by an arrival that found its record not readable yet waits on this, not on the
        next arrival, and does not spin. False (and no call) when everything is readable now. At most
        readable.READABLE_WAITERS_MAX wait; past that the oldest are called at once (they look again).
        Besides, called (once more) when the walk for a damaged unit under way, if any, is kept
        (unit_repair.py: its readers were answered "not readable yet"; ``walking``: what such an
        answer said, GetResult.walking: at once when a walk was kept since)."""
        self._running("notify_readable")
        walk = self.reader.repair.on_walked(callback, walking)     # a walk aside (unit_repair.py)
        return self.readable.wait(callback) or walk

    def walks_kept(self) -> int:
        """How many walks aside were kept so far (unit_repair.py): taken before a read that may need
        one, it is notify_readable's ``walking`` (a walk kept since the read wakes the caller at once)."""
        return self.reader.repair.walked

    def walk_units_aside(self) -> None:
        """Damaged consume-queue units are looked for in the log on a thread of their own from now
        on (unit_repair.walk_aside), never on the reading thread (the broker's event loop): a read
        that needs a walk answers "not readable yet" at its offset until the walk is kept. Ends
        with the store."""
        self._running("walk_units_aside")
        self.reader.repair.walk_aside(self.fio, self.clock.monotonic_s)

    def readable_advanced(self) -> None:
        """readable_end may have moved: call the waiters it reached (notify_readable). Whatever the
        store's state (a no-op with nobody waiting; a stopped store calls them all: they look again)."""
        self.readable.advanced()
