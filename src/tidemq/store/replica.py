"""A follower's side of the log: commit-log bytes copied from a leader, and the cut of a tail
that diverged from it (RocketMQ's HA model: the slave writes what the master sends at the
same physical offsets).

``ReplicaLog.append(offset, data)``: ``data`` is a stretch of the leader's log starting at
``offset``, which must be this log's end: whole records (and the BLANK that ends a segment),
within one segment. The frame's own CRC-32 covers its bytes in transit
(protocol/replication.py); every record is checked before a byte is written (lengths, magic,
its own physical offset field, an ASCII topic), so a frame that is not whole records where it says
is refused whole (``ReplicaError``): replica_scan.py, one pass (compiled) that also builds the
frame's consume-queue units and index items, under the put lock. Record CRCs are checked where records are read, as for any record
(a record damaged on the leader's disk is copied as it is and never served, here or there). The bytes are written byte-identical at
the same offsets, into a segment of the same name (created here when the leader's log moved
to the next one); then they are dispatched into the consume queues and the index: in one batch per frame
(units appended per queue, index items put together: dispatch.dispatch_batch, the put path's),
or, when a queue does not continue exactly where the frame's records say, from the log itself
(dispatch.redispatch, as recovery does). Topics the records name that the topic
table does not know yet are added (their queue counts follow the leader's table, copied by
the broker's state sync).

``ReplicaLog.truncate(end)``: cut everything after ``end`` (a returning old leader whose tail
the new leader never had): segments, consume-queue units and index files past it, and the
epoch file's entries that started after it.

``ReplicaLog.writable()``: the store becomes a leader's: every topic's next queue offsets from
its consume queues (the write path assigns them from there).

Both take the store's put lock: the writer, the dispatcher's healing and topic changes never
run at the same time.
"""

from __future__ import annotations

import logging
import threading

from ..record import codec
from ..record.codec import BLANK_MAGIC, MAGIC, OFF_PHYSICALOFFSET, SIZE_MAGIC
from . import replica_scan
from .commit_log import CommitLog
from .consume_queue import UNIT, ConsumeQueueTable
from .dispatch import Dispatcher
from .epochs import EpochFile
from .index_file import IndexService
from .put_lock import PutLock
from .replica_scan import ReplicaError
from .recovery import cut_queue
from .segment_queue import SegmentQueue
from .topics import TopicTable
from .writer import bind_queues

log = logging.getLogger("tidemq.store")


HOLE = UNIT.pack(0, 0, 0)       # a consume-queue unit of size 0: a message lost (dispatch.py's)


def check_frame(data, offset: int, segment_size: int) -> tuple[int, bool]:
    """Check that ``data`` (the log's bytes from ``offset``) is whole, intact records within one
    segment, a BLANK only last, ending that segment (given whole, or by its 8-byte header alone:
    ``read_span``'s way); (the store timestamp of its last record (0: none), whether it ends the
    segment with a BLANK). ReplicaError saying what is wrong otherwise (replica_scan.check)."""
    r = replica_scan.check(data, offset, segment_size)
    return r[2], r[3]


def _ascii_topic(buf, pos: int) -> bool:
    """Whether the record at ``pos`` (its lengths checked) names an ASCII topic, as every topic is
    (codec.valid_topic): one that does not is damage, copied as it is (replica_scan refuses it)."""
    t0 = pos + codec.OFF_BODY + codec.I32.unpack_from(buf, pos + codec.OFF_BODYLEN)[0] + 1
    return bytes(buf[t0:t0 + buf[t0 - 1]]).isascii()


