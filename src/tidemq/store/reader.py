"""The store's read path: messages of a queue by offset (decoded, or as stored bytes), by
commit-log offset, by key, and the queue offset of a time.

``StoreReader`` is built by ``MessageStore`` once its parts are loaded and reads
through them: consume-queue units by pread, records from the mapped commit-log
segments while a hold keeps a segment mapped (a segment being cleaned is
skipped, never waited for); bodies are copied out, so a result never pins a
segment. It writes nothing. ``MessageStore.get`` and friends delegate here.

What a reader is served stops at what cannot be taken back: ``readable_limit()`` (the
store's: MessageStore.readable_end, None when nothing limits) is where the records it
serves must end. Limited here: ``get`` (PullMessage, ReceiveMessage, the broker's own
readers of system topics), ``get_raw`` (PullRecords, tidemq.client, Spark broker mode),
the queue's max offset every result carries (``readable_max``: a consumer is never told
of a message it cannot read), ``get_by_commitlog_offset`` and ``query_by_key``. A record
past the limit is answered as not there yet (OFFSET_OVERFLOW_ONE: a long poll waits for
it), never as missing. Not limited (they must see the whole log, and are not consumers):
recovery, the dispatcher's re-dispatch and healing, ``tidemq verify`` (verify.py), the
replication copy (replica.py) and the archive job, which read the log through
CommitLog.iter_records / the segments. Records at or past a segment's seal (an early
seal, a failed fsync's: log_failure.py) are never served, whatever a unit says.
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from ..config import StoreConfig
from ..record import codec
from ..record.codec import PROP_UNIQ_KEY, tags_hash
from .commit_log import CommitLog
from .consume_queue import UNIT, UNIT_DTYPE, ConsumeQueue, ConsumeQueueTable
from .index_file import IndexService
from ..record.framing import frame_records
from ..record.integrity import DamageCounter
from .segment_queue import SegmentQueue
from .topics import TopicTable
from .types import GetResult, GetStatus
from .unit_repair import UnitRepair, WalkFailed, WalkPending

AGAIN = object()                   # _get / _get_raw: a damaged unit's record was found in the log: read again
FILTER_SCAN_UNITS_MAX = 16_000     # units scanned by one filtered get (RocketMQ: maxFilterMessageSize)
MATCH_SCAN_UNITS_MAX = 1024        # units scanned by one get with a property filter (``match``)


def _head(head, next_offset: int, min_offset: int, max_offset: int, count: int):
    """frame_records' head for get_raw's caller's ``head`` (None: none); no header when records failed
    their CRCs (the frame is made again without them)."""
    if head is None:
        return None
    return lambda crc, bad: None if bad else head(next_offset, min_offset, max_offset, count, crc)


READABLE_SCAN_UNITS = 256         # units read per step when looking for a queue's readable max


def readable_max(cq: ConsumeQueue, mn: int, full: int, limit: int) -> int:
    """One past the last unit of ``cq`` (in [mn, full)) whose record ends at or before ``limit``.
    Units follow log order, so the unreadable ones are the queue's tail: read backwards in steps of
    READABLE_SCAN_UNITS (what was appended since the last fsync, under SYNC_FLUSH: a step or two)."""
    hi = full
    while hi > mn:
        start = max(mn, hi - READABLE_SCAN_UNITS)
        raw = cq.read(start, hi - start)
        n = len(raw) // UNIT.size
        if n == 0:
            return start                     # unreadable: nothing from here is served
        u = np.frombuffer(raw, UNIT_DTYPE, n)
        size = u["size"].astype(np.int64)
        late = (size > 0) & (u["offset"].astype(np.int64) + size > limit)
        if not late[0]:
            return start + (int(np.argmax(late)) if late.any() else n)
        hi = start
    return mn


class StoreReader:
    def __init__(self, config: StoreConfig, segments: SegmentQueue, commit_log: CommitLog,
                 queues: ConsumeQueueTable, topics: TopicTable, index: IndexService | None,
                 memory_budget_bytes: int, running: Callable[[], bool],
                 readable_limit: Callable[[], int | None] = lambda: None) -> None:
        """``memory_budget_bytes``: data further than this behind the log's end counts as on disk
        (the from-disk pull limits apply); ``running``: False once the store stops (reads then
        answer SERVICE_NOT_AVAILABLE); ``readable_limit()``: where served records must end (None:
        anywhere in the log)."""
        self.readable_limit = readable_limit
        self.config = config
        self.segments = segments
        self.commit_log = commit_log
        self.queues = queues
        self.topics = topics
        self.index = index
        self.memory_budget_bytes = memory_budget_bytes
        self.running = running
        self.damage = DamageCounter()
        self.repair = UnitRepair(commit_log, topics)    # damaged units whose record is in the log

    def get(self, group: str, topic: str, queue_id: int, offset: int, max_count: int = 32,
            max_bytes: int = 256 * 1024, tags: Iterable[str] | None = None,
            match: Callable[[object], bool] | None = None) -> GetResult:
        """MessageStore.get: decoded messages of one queue from ``offset``, tag-filtered, then kept
        only where ``match(message)`` is true (a property filter; None: all). Read again while a
        damaged unit's record was just found in the log (unit_repair.py: each unit is looked for
        once, so this ends). A walk that runs aside (unit_repair.walk_aside): what was read before
        the damaged unit is answered (next offset: the unit); with nothing before it, "not readable
        yet" at ``offset`` (_walking), or WalkFailed when its walk failed (unit_repair.py)."""
        while True:
            try:
                r = self._get(group, topic, queue_id, offset, max_count, max_bytes, tags, match)
            except WalkPending as e:
                return self._walking(topic, queue_id, offset, e.walked)
            if r is not AGAIN:
                return r

    def _walking(self, topic: str, queue_id: int, offset: int, walked: int) -> GetResult:
        """The answer of a read that waits for a walk aside (unit_repair.py): OFFSET_OVERFLOW_ONE at
        its own offset, as for a record there but not readable yet: read it again (``walking``: the
        walks kept before it, for StoreReads.notify_readable, which says when the next one is)."""
        q = self.readable_queue(topic, queue_id, offset)
        if isinstance(q, GetResult):
            return q
        cq, mx = q
        g = GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, cq.min_offset, mx)
        g.walking = walked
        return g

    def _get(self, group: str, topic: str, queue_id: int, offset: int, max_count: int,
             max_bytes: int, tags: Iterable[str] | None, match) -> GetResult:
        q = self.readable_queue(topic, queue_id, offset)
        if isinstance(q, GetResult):
            return q
        cq, mx = q
        mn = cq.min_offset
        wanted = None
        if tags is not None:
            tl = [t for t in tags if t and t != "*"]
            if tl:
                wanted = {}
                for t in tl:                 # two tags can share a hash: keep them all
                    wanted.setdefault(tags_hash(t), set()).add(t)
        if wanted is not None:
            scan = FILTER_SCAN_UNITS_MAX            # a tag hash per unit: cheap
        elif match is not None:
            scan = MATCH_SCAN_UNITS_MAX             # a decode and an evaluation per unit
        else:
            scan = min(max_count, self.config.pull_in_memory_count_max)
        raw = cq.read(offset, max(1, min(scan, mx - offset)))      # never a unit past what is readable
        raw = self.repair.patch(topic, queue_id, offset, raw)      # damaged units found again (unit_repair.py)
        if not raw:
            nxt = cq.file_start(offset) + cq.units_per_segment
            return GetResult(GetStatus.OFFSET_FOUND_NULL, min(nxt, mx), mn, mx)
        log_min = self.segments.min_offset
        log_max = self.segments.max_offset
        first_off = UNIT.unpack_from(raw, 0)[0]
        from_disk = log_max - first_off > self.memory_budget_bytes
        cfg = self.config
        if from_disk:
            count_max = min(max_count, cfg.pull_from_disk_count_max)
            bytes_max = min(max_bytes, cfg.pull_from_disk_bytes_max)
        else:
            count_max = min(max_count, cfg.pull_in_memory_count_max)
            bytes_max = min(max_bytes, cfg.pull_in_memory_bytes_max)
        msgs: list = []
        total = 0
        used = 0
        removed = filtered = damaged = 0
        find = self.segments.find
        decode = codec.decode_record
        sealed = self.commit_log.sealed
        key = codec.topic_key(topic)            # what each record's tail must start with (stands_for)
        mf = None
        mend = 0
        try:
            for cl_off, size, th in UNIT.iter_unpack(raw):
                if size <= 0 or cl_off < log_min:
                    if (size <= 0 or cl_off < 0) and \
                            self._found(cq, topic, queue_id, offset + used):       # a damaged unit, a hole
                        return AGAIN
                    removed += 1
                    used += 1
                    continue
                if wanted is not None and th not in wanted:
                    filtered += 1
                    used += 1
                    continue
                if msgs and (len(msgs) >= count_max or total + size > bytes_max):
                    break
                if mf is None or not (mf.start_offset <= cl_off < mf.start_offset + mf.wrote_pos):
                    if mf is not None:
                        mf.release()
                        mf = None
                    seg = find(cl_off)
                    if seg is None and self._found(cq, topic, queue_id, offset + used):   # past the log: damaged
                        return AGAIN
                    if seg is None or not seg.hold():
                        removed += 1
                        used += 1
                        continue
                    mf = seg
                    mend = mf.wrote_pos
                    if sealed:
                        mend = min(mend, sealed.get(mf.start_offset, mend))
                pos = cl_off - mf.start_offset
                if pos + size > mend:
                    if pos + size > mf.wrote_pos:
                        # beyond what is written (units follow the write): a damaged unit
                        if self._found(cq, topic, queue_id, offset + used):
                            return AGAIN
                        break
                    removed += 1   # at or past a seal: not part of the log (log_failure.py)
                    used += 1
                    continue
                try:
                    m = decode(mf.mapping, pos, size)
                except codec.CodecError:
                    m = None
                used += 1
                # damage kept by recovery, or a unit (no CRC of its own) pointing at an intact record
                # that is not the one it stands for (another topic, queue or queue offset): skipped,
                # counted, logged, never served
                if m is None or key is None or not m.stands_for(key, queue_id, offset + used - 1) or not m.intact():
                    if self._found(cq, topic, queue_id, offset + used - 1):
                        # the unit is damaged, its record intact in the log: read again with it
                        return AGAIN
                    damaged += 1
                    self.damage.note(topic, queue_id, offset + used - 1, cl_off, self._stranger(cl_off))
                    continue
                if wanted is not None and m.tags not in wanted[th]:
                    filtered += 1
                    continue
                if match is not None and not match(m):
                    filtered += 1
                    continue
                msgs.append(m)
                total += size
        except (WalkPending, WalkFailed) as e:
            if e.queue_offset <= offset:
                raise                              # nothing read before it: "not readable yet" (get), or the failure
            used = e.queue_offset - offset         # what was read before the damaged unit is answered;
            # the next read starts at it (and waits for its walk)
        finally:
            if mf is not None:
                mf.release()
        nxt = offset + used
        if msgs:
            status = GetStatus.FOUND
        elif filtered:
            status = GetStatus.NO_MATCHED_MESSAGE
        elif damaged:
            status = GetStatus.MESSAGE_DAMAGED
        elif removed:
            status = GetStatus.MESSAGE_WAS_REMOVING
        else:
            status = GetStatus.OFFSET_FOUND_NULL
        return GetResult(status, nxt, mn, mx, msgs, from_disk)

    def readable_queue(self, topic: str, queue_id: int, offset: int) -> tuple[ConsumeQueue, int] | GetResult:
        """(the queue to read from ``offset``, its readable max offset), or the GetResult that says
        why there is nothing to read. An offset at or past the readable max but not past the queue's
        end is "nothing new yet" (OFFSET_OVERFLOW_ONE, next offset itself): the record is there and
        will be readable."""
        if not self.running():
            return GetResult(GetStatus.SERVICE_NOT_AVAILABLE, offset, 0, 0)
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            t = self.topics.get(topic)
            if t is not None and 0 <= queue_id < t.queue_count:
                return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        full = cq.max_offset
        mn = cq.min_offset
        mx = full
        limit = self.readable_limit()
        if limit is not None and cq.tail_end > limit:
            mx = readable_max(cq, mn, full, limit)
        if full == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, mn, mx)
        if offset < mn:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, mn, mn, mx)
        if offset > full:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, mx, mn, mx)
        if offset >= mx:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, mn, mx)
        return cq, mx

    def readable_max_offset(self, topic: str, queue_id: int) -> int:
        """The queue's max offset as consumers see it: one past its last readable message."""
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return 0
        full = cq.max_offset
        limit = self.readable_limit()
        if limit is None or cq.tail_end <= limit:
            return full
        return readable_max(cq, cq.min_offset, full, limit)

    def get_raw(self, topic: str, queue_id: int, offset: int, max_count: int = 4096,
                max_bytes: int = 16 << 20, room: int = 0, head=None) -> GetResult:
        """_get_raw, read again while a damaged unit's record was just found in the log (as get). A
        walk aside (pending or failed) for a unit past ``offset``: the units before it are read alone
        (answered; the next read starts at the damaged unit)."""
        while True:
            try:
                r = self._get_raw(topic, queue_id, offset, max_count, max_bytes, room, head)
            except (WalkPending, WalkFailed) as e:
                if e.queue_offset <= offset:
                    if isinstance(e, WalkFailed):
                        raise
                    return self._walking(topic, queue_id, offset, e.walked)
                max_count = e.queue_offset - offset     # (fewer each time: this ends)
                continue
            if r is not AGAIN:
                return r

    def _get_raw(self, topic: str, queue_id: int, offset: int, max_count: int = 4096,
                 max_bytes: int = 16 << 20, room: int = 0, head=None) -> GetResult:
        """Up to max_count records of one queue from ``offset`` as stored bytes, for readers
        that decode in bulk (the Spark source, tidemq.client's raw pull): the result's
        ``records`` is (sizes, data): the records' sizes (little-endian i32 numpy array) and
        their bytes back to back (a buffer: bytes(data) for a bytes copy), all from one
        segment (the caller asks again from next_offset). Found with numpy over the
        consume-queue units, copied once (framing.frame_records) into the result's ``frame``:
        ``room`` bytes, the sizes, the records (what ``records`` are views of), which the broker
        answers with: ``head(next_offset, min_offset, max_offset, count, crc)`` (crc: CRC-32 of the
        sizes and records), given, answers the header frame_records writes into the room as it
        makes the frame (``frame`` is (frame, room, whether it did)). Every record's CRCs
        are checked on the copy, and that it is the record its unit stands for (topic, queue id,
        queue offset); one that fails either is never served (skipped, counted, logged).
        No tag filter; the store's in-memory/from-disk count limits do not apply (the
        caller bounds the batch by max_count and max_bytes)."""
        q = self.readable_queue(topic, queue_id, offset)
        if isinstance(q, GetResult):
            return q
        cq, mx = q
        mn = cq.min_offset
        raw = cq.read(offset, max(1, min(max_count, mx - offset)))
        if not raw:
            nxt = cq.file_start(offset) + cq.units_per_segment
            return GetResult(GetStatus.OFFSET_FOUND_NULL, min(nxt, mx), mn, mx)
        raw = self.repair.patch(topic, queue_id, offset, raw)      # damaged units found again (unit_repair.py)
        units = np.frombuffer(raw, UNIT_DTYPE)
        cl_off = units["offset"].astype(np.int64)
        size = units["size"].astype(np.int64)
        alive = (size > 0) & (cl_off >= self.segments.min_offset)
        if not alive.all() and self._repaired(cq, topic, queue_id, offset, cl_off, size):
            return AGAIN                              # a hole or a damaged unit's record found in the log
        sealed = self.commit_log.sealed
        if sealed:                       # at or past a seal: not part of the log (log_failure.py)
            seg = self.segments.segment_size
            for start, at in list(sealed.items()):
                alive &= ~((cl_off >= start + at) & (cl_off < start + seg))
        first = int(np.argmax(alive)) if alive.any() else len(units)
        if first == len(units):                       # holes or records cleaned away only
            return GetResult(GetStatus.MESSAGE_WAS_REMOVING, offset + len(units), mn, mx)
        mf = self.segments.find(int(cl_off[first]))
        if mf is None and self._found(cq, topic, queue_id, offset + first):   # past the log: a damaged unit
            return AGAIN
        if mf is None or not mf.hold():
            return GetResult(GetStatus.MESSAGE_WAS_REMOVING, offset + first + 1, mn, mx)
        try:
            # one segment per answer: the units up to the first one outside it (the reader asks again)
            seg_end = mf.start_offset + mf.wrote_pos
            inside = (cl_off >= mf.start_offset) & (cl_off + size <= seg_end)
            stop = first + int(np.argmin(inside[first:])) if not inside[first:].all() else len(units)
            if stop == first:       # a unit beyond what is written (units follow the write): damaged
                if self._found(cq, topic, queue_id, offset + first):
                    return AGAIN
                return GetResult(GetStatus.OFFSET_FOUND_NULL, offset + first, mn, mx)
            take = np.flatnonzero(alive[first:stop]) + first
            within = np.cumsum(size[take]) <= max_bytes
            within[0] = True                            # one record always goes, whatever its size
            take = take[within]
            used = int(take[-1]) + 1 if len(take) < int(alive[first:stop].sum()) else stop
            sizes = size[take]
            # each record's CRCs, and that it is the one its unit stands for (this topic, queue and
            # queue offset: a unit has no CRC of its own), checked in the pass that copies it
            frame, bad, headed = frame_records(mf.mapping, cl_off[take] - mf.start_offset, sizes, room,
                                               _head(head, offset + used, mn, mx, len(sizes)),
                                               (topic.encode(), queue_id, offset + take))
        finally:
            mf.release()
        if bad:                                         # never served: skipped, counted, logged
            end = self._log_end()
            if sum(self.repair.find(cq, topic, queue_id, offset + int(take[k]), end) for k in bad):
                # a damaged unit whose record is intact in the log: read again with it
                return AGAIN
            for k in bad:
                phys = int(cl_off[take[k]])
                self.damage.note(topic, queue_id, offset + int(take[k]), phys, self._stranger(phys))
            keep = np.ones(len(take), dtype=bool)
            keep[bad] = False
            if not keep.any():
                return GetResult(GetStatus.MESSAGE_DAMAGED, offset + used, mn, mx)
            at = room + 4 * len(sizes) + np.cumsum(sizes) - sizes
            sizes = sizes[keep]
            frame, _, headed = frame_records(frame, at[keep], sizes, room,
                                             _head(head, offset + used, mn, mx, len(sizes)))
        g = GetResult(GetStatus.FOUND, offset + used, mn, mx)
        data_at = room + 4 * len(sizes)
        g.records = (np.frombuffer(frame, "<i4", len(sizes), room), memoryview(frame)[data_at:])
        g.frame = (frame, room, headed)
        return g

    def _stranger(self, at: int) -> bool:
        """A refused unit points at an intact record (of its own size, whatever the unit says): the
        unit is damaged and points at another queue's or offset's record, the record is not damaged:
        how DamageCounter says it (read only for what is refused)."""
        m = self.commit_log.read_message(at)
        return m is not None and m.intact()

    def _found(self, cq, topic: str, queue_id: int, q: int) -> bool:
        """A damaged unit's record looked for in the log (unit_repair.py): True when found (read again)."""
        return self.repair.find(cq, topic, queue_id, q, self._log_end())

    def _repaired(self, cq, topic: str, queue_id: int, offset: int, cl_off, size) -> bool:
        """Units that may not stand for their record (unit_repair.suspects) looked for in the log: True
        when one was found there (the read starts again with it)."""
        bad = self.repair.suspects(cl_off, size, self.segments.min_offset, self.segments.max_offset)
        if not bad:
            return False
        end = self._log_end()
        return sum(self.repair.find(cq, topic, queue_id, offset + i, end) for i in bad) > 0

    def _log_end(self) -> int:
        """Where records may be served up to: the readable end (SYNC modes), else the log's end."""
        limit = self.readable_limit()
        return self.segments.max_offset if limit is None else limit

    def get_by_commitlog_offset(self, offset: int, size: int | None = None) -> codec.StoredMessage | None:
        return self._readable(self.commit_log.read_message(offset, size))

    def _readable(self, m: codec.StoredMessage | None) -> codec.StoredMessage | None:
        """``m`` if it ends where readers may be served (readable_limit), else None."""
        if m is None:
            return None
        limit = self.readable_limit()
        return m if limit is None or m.commitlog_offset + m.store_size <= limit else None

    def query_by_key(self, topic: str, key: str, max_count: int = 32, begin_ms: int = 0,
                     end_ms: int | None = None, whole_log: bool = False) -> list[codec.StoredMessage]:
        """By the index; entries of cleaned segments, other topics and hash collisions are skipped.
        ``whole_log``: past readable_limit too (the broker looking for its own records: a resend's
        earlier store, which it answers once store.confirm says so; never a consumer)."""
        if self.index is None:
            return []
        end_ms = end_ms if end_ms is not None else (1 << 62)
        out = []
        for phys in self.index.lookup(f"{topic}#{key}", max_count * 2 + 8, begin_ms, end_ms):
            if phys < self.segments.min_offset or self.topics.is_dead(topic, phys):
                continue
            m = self.commit_log.read_message(phys)
            if not whole_log:
                m = self._readable(m)
            if m is None or m.topic != topic or not (begin_ms <= m.store_timestamp_ms <= end_ms):
                continue
            if key in m.keys or m.properties.get(PROP_UNIQ_KEY) == key:
                out.append(m)
                if len(out) >= max_count:
                    break
        return out

    def _store_ts_at(self, unit_raw: bytes) -> int | None:
        off, size, _ = UNIT.unpack(unit_raw)
        mf = self.segments.find(off)
        if size <= 0 or mf is None or not mf.hold():
            return None
        try:
            pos = off - mf.start_offset
            if pos + size > mf.wrote_pos:
                return None
            return codec.I64.unpack_from(mf.buf, pos + codec.OFF_STORETIMESTAMP)[0]
        finally:
            mf.release()

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """Binary search of the queue on the store time of its messages."""
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            raw = cq.read(mid, 1)
            ts = self._store_ts_at(raw) if raw else None
            if ts is None:
                lo = mid + 1         # a unit whose message is gone counts as older
            elif ts >= timestamp_ms:
                hi = mid
            else:
                lo = mid + 1
        return lo

