"""Consume queues heal themselves: at every start, normal or abnormal, a queue that lost units
is rebuilt from the commit log, so a deleted ``consumequeue/<topic>`` directory, a queue file
cut short or a file missing at the start or in the middle of a queue never makes a message
unreachable (even with ``config/queues.json`` lost too).

Consume queues are derived data, but which units a queue *should* hold is only known from the
log, and reading the whole log at every start costs too much. So the store remembers, in
``<root>/config/queues.json``, as of a checkpoint::

    {"ends": {topic: {queue id: max offset}},        # queues that hold nothing left out
     "firsts": {topic: {queue id: first file's first unit}},
     "log_offset": int}                               # every record before it is in "ends"

taken before the queues are flushed for that checkpoint (so what is remembered is durable);
written at most every SUMMARY_INTERVAL_S and at every clean stop, when it changed. At start,
after recovery, each queue is checked (``short_queues``):

* its end against the remembered one (its directory gone, a file truncated);
* its first file against the remembered one (a file missing at its start: the cleaner moves it
  only behind the log, so a later first file after a crash costs at most a needless rebuild);
* its files for a hole (one missing in the middle);
* its last unit against the log: the record there is of this topic, queue and queue offset;
* the log from ``log_offset`` to its end (``scan``: record headers only, nothing after a clean
  stop, at most SUMMARY_INTERVAL_S of writes after a crash): a queue that ends before a record
  of it. When queues.json is missing or unreadable (or of an older version), the whole log is
  scanned once instead, and a queue that starts after a record of it still in the log, ends
  before one, or does not exist is short too. This is how a topic known to topics.json whose
  queue directory is gone while the log holds its records is found with no summary at all.

Each short queue is emptied and rebuilt from the log's first offset
(``Dispatcher.redispatch_rebuild``: its records only, at their own queue offsets, records of
deleted topics skipped). Only then are the topics' write positions taken from the queues: a put
never reuses a queue offset.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field

from ..io import FileIO, read_whole, write_atomic
from ..record import codec
from .consume_queue import UNIT
from ..layout import config_dir
from .recovery import unit_matches

log = logging.getLogger("tidemq.store")

FILE = "queues.json"
SUMMARY_INTERVAL_S = 10.0


def path(root: str) -> str:
    return os.path.join(config_dir(root), FILE)


@dataclass
class Remembered:
    """What queues.json says; ``log_offset`` None: the whole log is to be scanned."""
    ends: dict[str, dict[str, int]] = field(default_factory=dict)
    firsts: dict[str, dict[str, int]] = field(default_factory=dict)
    log_offset: int | None = None

    def as_doc(self) -> dict:
        return {"ends": self.ends, "firsts": self.firsts, "log_offset": self.log_offset}


def snapshot(queues, log_offset: int) -> Remembered:
    """Every queue's end and first file now, with the log offset every record before which they
    include (read before the queues: records dispatched meanwhile are checked again at start)."""
    ends: dict[str, dict[str, int]] = {}
    firsts: dict[str, dict[str, int]] = {}
    for cq in queues.all():
        if cq.max_offset > 0:
            ends.setdefault(cq.topic, {})[str(cq.queue_id)] = cq.max_offset
            files = cq.files
            if files:
                firsts.setdefault(cq.topic, {})[str(cq.queue_id)] = files[0]
    return Remembered(ends, firsts, log_offset)


class QueueSummary:
    """queues.json: read at start, rewritten by the checkpoint when it changed."""

    def __init__(self, fio: FileIO, root: str) -> None:
        self.fio = fio
        self.path = path(root)
        self.written: dict | None = None

    def load(self) -> Remembered | None:
        """What the file remembers; None when it is missing, unreadable or of an older version
        (then the whole log is checked)."""
        try:
            if not self.fio.exists(self.path):
                return None                             # a new store, or one that lost it: heal() says which
            doc = json.loads(read_whole(self.fio, self.path).decode("utf-8"))
            rem = Remembered({str(t): {str(q): int(n) for q, n in qs.items()} for t, qs in doc["ends"].items()},
                             {str(t): {str(q): int(n) for q, n in qs.items()}
                              for t, qs in doc.get("firsts", {}).items()},
                             int(doc["log_offset"]) if doc.get("log_offset") is not None else None)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("%s is unreadable (%s): not used", self.path, e)
            return None
        self.written = rem.as_doc()
        return rem

    def save(self, rem: Remembered) -> None:
        doc = rem.as_doc()
        if doc == self.written:
            return
        try:
            write_atomic(self.fio, self.path, json.dumps(doc, sort_keys=True).encode("utf-8"))
        except OSError as e:        # a check for the next start, never a reason to fail a checkpoint
            log.warning("cannot remember the queues' ends in %s: %s", self.path, e)
            return
        self.written = doc


def _deleted(topics, topic: str) -> bool:
    return topics.get(topic) is None and topic in topics.deleted


def short_queues(queues, topics, remembered: Remembered, commit_log=None) -> dict[tuple[str, int], str]:
    """The queues to rebuild, each with why, from what was remembered and each queue's files
    (and, given the log, each queue's last unit)."""
    out: dict[tuple[str, int], str] = {}
    for topic, ends in remembered.ends.items():
        if _deleted(topics, topic):
            continue                                    # deleted since: nothing to bring back
        for q, want in ends.items():
            cq = queues.get(topic, int(q))
            have = cq.max_offset if cq is not None else 0
            if have < want:
                out[(topic, int(q))] = (f"ends at {have}, {want} remembered" if cq is not None and cq.files
                                        else f"missing, {want} unit(s) remembered")
    for topic, firsts in remembered.firsts.items():
        if _deleted(topics, topic):
            continue
        for q, want in firsts.items():
            cq = queues.get(topic, int(q))
            if cq is not None and cq.files and cq.files[0] > want:
                out.setdefault((topic, int(q)), f"its first file starts at unit {cq.files[0]}, {want} remembered")
    for cq in queues.all():
        starts = cq.file_starts()
        for a, b in zip(starts, starts[1:]):
            if b - a != cq.units_per_segment:
                out.setdefault((cq.topic, cq.queue_id), f"a file missing between units {a} and {b}")
                break
        if commit_log is not None and (cq.topic, cq.queue_id) not in out:
            why = _last_unit_problem(commit_log, cq)
            if why is not None:
                out[(cq.topic, cq.queue_id)] = why
    return out


def _last_unit_problem(commit_log, cq) -> str | None:
    """Why the queue's last unit does not describe its message, or None. A unit pointing at a
    damaged record is not a problem of the queue (reads skip the record)."""
    if cq.max_offset <= cq.min_offset:
        return None
    raw = cq.read(cq.max_offset - 1, 1)
    if not raw:
        return None
    off, size, _ = UNIT.unpack(raw)
    if off < commit_log.segments.min_offset:
        return None
    mf = commit_log.segments.find(off)
    if mf is None or not mf.hold():
        return None
    try:
        pos = off - mf.start_offset
        if pos + size > mf.wrote_pos or codec.check_record(mf.mapping, pos, mf.wrote_pos, True)[0] != codec.REC_OK:
            return None                                 # not an intact record there: damage, not the queue
    finally:
        mf.release()
    if unit_matches(commit_log, cq, cq.max_offset - 1, off, size):
        return None
    return f"its last unit (offset {cq.max_offset - 1}) points at another message (commit-log offset {off})"


def scan(commit_log, from_offset: int, is_dead) -> dict[tuple[str, int], list[int]]:
    """(topic, queue) -> [first queue offset, last queue offset, records] of the valid records
    from ``from_offset`` to the log's end (headers only; records of deleted topics left out)."""
    seen: dict[tuple[str, int], list[int]] = {}
    for kind, phys, _size, mf, pos in commit_log.iter_records(from_offset, verify_crc=False):
        if kind != codec.REC_OK:
            continue
        qid, qoff, _ts, topic, _props = codec.decode_meta(mf.mapping, pos)
        if is_dead(topic, phys):
            continue
        s = seen.get((topic, qid))
        if s is None:
            seen[(topic, qid)] = [qoff, qoff, 1]
        else:
            s[0] = min(s[0], qoff)
            s[1] = max(s[1], qoff)
            s[2] += 1
    return seen


def short_against_log(queues, topics, seen: dict[tuple[str, int], list[int]],
                      whole_log: bool) -> dict[tuple[str, int], str]:
    """Queues that end before a record of theirs the scan saw (and, when the scan covered the
    whole log, start after one or do not exist)."""
    out: dict[tuple[str, int], str] = {}
    for (topic, qid), (first, last, _n) in seen.items():
        if _deleted(topics, topic) or not codec.valid_topic(topic):
            continue
        cq = queues.get(topic, qid)
        if cq is None or (not cq.files and cq.max_offset <= cq.min_offset):
            out[(topic, qid)] = f"missing, the log holds its offsets {first}..{last}"
        elif cq.max_offset <= last:
            out[(topic, qid)] = f"ends at {cq.max_offset}, the log holds up to offset {last}"
        elif whole_log and first < cq.min_offset:
            out[(topic, qid)] = f"starts at {cq.min_offset}, the log holds it from offset {first}"
    return out


def heal(queues, topics, dispatcher, commit_log, remembered: Remembered | None) -> list[str]:
    """Rebuild every short queue from the log; returns "topic/queue (why)" for each."""
    log_min = commit_log.segments.min_offset
    whole = remembered is None or remembered.log_offset is None
    short = short_queues(queues, topics, remembered or Remembered(), commit_log)
    from_offset = log_min if whole else max(log_min, remembered.log_offset)
    if from_offset < commit_log.segments.max_offset:
        if whole:
            log.warning("no usable record of the consume queues' ends (config/%s missing, unreadable or of an "
                        "older version): every queue is checked against the whole log this start", FILE)
        for key, why in short_against_log(queues, topics, scan(commit_log, from_offset, dispatcher.is_dead),
                                          whole).items():
            short.setdefault(key, why)
    if not short:
        return []
    for (topic, qid) in short:
        queues.get_or_create(topic, qid).reset_to(0)
    rep = dispatcher.redispatch_rebuild(commit_log, set(short))
    done = [f"{t}/{q} ({why})" for (t, q), why in sorted(short.items())]
    log.warning("consume queues rebuilt from the commit log (%d unit(s)): %s", rep.units_appended, ", ".join(done))
    return done
