"""Recovery at start: find the end of the valid log, cut what follows, make the
consume queues and the index agree with the log again.

* Normal (no abort file: the last run shut down cleanly): check the last
  ``recovery_scan_segments_normal`` (3) segments record by record and cut after
  the last valid one.
* Abnormal (abort file present: a crash, kill -9 or power loss): start at the
  earlier of (a) the segment holding the checkpoint's durable offsets and (b)
  RocketMQ's rule, the newest segment whose first record is not newer than the
  checkpoint's minimum timestamp less a safety margin; with no valid checkpoint,
  the first segment. Verify every record from there (magic, lengths, CRC32 of
  the body and of the record).

In both cases the log is cut only at a torn tail: after the last valid record,
with no valid record anywhere after it (and, with a valid checkpoint, above its
durable offset, where a power loss may have dropped any page). A bad record
followed by a valid one is damage: skipped up to the next valid record (found
by its magic and checked in full), kept, counted in the report and logged at
WARNING with its offsets and segment. A segment is deleted only when nothing
valid follows the log's end (see ``find_log_end``).

Then, in both cases: consume-queue units and index files past the log's end are
removed; every record after the last position whose dispatch was durable is
dispatched again (idempotently); a missing or emptied ``consumequeue/`` or
``index/`` is rebuilt from the log's first offset; each queue's minimum offset
is corrected to the log's minimum. The report says what was done.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..record import codec
from .checkpoint import CheckpointState
from .consume_queue import UNIT, UNIT_SIZE, ConsumeQueue, ConsumeQueueTable
from .dispatch import Dispatcher
from .index_file import IndexService
from .types import StoreError

if TYPE_CHECKING:
    from .commit_log import CommitLog

log = logging.getLogger("tidemq.store")

TIMESTAMP_MARGIN_MS = 3_000


@dataclass
class RecoveryReport:
    abnormal: bool = False
    checkpoint_valid: bool = False
    scan_from_offset: int = 0
    segments_scanned: int = 0
    records_scanned: int = 0
    log_min_offset: int = 0
    log_end_offset: int = 0
    end_reason: str = "end of data"
    bytes_cut: int = 0
    damaged_regions: int = 0          # bad records skipped (kept, not cut): regions up to the next valid record
    damaged_bytes: int = 0
    records_dropped_after_tear: int = 0   # valid records after a tear above the durable offset (cut)
    queue_units_cut: int = 0
    queues_rebuilt: list[str] = field(default_factory=list)
    consume_queues_rebuilt_all: bool = False
    index_rebuilt: bool = False
    index_files_dropped: list[str] = field(default_factory=list)
    redispatch_from_offset: int = 0
    units_redispatched: int = 0
    units_fixed: int = 0
    index_entries_redispatched: int = 0
    duration_ms: float = 0.0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kind = "abnormal" if self.abnormal else "normal"
        parts = [f"{kind} recovery in {self.duration_ms:.0f} ms: scanned {self.segments_scanned} segment(s), "
                 f"{self.records_scanned} record(s) from offset {self.scan_from_offset}; log ends at "
                 f"{self.log_end_offset} ({self.end_reason})"]
        if self.bytes_cut:
            parts.append(f"cut {self.bytes_cut} byte(s) after the last valid record")
        if self.damaged_regions:
            parts.append(f"skipped {self.damaged_regions} damaged region(s), {self.damaged_bytes} byte(s), "
                         f"kept in the log (never served)")
        if self.queue_units_cut:
            parts.append(f"dropped {self.queue_units_cut} consume-queue unit(s) past the log's end")
        if self.consume_queues_rebuilt_all:
            parts.append("rebuilt every consume queue from the commit log")
        if self.queues_rebuilt:
            parts.append(f"rebuilt queues {', '.join(self.queues_rebuilt)}")
        if self.problems:
            parts.append(f"PROBLEMS: {'; '.join(self.problems)}")
        if self.index_rebuilt:
            parts.append("rebuilt the index from the commit log")
        if self.units_redispatched or self.units_fixed:
            parts.append(f"re-dispatched {self.units_redispatched} unit(s), repaired {self.units_fixed}, "
                         f"from offset {self.redispatch_from_offset}")
        return "; ".join(parts)


def _scan_start(commit_log: CommitLog, abnormal: bool, cp: CheckpointState | None, scan_last: int) -> int:
    segs = commit_log.segments.segments
    if not segs:
        return 0
    if not abnormal:
        return segs[max(0, len(segs) - scan_last)].start_offset
    if cp is None:
        return segs[0].start_offset
    by_offset = min(cp.physic_offset, cp.logics_offset, cp.index_offset)
    start = segs[0].start_offset
    for mf in segs:
        if mf.start_offset <= by_offset:
            start = mf.start_offset
    # RocketMQ's rule: the newest segment whose first record is not newer than the checkpoint
    by_time = segs[0].start_offset
    limit_ms = cp.min_timestamp_ms - TIMESTAMP_MARGIN_MS
    for mf in reversed(segs):
        kind, _size = codec.check_record(mf.buf, 0, mf.size, verify_crc=False)
        if kind == codec.REC_OK:
            (ts,) = codec.I64.unpack_from(mf.buf, codec.OFF_STORETIMESTAMP)
            if ts <= limit_ms:
                by_time = mf.start_offset
                break
    return min(start, by_time)


def _scan_segment(mf, pos: int, rep: RecoveryReport, limit: int) -> tuple[int, int, int]:
    """Verify the records of one segment from ``pos`` up to ``limit`` (its size, or its seal): (kind
    that ends the run, position, size)."""
    buf = mf.mapping
    while True:
        pos, n, _ = codec.scan_run(buf, pos, limit)
        rep.records_scanned += n
        kind, size = codec.check_record(buf, pos, limit, verify_crc=True)
        if kind != codec.REC_OK:       # the fast loop and the full check agree: stop here
            return kind, pos, size
        rep.records_scanned += 1       # valid but unusual (e.g. tiny): the full check took it
        pos += size


def _resync(segments: list, i: int, pos: int, limit_of=lambda mf: mf.size) -> tuple[int, int] | None:
    """The next fully valid record after position ``pos`` of ``segments[i]``, in that segment or a
    later one (before ``limit_of(segment)``: its size, or its seal): (segment index, position), or
    None when no later byte of the log holds one (the proof that what follows may be cut)."""
    for k in range(i, len(segments)):
        mf = segments[k]
        if not mf.hold():
            continue
        try:
            at = codec.next_valid_record(mf.mapping, pos + 1 if k == i else 0, limit_of(mf), mf.start_offset)
        finally:
            mf.release()
        if at is not None:
            return k, at
    return None


def _valid_records_from(segments: list, k: int, pos: int, limit_of=lambda mf: mf.size) -> int:
    """How many valid records the log holds from position ``pos`` of ``segments[k]`` on."""
    n = 0
    found: tuple[int, int] | None = (k, pos)
    while found is not None:
        k, pos = found
        mf = segments[k]
        if not mf.hold():
            break
        try:
            pos, m, _ = codec.scan_run(mf.mapping, pos, limit_of(mf))
        finally:
            mf.release()
        n += m
        found = _resync(segments, k, pos, limit_of)
    return n


DAMAGE_LOG_MAX = 20          # damaged regions logged one by one at a start; the rest are counted


def _note_damage(rep: RecoveryReport, mf, start: int, end: int, end_path: str) -> None:
    rep.damaged_regions += 1
    rep.damaged_bytes += end - start
    where = mf.path if end_path == mf.path else f"{mf.path} to {end_path}"
    text = (f"damaged record(s) at commit-log offsets [{start}, {end}) ({end - start} bytes, {where}): "
            f"skipped, kept, not cut; the next valid record is at {end}; run `tidemq verify`")
    if len(rep.problems) < 1000:
        rep.problems.append(text)
    if rep.damaged_regions <= DAMAGE_LOG_MAX:
        log.warning("commit log: %s", text)
    elif rep.damaged_regions == DAMAGE_LOG_MAX + 1:
        log.warning("commit log: more damaged regions; only counted from here (see the recovery summary)")


def dispatched_end(queues: ConsumeQueueTable) -> int:
    """The end of the furthest record a consume-queue unit points at: the log was written at
    least up to here (0 when no queue says so)."""
    end = 0
    for cq in queues.all():
        if cq.max_offset > cq.min_offset:
            raw = cq.read(cq.max_offset - 1, 1)
            if raw:
                off, size, _ = UNIT.unpack(raw)
                end = max(end, off + size)
    return end


def find_log_end(commit_log: CommitLog, from_offset: int, rep: RecoveryReport,
                 durable_floor: int | None = None, written_end: int | None = None) -> int:
    """Verify records from ``from_offset``; returns the end of the last valid one.

    A record that does not verify ends the log only where it is a torn tail: no valid record
    follows it anywhere in the log (``_resync`` looked at every later byte, so later segments
    that are cut hold nothing valid). A bad record followed by a valid one is damage: the
    region up to the next valid record (magic, lengths, body and record CRC, its own offset)
    is skipped, kept, counted and reported, never a reason to cut.

    ``durable_floor``: the checkpoint's fsynced offset when the checkpoint is valid, else None.
    Above it (data never made durable, where a power loss can drop any page) a bad record is a
    tear and the log is cut there even when records that survived follow it: the log stays a
    prefix of what was written, as after any power loss; the report counts the records so
    dropped. Below it, a bad record with nothing valid after is kept up to the floor (acknowledged
    data; cutting it would reuse its offsets).

    ``written_end``: how far the log is known to have been written (the consume queues'
    furthest unit, the durable floor); None: unknown. In the last segment, the end of the data
    at or past it is the log's end without a search for records after it (the search reads every
    later byte: the never-written rest of the segment, up to a whole segment of page faults at
    every start). Segments are never deleted without the search.
    """
    end = from_offset
    segments = [mf for mf in commit_log.segments.segments if mf.end_offset > from_offset]
    i = 0
    pos = max(0, from_offset - segments[0].start_offset) if segments else 0
    floor = durable_floor if durable_floor is not None else -1
    limit_of = commit_log.seal_pos          # nothing at or past a seal is part of the log (log_failure.py)
    while i < len(segments):
        mf = segments[i]
        if not mf.hold():
            break
        try:
            kind, pos, size = _scan_segment(mf, pos, rep, limit_of(mf))
        finally:
            mf.release()
        phys = mf.start_offset + pos
        if kind != codec.REC_BLANK and commit_log.sealed_at(mf, pos):
            kind, size = codec.REC_BLANK, mf.size - pos      # sealed early: the log goes on next segment
        if kind == codec.REC_BLANK:
            rep.segments_scanned += 1
            end = phys + size
            i, pos = i + 1, 0
            continue
        at_tail = written_end is not None and phys >= written_end and i == len(segments) - 1
        nxt = None if at_tail else _resync(segments, i, pos, limit_of)
        if nxt is None and phys < floor:
            # acknowledged data up to the floor and nothing valid after it: keep it (never cut
            # below the durable offset), the floor is a record boundary
            j = next((k for k, m in enumerate(segments) if m.start_offset <= floor < m.end_offset), None)
            _note_damage(rep, mf, phys, floor, segments[j].path if j is not None else mf.path)
            end = floor
            if j is None:
                break
            rep.segments_scanned += j - i
            i, pos = j, floor - segments[j].start_offset
            continue
        if nxt is not None and (durable_floor is None or phys < floor):
            j, npos = nxt
            _note_damage(rep, mf, phys, segments[j].start_offset + npos, segments[j].path)
            rep.segments_scanned += j - i
            i, pos = j, npos
            continue
        rep.segments_scanned += 1
        end = phys
        rep.end_reason = {codec.REC_END: "end of data", codec.REC_TORN: f"torn record at {phys}",
                          codec.REC_CORRUPT: f"invalid record at {phys}"}[kind]
        if nxt is not None:        # a tear above the durable offset with survivors after it
            rep.records_dropped_after_tear = _valid_records_from(segments, *nxt, limit_of)
            rep.end_reason += (f" above the durable offset {durable_floor}: a tear; "
                               f"{rep.records_dropped_after_tear} never-flushed record(s) after it dropped")
            log.warning("commit log: %s", rep.end_reason)
        break
    return end


REWRITE_CHUNK_BYTES = 8 << 20


def _rewrite(commit_log: CommitLog, mf, pos: int, end: int) -> None:
    """Write ``mf``'s bytes [pos, end) again, as they are, before recovery's fsync. After a kill -9
    the page cache may hold pages a failed fsync marked clean without writing them (log_failure.py):
    an fsync does not write them, a power loss would take them back, yet recovery reads them and
    keeps what is there. Written again, they are dirty, and the fsync makes them durable (or fails,
    and the start with it). Above the checkpoint's durable offset only, after an abnormal stop."""
    fio = commit_log.fio
    while pos < end:
        n = min(REWRITE_CHUNK_BYTES, end - pos)
        fio.pwrite(mf.handle, mf.mapping[pos:pos + n], pos)
        pos += n


