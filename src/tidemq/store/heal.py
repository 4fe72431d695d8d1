"""Consume queues heal themselves: at every start, normal or abnormal, a queue that lost units
is rebuilt from the commit log, so a deleted ``consumequeue/<topic>`` directory, a queue file
cut short or a file missing in the middle of a queue never makes a message unreachable.

Consume queues are derived data, but which units a queue *should* hold is only known from the
log, and reading the whole log at every start costs too much. So the store remembers, in
``<root>/config/queues.json``, every queue's end (its max offset) as of a checkpoint (taken
before the queues are flushed for it, so what is remembered is durable); written at most every
SUMMARY_INTERVAL_S and at every clean stop, when it changed. At start, after recovery:

* a queue whose end is below what was remembered (its directory gone, a file truncated), or
* a queue whose files leave a hole (one missing in the middle),

is emptied and rebuilt from the log's first offset (``Dispatcher.redispatch_rebuild``: its
records only, at their own queue offsets, records of deleted topics skipped). Only then are the
topics' write positions taken from the queues: a put never reuses a queue offset.

What this does not see: queues.json lost together with the queues (then `tidemq verify`, which
walks the whole log, reports them) and units after the last remembered end (recovery's
re-dispatch from the checkpoint brings those back).
"""

from __future__ import annotations

import json
import logging
import os

from ..io import FileIO, read_whole, write_atomic
from .layout import config_dir

log = logging.getLogger("tidemq.store")

FILE = "queues.json"
SUMMARY_INTERVAL_S = 10.0


def path(root: str) -> str:
    return os.path.join(config_dir(root), FILE)


def snapshot(queues) -> dict[str, dict[str, int]]:
    """Every queue's end now: {topic: {queue id: max offset}} (queues that hold nothing left out)."""
    out: dict[str, dict[str, int]] = {}
    for cq in queues.all():
        if cq.max_offset > 0:
            out.setdefault(cq.topic, {})[str(cq.queue_id)] = cq.max_offset
    return out


class QueueSummary:
    """queues.json: read at start, rewritten by the checkpoint when it changed."""

    def __init__(self, fio: FileIO, root: str) -> None:
        self.fio = fio
        self.path = path(root)
        self.written: dict | None = None

    def load(self) -> dict[str, dict[str, int]]:
        try:
            if not self.fio.exists(self.path):
                return {}
            doc = json.loads(read_whole(self.fio, self.path).decode("utf-8"))
            ends = {str(t): {str(q): int(n) for q, n in qs.items()} for t, qs in doc["ends"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("%s is unreadable (%s): queues are not checked against it this start", self.path, e)
            return {}
        self.written = ends
        return ends

    def save(self, ends: dict[str, dict[str, int]]) -> None:
        if ends == self.written:
            return
        try:
            write_atomic(self.fio, self.path, json.dumps({"ends": ends}, sort_keys=True).encode("utf-8"))
        except OSError as e:        # a check for the next start, never a reason to fail a checkpoint
            log.warning("cannot remember the queues' ends in %s: %s", self.path, e)
            return
        self.written = ends


def short_queues(queues, topics, remembered: dict[str, dict[str, int]]) -> dict[tuple[str, int], str]:
    """The queues to rebuild, each with why."""
    out: dict[tuple[str, int], str] = {}
    for topic, ends in remembered.items():
        if topics.get(topic) is None and topic in topics.deleted:
            continue                                    # deleted since: nothing to bring back
        for q, want in ends.items():
            cq = queues.get(topic, int(q))
            have = cq.max_offset if cq is not None else 0
            if have < want:
                out[(topic, int(q))] = (f"ends at {have}, {want} remembered" if cq is not None and cq.files
                                        else f"missing, {want} unit(s) remembered")
    for cq in queues.all():
        starts = cq.file_starts()
        for a, b in zip(starts, starts[1:]):
            if b - a != cq.units_per_segment:
                out.setdefault((cq.topic, cq.queue_id), f"a file missing between units {a} and {b}")
                break
    return out


def heal(queues, topics, dispatcher, commit_log, remembered: dict[str, dict[str, int]]) -> list[str]:
    """Rebuild every short queue from the log; returns "topic/queue (why)" for each."""
    short = short_queues(queues, topics, remembered)
    if not short:
        return []
    for (topic, qid) in short:
        queues.get_or_create(topic, qid).reset_to(0)
    rep = dispatcher.redispatch_rebuild(commit_log, set(short))
    done = [f"{t}/{q} ({why})" for (t, q), why in sorted(short.items())]
    log.warning("consume queues rebuilt from the commit log (%d unit(s)): %s", rep.units_appended, ", ".join(done))
    return done
