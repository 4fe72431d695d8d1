"""Self-check of a store (``MessageStore.check()``, ``tidemq verify``).

Walks every commit-log segment record by record (magic, lengths, CRC32 of the
body, physical offset written in the record), every consume-queue unit (it
points at a record of that topic, queue and queue offset) and every index file
header. Reads only; reports at most 1,000 problems.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..record import codec
from .consume_queue import UNIT, UNIT_SIZE

if TYPE_CHECKING:
    from .store import MessageStore

UNITS_PER_READ = 4096


@dataclass
class CheckReport:
    ok: bool = True
    segments: int = 0
    records: int = 0
    bytes: int = 0
    queues: int = 0
    units: int = 0
    index_files: int = 0
    damaged_regions: int = 0        # stretches of the log that fail their checks (skipped by readers)
    problems: list[str] = field(default_factory=list)

    def problem(self, text: str) -> None:
        self.ok = False
        if len(self.problems) < 1000:
            self.problems.append(text)


def check_store(store: "MessageStore", progress: Callable[[int, int], None] | None = None) -> "CheckReport":
    rep = CheckReport()
    segs = store.segments
    log_min, log_end = segs.min_offset, segs.max_offset
    total = max(1, log_end - log_min)
    expected = log_min
    ends: dict[tuple[str, int], int] = {}      # per queue: the queue offset after its last record in the log
    for kind, phys, size, mf, pos in store.commit_log.iter_records(log_min, verify_crc=True):
        if phys != expected:
            rep.problem(f"log: record at {phys}, expected the next one at {expected}")
        if kind == codec.REC_OK:
            rep.records += 1
            rep.bytes += size
            (stored_phys,) = codec.I64.unpack_from(mf.buf, pos + codec.OFF_PHYSICALOFFSET)
            if stored_phys != phys:
                rep.problem(f"log: record at {phys} says its offset is {stored_phys}")
            qid, qoff, _ts, topic, _props = codec.decode_meta(mf.mapping, pos)
            if not store.topics.is_dead(topic, phys):
                key = (topic, qid)
                if qoff + 1 > ends.get(key, 0):
                    ends[key] = qoff + 1
            expected = phys + size
        elif kind == codec.REC_BLANK:
            expected = phys + size
        elif phys < log_end:
            rep.damaged_regions += 1
            what = {codec.REC_END: "zeroes", codec.REC_TORN: "a torn record", codec.REC_CORRUPT: "an invalid record"}
            rep.problem(f"log: {what[kind]} at {phys} ({mf.path}, position {pos}) before the log's end {log_end}")
        if progress is not None and rep.records % 65536 == 0:
            progress(phys - log_min, total)
    rep.segments = len(segs)
    if expected < log_end:
        rep.problem(f"log: valid records end at {expected}, the log says {log_end}")

    for cq in store.queues.all():
        rep.queues += 1
        t = store.topics.get(cq.topic)
        if t is None or cq.queue_id >= t.queue_count:
            rep.problem(f"queue {cq.topic}/{cq.queue_id}: not in the topic table")
        off = cq.min_offset
        prev = -1
        while off < cq.max_offset:
            raw = cq.read(off, UNITS_PER_READ)
            if not raw:
                rep.problem(f"queue {cq.topic}/{cq.queue_id}: units from {off} unreadable")
                break
            for i, (cl, size, _th) in enumerate(UNIT.iter_unpack(raw)):
                qoff = off + i
                rep.units += 1
                if size <= 0 or cl < prev:
                    rep.problem(f"queue {cq.topic}/{cq.queue_id}: unit {qoff} is invalid ({cl}, {size})")
                    continue
                prev = cl
                if cl < log_min:
                    continue
                m = store.commit_log.read_message(cl, size)
                if m is None:
                    rep.problem(f"queue {cq.topic}/{cq.queue_id}: unit {qoff} points at no record ({cl}, {size})")
                elif m.topic != cq.topic or m.queue_id != cq.queue_id or m.queue_offset != qoff:
                    rep.problem(f"queue {cq.topic}/{cq.queue_id}: unit {qoff} points at {m.topic}/{m.queue_id}"
                                f"@{m.queue_offset}")
            off += len(raw) // UNIT_SIZE
    check_queue_ends(store, ends, rep)
    if store.index is not None:
        for f in store.index.files:
            rep.index_files += 1
            if not (1 <= f.count <= f.entries):
                rep.problem(f"index {f.path}: entry count {f.count} out of range")
    if progress is not None:
        progress(total, total)
    return rep


def check_queue_ends(store: "MessageStore", ends: dict[tuple[str, int], int], rep: CheckReport) -> None:
    """Every queue the log has records of exists and reaches its last record (a queue missing or
    cut short makes messages unreachable)."""
    for (topic, qid), end in sorted(ends.items()):
        cq = store.queues.get(topic, qid)
        if cq is None or not cq.files and cq.max_offset == 0:
            rep.problem(f"queue {topic}/{qid}: missing; the log holds its messages up to queue offset {end - 1}")
        elif cq.max_offset < end:
            rep.problem(f"queue {topic}/{qid}: short: its units end at {cq.max_offset}, the log holds its "
                        f"messages up to queue offset {end - 1}")
