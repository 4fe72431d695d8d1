"""The commit log: one shared, append-only sequence of records over segments.

A single writer appends (the caller holds the store's put lock). A record that
does not fit in the rest of the active segment, keeping room for the 8-byte
BLANK record, ends the segment with BLANK and goes to the next one, so every
segment ends with a BLANK and no record ever spans two segments. Readers read
only up to a segment's ``wrote_pos``, which moves after the bytes are written,
so a reader never sees a half-written record.

The record layout is in ``codec.py``.

A failed fsync or write of the log is final for what it covered (log_failure.py): ``flush`` and
``append_items`` freeze the durable position where the last successful flush left it, call
``on_failure`` (the store's LogFailureHandler, which cuts the log back there, sealing the failed
segment, ``seal_failed``), and answer every later question about an offset it covered
(``failed_for``) with the failure.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from typing import TYPE_CHECKING, Iterator, NamedTuple

from .. import checked
from ..config import StoreConfig
from ..io import FileIO
from ..record import codec
from .. import layout
from . import record_loop
from ..record.codec import BLANK_MAGIC, BLANK_MIN, SIZE_MAGIC
from .consume_queue import UNIT
from .log_failure import LogFailed, LogFailure
from .mapped_file import MappedFile
from .segment_queue import SegmentQueue
from .segment_state import SegmentState

if TYPE_CHECKING:
    from .topics import TopicState

log = logging.getLogger("tidemq.store")

PWRITE_BATCH_MIN = 2           # a batch of fewer messages (a single put) is copied into the mapping: one
                               # pwrite per message costs more than the page faults it saves (bench/README.md)
SCRATCH_BYTES = 256 << 10       # the append's buffer at first; doubled when a batch does not fit,
SCRATCH_BYTES_MAX = 8 << 20     # up to this: a bigger batch goes in pwrites of this size


class Prepared(NamedTuple):
    """One message validated and encoded by the write path (writer.py), ready to append:
    the fields, their order and their meaning.

    The append assigns the queue id (round-robin when None) and the queue offset, as
    RocketMQ's CommitLog does with its topic-queue table, so both follow log order.

    The write path builds plain tuples in this order and the append loop unpacks them in
    this order (instances of this class are taken too). Plain tuples, because instances
    cost: built with tuple.__new__ from a tuple (~140 ns; ~350 ns through the class) and
    unpacked off UNPACK_SEQUENCE's fast path (exact tuples only; ~80 ns more), they made
    put_batch(1024) execute 8 % more instructions per message (callgrind; plain tuples:
    +0.1 %). tests/store/test_writer.py reads what every path builds back through these
    names, so the order is held by tests, not by a constructor."""

    index: int                          # position in the batch: results[index] is its outcome
    body: bytes
    topic: TopicState                   # the topic's write-path state (queue offsets, queues)
    properties: bytes                   # encoded, ending with codec.RECORD_CRC_TAIL
    queue_id: int | None                # None: round-robin over the topic's queues
    born_timestamp_ms: int
    born_host: bytes                    # 8 bytes (codec.encode_host)
    flag: int
    sys_flag: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_crc: int | None                # codec.body_crc(body); None: the append computes it
    tags_hash: int                      # codec.tags_hash(tags), 0: none
    index_keys: list | None             # dispatch.index_keys(...), None: nothing to index
    uniq_key: str | None
    tail_crc: int                       # codec.tail_crc(topic, properties): the append CRCs only the header


def read_sealed(fio: FileIO, root: str) -> dict[int, int]:
    """The early seals of a store (``config/sealed.json``): segment start offset -> position
    of the seal, where readers go on to the next segment. {} when there are none."""
    doc = checked.load(fio, layout.sealed_path(root), "early seals", check=_seals).doc
    return _seals(doc) if doc is not None else {}


def _seals(doc) -> dict[int, int]:
    """The seals a document holds (a checked document, tidemq/checked.py); raises on anything else.
    Lost seals (file and backup damaged) are not lost data: recovery and the scans find the
    next valid record after a seal by its magic and CRC."""
    return {int(k): int(v) for k, v in doc.items()}


class AppendError(Exception):
    """The log could not take more records (no segment could be created, or written: ``writing``).
    ``appended`` were written. ``log_failed``: the log failed (a write error other than ENOSPC, or
    a failure found before): the ``appended`` ones are after its durable end, not durable, and
    never will be (log_failure.py); the caller answers them FLUSH_FAILED and dispatches nothing."""

    def __init__(self, appended: int, cause: BaseException, writing: bool = False, log_failed: bool = False,
                 segment: MappedFile | None = None) -> None:
        super().__init__(str(cause))
        self.appended = appended
        self.cause = cause
        self.writing = writing          # the segment could not be written (else: not made, or a bad message)
        self.log_failed = log_failed
        self.segment = segment          # log_failed by this append: the segment whose write failed (else None)


def _drop_unit(units: dict, cq) -> None:
    """Take back the last unit added for ``cq`` (an append undone)."""
    u = units[cq]
    del u[1][-UNIT.size:]
    if not u[1]:
        del units[cq]


class PreparedItems:
    """A batch of commit_log.Prepared tuples as CommitLog.append_items takes it: the record loop
    (record_loop.append) over it, the size of its k-th record, the undo of a packed stretch whose
    bytes could not be written, and the message index of its k-th item (writer.py)."""

    def __init__(self, batch: list, now_ms: int, store_host: bytes, results, units: dict, index_items: list) -> None:
        self.batch, self.n, self.now_ms, self.store_host = batch, len(batch), now_ms, store_host
        self.results, self.units, self.index_items = results, units, index_items

    def index(self, k: int) -> int:
        return self.batch[k][0]

    def mark(self) -> int:
        return len(self.index_items)

    def pack(self, k: int, buf, pos: int, limit: int, base: int) -> tuple:
        r = self.results
        return record_loop.append(self.batch, k, buf, pos, limit, base, self.now_ms, self.store_host, self.units,
                                  self.index_items, r.phys, r.size, r.qid, r.qoff, r.uniq)

    def record_size(self, k: int) -> int:
        _i, body, t, props = self.batch[k][:4]
        return codec.record_size(len(body), len(t.name_bytes), len(props))

    def undo(self, first: int, end: int, mark: int) -> None:
        """Undo what the record loop did for ``batch[first:end]``, whose bytes could not be written:
        the topics' queue offsets and round-robin counters, the consume-queue units and index items
        (their results are refused by the caller). Last first: each item undoes the latest of its queue."""
        qids = self.results.qid
        for k in range(end - 1, first - 1, -1):
            item = self.batch[k]
            t = item[2]
            q = qids[item[0]]
            t.next_offsets[q] -= 1
            if item[4] is None:
                t.rr -= 1
            _drop_unit(self.units, t.queues[q])
        del self.index_items[mark:]


class SlicedItems:
    """Messages of one topic given as slices of one buffer (writer.put_slices), as
    CommitLog.append_items takes them: ``order`` (int64) the indexes of the messages to append, in
    order; the rest as record_loop.append_slices says."""

    def __init__(self, t: "TopicState", data, fields, order, tags_hashes, extra: bytes, now_ms: int, store_host: bytes,
                 results, units: dict, index_items: bytearray, index_prefix_crc: int, born_ms: int | None = None,
                 born_host: bytes | None = None, sys_flag: int = 0) -> None:
        """``index_items``: receives the hashed index items (index_file.HASHED_ITEM each); ``born_ms``,
        ``born_host`` (8 bytes), ``sys_flag``: every record's (None: ``now_ms``, ``store_host``)."""
        self.t, self.data, self.fields, self.order, self.tags_hashes = t, data, fields, order, tags_hashes
        self.extra, self.now_ms, self.store_host, self.results = extra, now_ms, store_host, results
        self.units, self.index_items, self.index_prefix_crc = units, index_items, index_prefix_crc
        self.born_ms = now_ms if born_ms is None else born_ms
        self.born_host = store_host if born_host is None else born_host
        self.sys_flag = sys_flag
        self.n = len(order)

    def index(self, k: int) -> int:
        return int(self.order[k])

    def mark(self) -> int:
        return len(self.index_items)

    def pack(self, k: int, buf, pos: int, limit: int, base: int) -> tuple:
        r = self.results
        return record_loop.append_slices(self.data, self.fields, self.order, k, self.tags_hashes, buf, pos, limit,
                                         base, self.now_ms, self.store_host, self.t, self.extra, self.units,
                                         self.index_items, self.index_prefix_crc, r.phys, r.size, r.qid, r.qoff,
                                         self.born_ms, self.born_host, self.sys_flag)

    def record_size(self, k: int) -> int:
        f = self.fields[self.order[k]]
        li, lt, lk, lp, lb = (int(x) for x in f[5:10])
        pl = record_loop.slice_properties_len(li, lt, lk, lp, len(self.extra))
        return codec.record_size(lb, len(self.t.name_bytes), pl)

    def undo(self, first: int, end: int, mark: int) -> None:
        """PreparedItems.undo for sliced messages (all round-robin)."""
        t, qids = self.t, self.results.qid
        for k in range(end - 1, first - 1, -1):
            q = qids[self.order[k]]
            t.next_offsets[q] -= 1
            t.rr -= 1
            _drop_unit(self.units, t.queues[q])
        del self.index_items[mark:]


