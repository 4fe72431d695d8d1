"""Per-topic retention over a shared commit log: may the head segment go?

Every topic's messages live in the one commit log; a segment holds the messages of every topic sent
while it was active, and it is deleted whole. So a topic's own retention (topics.TopicSettings:
``retention_hours``, ``retention_bytes``) decides about a segment only together with the others: the
segment goes when **every topic with messages in it allows it**:

- a topic with no setting of its own allows it once the segment expired by the store's rule (its
  newest message older than file_reserved_time_hours);
- a topic with ``retention_hours`` allows it once the segment's newest message is older than that
  (longer than the store's: the topic keeps the segment, and every segment after it, longer; shorter:
  the segment goes sooner only where every other topic in it allows it too);
- a topic with ``retention_bytes`` allows it also while the topic holds at least that many bytes in
  the log after the segment (Kafka's retention.bytes: its oldest go while it is over the size).

What it means for operators: a short retention on one topic frees space only as far as the topics
sharing its segments allow (a quiet topic with a short retention next to a busy one with the default
frees nothing early); a long retention on one topic holds the whole log from its oldest message on.
Space pressure still wins (disk_space_clean_forcibly_percent deletes unexpired segments as before,
the space policy deciding), and so does the archive guard.

Which topics have messages in the head segment [start, end): a queue's first unit (at its minimum
offset) points into the log; the topic has messages there when one of its queues' first unit lies
before ``end``. That first offset is remembered per queue until its minimum moves (units never change
once written), so a round reads a consume queue only where cleanup moved it: the cost of a round is a
dictionary lookup per queue (bench/topic_retention.py measures 10,000 topics).
"""

from __future__ import annotations

from .consume_queue import UNIT, UNIT_SIZE, ConsumeQueueTable
from .topics import TopicTable

HOUR_MS = 3_600_000
SIZE_SAMPLE_UNITS = 256          # units whose mean size estimates a queue's bytes after a segment


class TopicRetention:
    def __init__(self, topics: TopicTable, queues: ConsumeQueueTable) -> None:
        self.topics = topics
        self.queues = queues
        self._first: dict[tuple[str, int], tuple[int, int]] = {}   # (topic, queue) -> (min offset, its log offset)
        self.queues_read = 0             # consume-queue reads (the first unit of a queue whose minimum moved)

    def first_log_offset(self, cq) -> int | None:
        """Where the queue's oldest message is in the log (None: the queue is empty)."""
        lo = cq.min_offset
        if lo >= cq.max_offset:
            return None
        key = (cq.topic, cq.queue_id)
        got = self._first.get(key)
        if got is not None and got[0] == lo:
            return got[1]
        raw = cq.read(lo, 1)
        self.queues_read += 1
        if len(raw) < UNIT_SIZE:
            return None
        phys = UNIT.unpack(raw)[0]
        self._first[key] = (lo, phys)
        return phys

    def _holds_data_before(self, name: str, count: int, end: int) -> bool:
        for q in range(count):
            cq = self.queues.get(name, q)
            if cq is not None:
                first = self.first_log_offset(cq)
                if first is not None and first < end:
                    return True
        return False

    def _bytes_after(self, name: str, count: int, end: int) -> int:
        """An estimate of the topic's record bytes at log offsets from ``end`` on."""
        total = 0
        for q in range(count):
            cq = self.queues.get(name, q)
            if cq is None or cq.max_offset <= cq.min_offset:
                continue
            lo, hi = cq.min_offset, cq.max_offset
            while lo < hi:                    # the first unit at or after ``end`` (units ascend in the log)
                mid = (lo + hi) // 2
                raw = cq.read(mid, 1)
                if len(raw) < UNIT_SIZE or UNIT.unpack(raw)[0] >= end:
                    hi = mid
                else:
                    lo = mid + 1
            n = cq.max_offset - lo
            if n > 0:
                nbytes, _exact = cq.message_bytes(SIZE_SAMPLE_UNITS)
                total += nbytes * n // max(1, cq.max_offset - cq.min_offset)
        return total

    def holds(self, end: int, newest_ms: int, now_ms: int, expired: bool) -> str | None:
        """Why the segment ending at log offset ``end`` (newest message stored at ``newest_ms``) must
        stay by the topics' retention, or None when every topic with messages in it allows it to go;
        ``expired``: by the store's own retention."""
        age_ms = now_ms - newest_ms
        own = self.topics.with_settings()
        if not own:
            return None if expired else "store"
        for t in own:
            s = t.settings
            if s.retention_hours is None and s.retention_bytes is None:
                continue                       # (max_message_bytes only): the store's rule
            if not self._holds_data_before(t.name, t.queue_count, end):
                continue
            if s.retention_hours is not None and age_ms >= s.retention_hours * HOUR_MS:
                continue
            if s.retention_hours is None and expired:
                continue
            if s.retention_bytes is not None and self._bytes_after(t.name, t.queue_count, end) >= s.retention_bytes:
                continue
            return t.name
        if expired:
            return None
        # not expired by the store's rule: every topic without a retention of its own must be absent
        for t in list(self.topics.topics.values()):
            s = t.settings
            if s.retention_hours is None and s.retention_bytes is None \
                    and self._holds_data_before(t.name, t.queue_count, end):
                return t.name
        return None