def unit_matches(commit_log: CommitLog, cq: ConsumeQueue, qoff: int, off: int, size: int) -> bool:
    """Does the record at ``off`` belong to this queue at this queue offset?"""
    mf = commit_log.segments.find(off)
    if mf is None or not mf.hold():
        return False
    try:
        pos = off - mf.start_offset
        if pos + size > mf.wrote_pos or commit_log.sealed_at(mf, pos) \
                or codec.I32.unpack_from(mf.buf, pos)[0] != size:
            return False
        qid, q, _ts, topic, _props = codec.decode_meta(mf.mapping, pos)
        return (qid, q, topic) == (cq.queue_id, qoff, cq.topic)
    except (IndexError, ValueError, UnicodeDecodeError):
        return False
    finally:
        mf.release()


def cut_queue(cq: ConsumeQueue, commit_log: CommitLog, log_end: int, verify_from: int) -> int:
    """Drop tail units that are torn, point past the log's end or into a sealed stretch of a
    segment (log_failure.py: records a failed fsync took), or (at or after ``verify_from``, where
    the queue may hold units of records a crash took back) point at a record of another queue or
    offset. Returns the number of units dropped. ConsumeQueue.truncate cuts the queue in memory
    before its files: an OSError from cutting the files leaves the queue cut."""
    new_max = queue_end(cq, commit_log, log_end, verify_from)
    dropped = cq.max_offset - new_max
    if dropped:
        cq.truncate(new_max)
    return dropped