class CommitLog:
    def __init__(self, config: StoreConfig, fio: FileIO, segments: SegmentQueue,
                 dir_offline=lambda d: False) -> None:
        self.config = config
        self._dir_offline = dir_offline
        self.fio = fio
        self.segments = segments
        self.store_host = codec.encode_host(config.store_host)
        # segments sealed before their end without a BLANK (their directory went offline or is
        # read-only): start offset -> position of the seal; kept in config/sealed.json so recovery
        # and every reader go on to the next segment there instead of taking it for the log's end
        self.sealed: dict[int, int] = {}
        self._sealed_path = layout.sealed_path(config.root_dir)
        self.flushed_offset = 0
        self.walked_offset = 0          # where the last walk of the log (recovery, re-dispatch) got to
        self._flush_lock = threading.Lock()
        # log_failure.py: the failures of this run (what each covered); ``_failing`` while a failure's
        # cut is not done (or could not be: for good), when nothing is appended or flushed;
        # ``on_failure(segment, error) -> LogFailure`` makes the cut (the store's handler)
        self.failures: list[LogFailure] = []
        self._failing = False
        self.on_failure = None
        self.max_record_size = config.segment_size_bytes - BLANK_MIN
        self.warmer = None              # a SegmentWarmer (warmer.py): woken when the log's end passes its mark
        self._scratch = bytearray(SCRATCH_BYTES)    # where append lays out a batch's records (one writer)
        segments.on_cut = self.forget_seals_after
        segments.on_added = self.forget_seals_after

    # Write ------------------------------------------------------------------------
    def append(self, batch: list[Prepared], now_ms: int, results, units: dict, index_items: list) -> int:
        """Append every prepared message, in order; returns how many (all of them).

        results:     types.PutResults, whose arrays the record loop fills (record_loop.py)
        units:       consume queue -> [first queue offset, bytearray of units] for dispatch
        index_items: receives (index keys, physical_offset) for messages with keys
        Raises AppendError (its ``appended`` first messages are in) when no segment can be made,
        the segment cannot be written (``writing``: pwrite failed) or a message cannot be packed.
        """
        return self.append_items(PreparedItems(batch, now_ms, self.store_host, results, units, index_items))

    def append_items(self, items: "PreparedItems | SlicedItems") -> int:
        """Append ``items`` (a batch as the record loops take it: PreparedItems, SlicedItems), in
        order; returns how many (all of them), or raises AppendError as ``append`` says.

        The records of a batch (``PWRITE_BATCH_MIN`` messages or more) are laid out in a buffer of
        this log's (``_scratch``) and written with one ``FileIO.pwrite`` per batch (per
        ``SCRATCH_BYTES_MAX`` of it), not copied into the segment's mapping: a first write into a
        fresh mapped page faults and the kernel zeroes the page (~26 % of a producing broker's
        CPU); pwrite fills page-cache pages without either. The mapping and pwrite share the page
        cache (MAP_SHARED), so readers go on reading the mapping; ``wrote_pos`` moves only after
        the pwrite returned.
        """
        if self._failing:
            raise AppendError(0, OSError(errno.EIO, "the commit log failed: writes refused until it is cut back "
                                                    "to its durable end (or, if it cannot be, a restart)"),
                              writing=True, log_failed=True)
        segs = self.segments
        mf = segs.last
        if mf is not None and not mf.is_full and self._dir_offline(mf.directory):
            self.seal_early(mf)       # its directory is offline or read-only: go on in another one
        if mf is None or mf.is_full:
            mf = self._roll(mf, 0)
        k, n = 0, items.n
        scratch = self._scratch
        mapped = n < PWRITE_BATCH_MIN
        while True:
            start = mf.wrote_pos
            room = mf.size - BLANK_MIN - start            # what records may take of the segment
            first, mark = k, items.mark()
            if mapped:                                     # into the mapping
                k, pos, error = items.pack(k, mf.mapping, start, start + room, mf.start_offset)
                pos -= start
            else:
                k, pos, error = items.pack(k, scratch, 0, min(room, len(scratch)), mf.start_offset + start)
            if pos and not mapped:
                try:
                    self.fio.pwrite(mf.handle, memoryview(scratch)[:pos], start)
                except OSError as e:
                    items.undo(first, k, mark)
                    if e.errno != errno.ENOSPC:        # the log failed here: final (log_failure.py)
                        self._freeze(mf)
                        raise AppendError(first, e, writing=True, log_failed=True, segment=mf) from e
                    self._wipe(mf, start, pos)
                    raise AppendError(first, e, writing=True) from e
            if pos:
                mf.wrote_pos = start + pos
                mf.last_store_timestamp_ms = items.now_ms
            if error is not None:
                raise AppendError(k, error) from error
            if k >= n:
                break
            size = items.record_size(k)
            if size <= room - pos:                         # the buffer is full, not the segment
                scratch = self._grow_scratch(size, len(scratch))
                continue
            if mf.wrote_pos == 0:
                raise AppendError(k, ValueError(f"record of {size} bytes cannot fit a {mf.size}-byte segment"))
            SIZE_MAGIC.pack_into(mf.buf, mf.wrote_pos, mf.size - mf.wrote_pos, BLANK_MAGIC)    # the rest
            mf.wrote_pos = mf.size
            mf = self._roll(mf, k)
        w = self.warmer
        if w is not None and mf.start_offset + mf.wrote_pos >= w.wake_offset:
            w.wake()
        return n

    def _grow_scratch(self, record_size: int, had: int) -> bytearray:
        """A bigger buffer for the rest of a batch that did not fit: double it (kept for the next
        batches) up to SCRATCH_BYTES_MAX; a record bigger than that gets one of its own size."""
        if had < SCRATCH_BYTES_MAX:
            self._scratch = bytearray(min(SCRATCH_BYTES_MAX, had * 2))
        if record_size <= len(self._scratch):
            return self._scratch
        return bytearray(record_size)

    def _wipe(self, mf: MappedFile, pos: int, length: int) -> None:
        """A pwrite that failed may have written part of its records: none of them may be read back
        (after a crash, recovery would take whole records there for the log's, and a shorter batch
        written there next would leave them after its end). Zeroed; where even that fails, the
        segment is sealed there (readers and recovery go on to the next segment)."""
        try:
            self.fio.zero_range(mf.handle, pos, length)
        except OSError as e:
            log.error("cannot wipe the failed write at %d of %s: %s; sealing the segment there", pos, mf.path, e)
            self.seal_early(mf)

    @staticmethod
    def _next_valid(mf: MappedFile, pos: int, limit: int) -> int | None:
        """The next position in ``mf`` before ``limit`` holding a whole valid record that says it is there."""
        return codec.next_valid_record(mf.mapping, pos + 1, min(mf.wrote_pos, limit), mf.start_offset)

    # Early seals --------------------------------------------------------------------------
    def load_sealed(self) -> None:
        self.sealed = read_sealed(self.fio, self.config.root_dir)

    def _save_sealed(self) -> None:
        self.fio.makedirs(os.path.dirname(self._sealed_path))
        checked.write(self.fio, self._sealed_path, {str(k): v for k, v in sorted(self.sealed.items())})

    def seal_early(self, mf: MappedFile) -> None:
        """End ``mf`` here: recorded durably (the BLANK written into a failing directory may never
        reach its disk), then a BLANK in memory for this run's readers where the mapping allows."""
        pos = mf.wrote_pos
        if mf.state in (SegmentState.WRITABLE, SegmentState.LOADED):
            mf.set_state(SegmentState.SEALED)
        self.sealed[mf.start_offset] = pos
        try:
            self._save_sealed()
        except OSError as e:
            log.error("cannot record the early seal of %s at %d: %s", mf.path, pos, e)
        try:
            if pos + BLANK_MIN <= mf.size:
                SIZE_MAGIC.pack_into(mf.buf, pos, mf.size - pos, BLANK_MAGIC)
        except TypeError:
            pass                      # a read-only mapping: the recorded seal is enough
        mf.wrote_pos = mf.size
        log.warning("segment %s sealed at %d (directory offline or read-only); the log goes on in another "
                    "directory", mf.path, pos)

    def seal_pos(self, mf: MappedFile) -> int:
        """Where ``mf``'s part of the log ends at most: its seal, or its size."""
        return self.sealed.get(mf.start_offset, mf.size) if self.sealed else mf.size

    def sealed_at(self, mf: MappedFile, pos: int) -> bool:
        """Was ``mf`` sealed early at or before ``pos`` (so what is there is not the log's end)?"""
        at = self.sealed.get(mf.start_offset)
        return at is not None and pos >= at

    def forget_seals_after(self, end: int) -> None:
        """The log ends at ``end`` now (a cut), or a segment starts there: a seal of a segment at or
        after it, or of the one holding it past it, seals what is no longer there (records appended
        there from now on would be skipped)."""
        size = self.config.segment_size_bytes
        stale = [k for k, at in self.sealed.items() if k >= end or k + at > end and k + size > end]
        if stale:
            for k in stale:
                del self.sealed[k]
            try:
                self._save_sealed()
            except OSError as e:
                log.error("cannot forget the seals of segments cut from the log (%s): %s", stale, e)

    def in_sealed(self, offset: int) -> bool:
        """Is ``offset`` at or after the seal of its segment (nothing there is part of the log)?"""
        if not self.sealed:
            return False
        size = self.config.segment_size_bytes
        start = offset - offset % size
        at = self.sealed.get(start)
        return at is not None and offset - start >= at

    def prune_sealed(self) -> None:
        gone = [k for k in self.sealed if k < self.segments.min_offset]
        if gone:
            for k in gone:
                del self.sealed[k]
            self._save_sealed()

    def _roll(self, current: MappedFile | None, appended: int) -> MappedFile:
        start = current.end_offset if current is not None else 0
        try:
            return self.segments.new_segment(start)
        except OSError as e:
            raise AppendError(appended, e) from e

    # Read -------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.segments.min_offset

    @property
    def max_offset(self) -> int:
        return self.segments.max_offset

    def read_message(self, offset: int, size: int | None = None) -> codec.StoredMessage | None:
        mf = self.segments.find(offset)
        if mf is None or not mf.hold():
            return None
        try:
            pos = offset - mf.start_offset
            if size is None:
                if pos + 8 > mf.wrote_pos:
                    return None
                size = codec.I32.unpack_from(mf.buf, pos)[0]
            if size < codec.FIXED_OVERHEAD or pos + size > mf.wrote_pos or self.sealed_at(mf, pos):
                return None
            m = codec.decode_record(mf.mapping, pos, size)
            return m if m.intact() else None       # a damaged record is never served
        except codec.CodecError:
            return None
        finally:
            mf.release()

    def iter_records(self, from_offset: int, verify_crc: bool = True) -> Iterator[tuple]:
        """Walk the log from a record boundary to its end, in order.

        Yields (kind, physical_offset, size, segment, pos) where kind is a codec.REC_*
        value; BLANK moves to the next segment; anything else than OK/BLANK ends the walk
        (it is yielded, so recovery can report where and why the log ends).
        """
        for mf in list(self.segments.segments):
            if mf.end_offset <= from_offset:
                continue
            self.walked_offset = max(from_offset, mf.start_offset)
            if not mf.hold():
                continue
            try:
                pos = max(0, from_offset - mf.start_offset)
                limit = self.seal_pos(mf)        # nothing at or past a seal is part of the log
                buf = mf.mapping
                while True:
                    kind, size = codec.check_record(buf, pos, limit, verify_crc)
                    if kind == codec.REC_OK:
                        yield kind, mf.start_offset + pos, size, mf, pos
                        pos += size
                        continue
                    if kind != codec.REC_BLANK and mf.start_offset + pos < self.flushed_offset \
                            and not self.sealed_at(mf, pos):
                        # below what was made durable this is corruption recovery kept, not the
                        # log's end: report it and go on at the next valid record
                        yield codec.REC_CORRUPT, mf.start_offset + pos, 0, mf, pos
                        nxt = self._next_valid(mf, pos + 1, limit)
                        if nxt is not None:
                            pos = nxt
                            continue
                        break
                    if kind != codec.REC_BLANK and self.sealed_at(mf, pos):
                        yield codec.REC_BLANK, mf.start_offset + pos, mf.size - pos, mf, pos
                        break
                    yield kind, mf.start_offset + pos, size, mf, pos
                    if kind != codec.REC_BLANK:
                        return
                    break
            finally:
                mf.release()

    # Flush ------------------------------------------------------------------------
    def flush(self) -> int:
        """fsync every segment with unflushed bytes; returns the durable offset. An fsync that fails
        is final for what it covered (log_failure.py): the durable offset stays where the fsyncs that
        succeeded left it, ``on_failure`` cuts the log back there, and LogFailed is raised."""
        failed = None
        with self._flush_lock:
            if self._failing:
                return self.flushed_offset     # a failure's cut is under way (or could not be made)
            target = self.segments.max_offset
            for mf in list(self.segments.segments):
                if mf.end_offset <= self.flushed_offset:
                    continue
                if mf.wrote_pos > mf.flushed_pos and mf.state is not SegmentState.FAILED:
                    if mf.hold():
                        try:
                            mf.flush()
                        except OSError as e:
                            failed = (mf, e)
                            break
                        finally:
                            mf.release()
            if failed is None:
                if target > self.flushed_offset:
                    self.flushed_offset = target
                return self.flushed_offset
            self._freeze_locked(failed[0])
        raise LogFailed(self.fail(*failed)) from failed[1]

    def _freeze(self, mf: MappedFile) -> None:
        with self._flush_lock:
            self._freeze_locked(mf)

    def _freeze_locked(self, mf: MappedFile) -> None:
        """Under the flush lock, ``mf`` having failed: nothing is appended or flushed from here until
        the cut; the durable offset is where the fsyncs that succeeded left the log: the first segment
        (from the durable offset on) not wholly flushed ends it, at its last fsync (``mf``'s own, after
        a flush that made every segment before it durable; an earlier one after a failed write)."""
        self._failing = True
        d = self.flushed_offset
        for m in list(self.segments.segments):
            if m.end_offset <= d:
                continue
            d = max(d, m.start_offset + m.flushed_pos)
            if m.flushed_pos < m.wrote_pos or m is mf:
                break
        self.flushed_offset = d

    def fail(self, mf: MappedFile, error: OSError) -> LogFailure:
        """After ``_freeze``: the cut (``on_failure``), holding no lock. Without a handler (a log
        used alone) the log just stays frozen."""
        handler = self.on_failure
        if handler is not None:
            return handler(mf, error)
        f = LogFailure(mf.directory, mf.path, self.flushed_offset, self.segments.max_offset, str(error),
                       getattr(error, "errno", None), 0)
        self.halt(f)
        return f

    def seal_failed(self, mf: MappedFile, durable_end: int) -> int:
        """Seal the log at ``durable_end`` after ``mf`` failed (an fsync or write of it): the segment
        holding ``durable_end`` there, every later one at its start; ``mf`` is FAILED, the others
        SEALED, so that no reader of this run and no walk of the log (re-dispatch, healing) goes past
        the seals; then they are recorded (config/sealed.json: the next start goes past them too),
        and only then marked with a BLANK in memory where the mapping allows (for readers of raw
        bytes: the replication copy). OSError when recording fails (the seals hold in memory: the log
        must not go on; the next start may find the records again). Returns where the log goes on:
        the end of its last segment. Under the put lock."""
        segs = [m for m in self.segments.segments if m.end_offset > durable_end]
        for m in segs:
            self.sealed[m.start_offset] = max(0, durable_end - m.start_offset)
        for m in segs:
            if m is mf:
                if m.state is not SegmentState.FAILED:
                    m.set_state(SegmentState.FAILED)
            elif m.state in (SegmentState.WRITABLE, SegmentState.LOADED):
                m.set_state(SegmentState.SEALED)
            m.wrote_pos = m.size
        self._save_sealed()
        # only once the seals are recorded: a BLANK found after a crash with no seal recorded would
        # end the log there while consume queues the checkpoint trusts still point past it
        for m in segs:
            pos = self.sealed[m.start_offset]
            try:
                if pos + BLANK_MIN <= m.size:
                    SIZE_MAGIC.pack_into(m.buf, pos, m.size - pos, BLANK_MAGIC)
            except (TypeError, ValueError):
                pass                  # a read-only or closed mapping: the seal is enough
        return segs[-1].end_offset if segs else self.segments.max_offset

    def resume(self, failure: LogFailure) -> None:
        """The cut is done: the log goes on at ``failure.resume_offset`` (nothing before it is waiting
        for a flush: what the failure covered is out of the log)."""
        with self._flush_lock:
            self.failures.append(failure)
            self.flushed_offset = max(self.flushed_offset, failure.resume_offset)
            self._failing = False

    def halt(self, failure: LogFailure) -> None:
        """The log cannot go on in this process: frozen for good."""
        with self._flush_lock:
            self.failures.append(failure)
            self._failing = True

    @property
    def frozen(self) -> bool:
        """A failure froze the log: its cut is under way, or could not be made (nothing is appended
        or flushed; ``flushed_offset`` is the durable end)."""
        return self._failing

    def failed_for(self, end: int) -> LogFailure | None:
        """The failure that took the record ending at ``end``, or None."""
        for f in self.failures:
            if f.covers(end):
                return f
        return None

    def dirty_bytes(self) -> int:
        return self.segments.max_offset - self.flushed_offset