class ReplicaLog:
    def __init__(self, segments: SegmentQueue, commit_log: CommitLog, queues: ConsumeQueueTable,
                 index: IndexService | None, dispatcher: Dispatcher, topics: TopicTable, epochs: EpochFile,
                 put_lock: threading.Lock, restore_topics, flush_after_append: bool,
                 checkpoint_below=lambda end: None) -> None:
        """``restore_topics``: adds topics the consume queues know and the table does not (the
        store's); ``flush_after_append``: fsync before append returns (SYNC_FLUSH);
        ``checkpoint_below(end)``: the checkpoint made to claim nothing past ``end`` (before a cut; None after it)."""
        self.segments = segments
        self.commit_log = commit_log
        self.queues = queues
        self.index = index
        self.dispatcher = dispatcher
        self.topics = topics
        self.epochs = epochs
        self.put_lock = put_lock
        self._restore_topics = restore_topics
        self.flush_after_append = flush_after_append
        self._checkpoint_below = checkpoint_below
        self.appended_bytes = 0
        self.raw_bytes = 0                 # bytes copied as they are (append_raw): damage on the leader
        self.raw_regions = 0
        self._after_raw = False

    @property
    def end(self) -> int:
        return self.segments.max_offset

    def confirmed(self) -> int:
        """What a follower may tell its leader it has: on disk with SYNC_FLUSH, written otherwise."""
        return self.commit_log.flushed_offset if self.flush_after_append else self.segments.max_offset

    def read(self, offset: int, max_bytes: int) -> tuple[int, bytes]:
        """What a leader sends: up to ``max_bytes`` of the log from ``offset`` (a record boundary),
        whole records within one segment (a record larger than ``max_bytes`` goes alone; the BLANK
        ending a segment goes with the records before it). (offset, b"") at the log's end. An
        offset before the log's first (cleaned away) reads from the first."""
        segs = self.segments
        offset = max(offset, segs.min_offset)
        while True:
            mf = segs.find(offset)
            if mf is None or not mf.hold():
                return offset, b""
            try:
                pos = offset - mf.start_offset
                limit = mf.wrote_pos
                if pos >= limit:
                    if mf.is_full:
                        offset = mf.end_offset          # the next segment
                        continue
                    return offset, b""
                buf = mf.mapping
                end = pos
                while end < limit:
                    size, magic = SIZE_MAGIC.unpack_from(buf, end)
                    if size <= 0 or end + size > mf.size:
                        break                           # never past the segment (damage: the follower refuses it)
                    if magic != BLANK_MAGIC and end > pos and end - pos + size > max_bytes:
                        break
                    end += size
                if end == pos:
                    raise ReplicaError(f"no record at {offset} to send (damaged log?)")
                return offset, bytes(buf[pos:end])
            finally:
                mf.release()

    def read_span(self, offset: int, max_bytes: int) -> tuple[int, bytes, bool, int]:
        """What a leader sends from ``offset``: (offset, bytes, raw, next offset). ``raw`` False: whole
        records, each one that ``check_frame`` takes, up to ``max_bytes`` (a larger record alone), and
        the segment's end as a BLANK's 8-byte header (whether the segment ends with a BLANK or was
        sealed early: its directory failed or went offline, commit_log.sealed; the follower's copy
        then ends that segment there too); True: a stretch that is not whole records (damaged on this
        disk), from ``offset`` to where the next valid record starts (codec.next_valid_record:
        recovery's rule) or the segment's written end, at most ``max_bytes``: a follower writes it as
        it is (``append_raw``). ``next``: where the next read goes on (past a BLANK, the next
        segment). (offset, b"", False, offset) at the log's end."""
        segs = self.segments
        offset = max(offset, segs.min_offset)
        while True:
            mf = segs.find(offset)
            if mf is None or not mf.hold():
                return offset, b"", False, offset
            try:
                pos = offset - mf.start_offset
                seal = self.commit_log.sealed.get(mf.start_offset) if self.commit_log.sealed else None
                limit = mf.wrote_pos if seal is None else min(mf.wrote_pos, seal)
                if seal is not None and pos >= seal:
                    if pos > seal:
                        offset = mf.end_offset          # past the seal: the next segment
                        continue
                    return offset, codec.encode_blank(mf.size - pos), False, mf.end_offset
                if pos >= limit:
                    if mf.is_full:
                        offset = mf.end_offset          # the next segment
                        continue
                    return offset, b"", False, offset
                buf = mf.mapping
                base = mf.start_offset
                # the records that plainly pass, in one compiled pass (replica_scan, the check alone); the
                # loop below goes on from the first it did not pass, by its own rules (a BLANK, a record
                # larger than max_bytes, a stretch that is not records)
                with memoryview(buf) as view:
                    end = pos + replica_scan.scan(view[pos:min(limit, pos + max_bytes)], base + pos, mf.size,
                                                  None, False)[1]
                blank = False
                while end < limit:
                    if end + 8 > mf.size:
                        break
                    size, magic = SIZE_MAGIC.unpack_from(buf, end)
                    if magic == BLANK_MAGIC and size == mf.size - end:
                        blank = True                    # the segment ends here: its header goes
                        break
                    if magic != MAGIC or size <= 0 or end + size > limit or \
                            codec.check_record(buf, end, limit, verify_crc=False)[0] != codec.REC_OK or \
                            codec.I64.unpack_from(buf, end + OFF_PHYSICALOFFSET)[0] != base + end or \
                            not _ascii_topic(buf, end):
                        break                           # not a record that check_frame takes
                    if end > pos and end - pos + size > max_bytes:
                        break
                    end += size
                if blank:
                    data = bytes(buf[pos:end]) + codec.encode_blank(mf.size - end)
                    return offset, data, False, mf.end_offset
                if end > pos:
                    return offset, bytes(buf[pos:end]), False, base + end
                nxt = codec.next_valid_record(buf, pos, limit, base)
                stop = min(limit if nxt is None else nxt, pos + max_bytes)
                return offset, bytes(buf[pos:stop]), True, base + stop
            finally:
                mf.release()

    def append_raw(self, offset: int, data: bytes) -> int:
        """Write a stretch of the leader's log that is not whole records (``read_span``'s raw bytes:
        damaged on its disk) as it is, at ``offset`` (this log's end), within one segment; the new
        end. Never dispatched: readers never reach it (no consume-queue unit names it), and recovery
        and the self-check skip it as they skip any damage in the middle of a log."""
        if not data:
            return self.end
        seg = self.segments.segment_size
        if offset - offset % seg + seg < offset + len(data):
            raise ReplicaError(f"{len(data)} raw bytes at {offset} cross the end of a segment")
        with self.put_lock:
            mf = self._segment_at_end(offset)
            pos = offset - mf.start_offset
            self.commit_log.fio.pwrite(mf.handle, data, pos)
            mf.wrote_pos = pos + len(data)
            self.appended_bytes += len(data)
            self.raw_bytes += len(data)
            self.raw_regions += 1
            self._after_raw = True       # the next records' queues may go on past units it held
        log.warning("replication: the leader's log has %d bytes at %d that are not whole records (damaged on its "
                    "disk): copied as they are, skipped by reads and recovery", len(data), offset)
        if self.flush_after_append:
            self.commit_log.flush()
        return mf.start_offset + mf.wrote_pos

    def _segment_at_end(self, offset: int):
        """The segment this log's end is in (made when the leader's log moved to the next one);
        ReplicaError when ``offset`` is not the end. Under the put lock."""
        seg = self.segments.segment_size
        end = self.segments.max_offset
        if offset != end and not (len(self.segments) == 0 and offset % seg == 0):
            raise ReplicaError(f"frame at {offset}, but this log ends at {end}")
        mf = self.segments.last
        if mf is None or mf.is_full:
            start = mf.end_offset if mf is not None else offset
            if start != offset:
                raise ReplicaError(f"frame at {offset}, but the next segment starts at {start}")
            mf = self.segments.new_segment(start)
        return mf

    def append(self, offset: int, data: bytes, defer_dispatch: bool = False) -> int:
        """Write ``data`` at ``offset`` (this log's end), dispatch it; the new end. ReplicaError when
        the bytes cannot be taken (nothing is written then); OSError from the disk.

        ``defer_dispatch``: the frame's consume-queue units and index entries are left pending in
        the put lock (put_lock.py), as a leader's answered SendMessage leaves them: a follower
        confirms a frame once its log has it, before the dispatch (RocketMQ's slave reports
        its commit-log offset; its ReputMessageService dispatches on its own), and calls
        ``MessageStore.drain_dispatch`` after the confirmation. Every read dispatches first."""
        if not data:
            return self.end
        seg = self.segments.segment_size
        with self.put_lock:
            # the check and what the dispatch needs, in one pass (replica_scan.py), before a byte is written
            _, _, last_ts, ends_segment, groups, index_items = replica_scan.check(
                data, offset, seg, self.topics.deleted, self.index is not None)
            mf = self._segment_at_end(offset)
            pos = offset - mf.start_offset
            self.commit_log.fio.pwrite(mf.handle, data, pos)     # as the put path's batches (commit_log.append)
            # a frame that ends with a BLANK (the check: only there) ends the segment, whether the BLANK
            # came whole or as its header alone
            mf.wrote_pos = mf.size if ends_segment else pos + len(data)
            w = self.commit_log.warmer            # its pages ahead warmed, as for the leader's writes
            if w is not None and mf.start_offset + mf.wrote_pos >= w.wake_offset:
                w.wake()
            if last_ts:
                mf.last_store_timestamp_ms = last_ts
            known = len(self.queues.all())
            end = offset + len(data)
            units = self._units(groups)
            self._after_raw = False
            if units is not None:
                if defer_dispatch and isinstance(self.put_lock, PutLock):
                    self.put_lock.defer((units, index_items, last_ts, offset, end))
                else:
                    self.dispatcher.dispatch_batch(units, index_items, last_ts, offset, end)
            else:
                try:
                    self.dispatcher.redispatch(self.commit_log, offset, index_from=offset)
                except OSError as e:
                    self.dispatcher._fail(offset, e)   # healed by the queue flush, as for a put
            if len(self.queues.all()) != known:
                self._restore_topics()
            self.appended_bytes += len(data)
        if self.flush_after_append:
            self.commit_log.flush()
        return mf.start_offset + mf.wrote_pos

    def _units(self, groups):
        """The units by consume queue (consume queue -> [first queue offset, bytearray of 20-byte
        units], as the put path's dispatch takes them) of the groups replica_scan found, or None when
        some queue would not continue exactly at its end, or none could be found (then the records are
        dispatched from the log, which rebuilds such a queue). Under the put lock, after the write."""
        if groups is None or self.dispatcher.pending_from is not None:
            return None
        units: dict = {}
        queues = self.queues
        for topic, qid, first, u in groups:
            cq = queues.get_or_create(topic, qid)
            if first == cq.max_offset:
                units[cq] = [first, u]
            elif self._after_raw and first > cq.max_offset:
                # after a damaged stretch copied as it is: the units it held stay holes (size 0:
                # reads skip them, verify reports them), as a rebuild past a corrupt record leaves
                units[cq] = [cq.max_offset, bytearray(HOLE * (first - cq.max_offset)) + u]
            else:
                return None
        return units

    def truncate(self, end: int) -> int:
        """Cut the log after ``end``; the bytes cut. An I/O error while the tail is wiped (its fsync)
        still leaves the log ending at ``end``, its queues, index and epochs cut with it, and is
        raised then: a wipe that began may have zeroed bytes the old end still counted."""
        failure: OSError | None = None
        with self.put_lock:
            if end >= self.segments.max_offset:
                return 0
            cut = self.segments.max_offset - max(end, 0)
            # first the checkpoint: a start after a crash in the cut must not take the cut stretch (or
            # the zeros a wipe left) for durable data below the checkpoint's offset (recovery.py)
            self._checkpoint_below(max(end, 0) if end > self.segments.min_offset else 0)
            try:
                try:
                    if end <= self.segments.min_offset:
                        end = 0                   # nothing of this log is kept: it starts again empty
                        cut = self.segments.clear()
                    else:
                        cut = self.segments.truncate(end)
                except OSError as e:
                    failure = e
                    last = self.segments.last
                    if last is not None and last.start_offset <= end <= last.start_offset + last.wrote_pos:
                        last.wrote_pos = last.flushed_pos = end - last.start_offset
                self.commit_log.flushed_offset = min(self.commit_log.flushed_offset, end)
                if self.index is not None:
                    self.index.truncate_after(end)
                units = 0
                for cq in self.queues.all():
                    units += cut_queue(cq, self.commit_log, end, end)
                self.dispatcher.dispatched_offset = min(self.dispatcher.dispatched_offset, end)
                self.epochs.truncate_after(end)
                self._resync_offsets()
            finally:
                self._checkpoint_below(None)      # checkpoints are written from below the cut again
        log.warning("replication: the log was cut at %d (%d bytes, %d consume-queue units after it were "
                    "never part of the leader's log)", end, cut, units)
        if failure is not None:
            raise failure
        return cut

    def writable(self) -> None:
        """Every topic's next queue offsets from its consume queues: the write path goes on from there."""
        with self.put_lock:
            self._resync_offsets()

    def _resync_offsets(self) -> None:
        for t in self.topics.topics.values():
            bind_queues(self.queues, t)
            for qid in range(t.queue_count):
                t.next_offsets[qid] = t.queues[qid].max_offset