def queue_end(cq: ConsumeQueue, commit_log: CommitLog, log_end: int, verify_from: int) -> int:
    """Where ``cq`` should end, as ``cut_queue`` says (it reads, changes nothing)."""
    new_max = cq.max_offset
    while new_max > cq.min_offset:
        lo = max(cq.min_offset, cq.file_start(new_max - 1), new_max - 4096)
        raw = cq.read(lo, new_max - lo)
        k = len(raw) // UNIT_SIZE
        while k > 0:
            off, size, _th = UNIT.unpack_from(raw, (k - 1) * UNIT_SIZE)
            if size > 0 and 0 <= off and off + size <= log_end and \
                    ((off < verify_from and not commit_log.in_sealed(off))
                     or unit_matches(commit_log, cq, lo + k - 1, off, size)):
                break
            k -= 1
        if k > 0:
            new_max = lo + k
            break
        new_max = lo
    return new_max


def correct_min_offset(cq: ConsumeQueue, log_min: int) -> None:
    """Move the queue's minimum to its first unit whose message is still in the log."""
    lo, hi = cq.min_offset, cq.max_offset
    if lo >= hi:
        return
    raw = cq.read(lo, 1)
    if raw:
        off, size, _ = UNIT.unpack(raw)
        if size > 0 and off >= log_min:
            return
    while lo < hi:   # first unit with a live message (units ascend in log offset)
        mid = (lo + hi) // 2
        raw = cq.read(mid, 1)
        ok = False
        if raw:
            off, size, _ = UNIT.unpack(raw)
            ok = size > 0 and off >= log_min
        if ok:
            hi = mid
        else:
            lo = mid + 1
    cq.min_offset = lo


def recover(commit_log: CommitLog, queues: ConsumeQueueTable, index: IndexService | None,
            dispatcher: Dispatcher, cp: CheckpointState | None, abnormal: bool, scan_last: int,
            queues_lost: bool, index_lost: bool) -> RecoveryReport:
    t0 = time.monotonic()
    rep = RecoveryReport(abnormal=abnormal, checkpoint_valid=cp is not None)
    segs = commit_log.segments
    start = _scan_start(commit_log, abnormal, cp, scan_last)
    rep.scan_from_offset = start
    for mf in segs.segments:            # everything before the scan is trusted and durable
        if mf.end_offset <= start:
            mf.wrote_pos = mf.flushed_pos = mf.size
    floor = None
    if cp is not None and segs.segments:
        floor = min(cp.physic_offset, segs.segments[-1].end_offset)
        floor = floor if floor >= segs.min_offset else None      # says nothing about this log
    written = None if queues_lost else max(dispatched_end(queues), floor or 0)
    end = find_log_end(commit_log, start, rep, floor, written) if segs.segments else 0
    if cp is not None and cp.physic_offset > max(end, segs.min_offset):
        raise StoreError(
            f"the commit log ends at {end} but the checkpoint says everything up to {cp.physic_offset} was on "
            f"disk: segments are missing (is a commit-log directory not mounted?). Refusing to start rather "
            f"than lose acknowledged messages and reuse their offsets. Bring the directory back; to accept "
            f"the loss instead, remove {commit_log.config.checkpoint_path}")
    for mf in segs.segments:            # segments wholly before the end are full (they end in BLANK)
        if mf.end_offset <= end:
            mf.wrote_pos = mf.size
    rep.bytes_cut = segs.truncate(end) if segs.segments else 0
    for mf in segs.segments:            # what survived a kill -9 may still be only in the page cache
        if mf.start_offset >= start and mf.wrote_pos:
            if abnormal:
                _rewrite(commit_log, mf, max(0, (floor or 0) - mf.start_offset), mf.wrote_pos)
            mf.flushed_pos = 0
            mf.flush()
    commit_log.flushed_offset = end
    log_min = segs.min_offset
    rep.log_min_offset, rep.log_end_offset = log_min, end

    if index is not None:
        before = [f.path for f in index.files]
        index.truncate_after(end)
        rep.index_files_dropped = [p for p in before if p not in {f.path for f in index.files}]

    if queues_lost and end > log_min:
        # consumequeue/ is gone or empty: rebuild every queue (and the index if it is gone too)
        rep.consume_queues_rebuilt_all = True
        saved, dispatcher.index = dispatcher.index, (dispatcher.index if index_lost else None)
        try:
            r = dispatcher.redispatch(commit_log, log_min, rebuild=True)
        finally:
            dispatcher.index = saved
        rep.units_redispatched += r.units_appended
        rep.index_rebuilt = index_lost and index is not None
        from_offset = end
    else:
        if (index_lost and index is not None) or cp is None:
            from_offset = log_min     # nothing says what was dispatched: check it all
            rep.index_rebuilt = index_lost and index is not None and end > log_min
        else:
            from_offset = max(log_min, min(cp.logics_offset, cp.index_offset, end))
        for cq in queues.all():
            rep.queue_units_cut += cut_queue(cq, commit_log, end, from_offset)
    rep.redispatch_from_offset = from_offset
    if index_lost:
        index_from = log_min                  # every record is indexed again (lookups drop duplicates)
    elif abnormal and cp is not None:
        index_from = max(log_min, cp.index_offset)
    else:
        index_from = None
    if from_offset < end:
        # after an abnormal stop the units there are written again even where they match (their pages
        # may be clean without being on disk: _rewrite)
        r = dispatcher.redispatch(commit_log, from_offset, index_from=index_from, rewrite=abnormal)
        rep.units_redispatched += r.units_appended
        rep.units_fixed += r.units_fixed
        rep.index_entries_redispatched += r.index_entries
        rep.queues_rebuilt += r.queues_rebuilt
    for cq in queues.all():
        correct_min_offset(cq, log_min)
    dispatcher.dispatched_offset = end
    rep.duration_ms = (time.monotonic() - t0) * 1000
    log.info("%s", rep.summary())
    return rep
