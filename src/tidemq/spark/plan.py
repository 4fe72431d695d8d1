"""Offsets and partitions, in the style of Spark's Kafka connector.

Offsets of a read are a JSON object ``{"topic": {"queue id": offset}}`` (what a stream
checkpoints per micro-batch). ``startingOffsets`` / ``endingOffsets``: "earliest",
"latest" or such a JSON, where -2 means earliest and -1 latest for one queue;
``startingTimestamp`` / ``endingTimestamp`` (ms): the first message stored at or after
that time, per queue. A range is read by one partition per queue, split every
``maxRecordsPerPartition`` offsets.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from .backend import Backend, DataLossError

log = logging.getLogger("tidemq.spark")

EARLIEST, LATEST = -2, -1
Offsets = dict[str, dict[str, int]]


@dataclass(frozen=True)
class Range:
    topic: str
    queue_id: int
    start: int
    end: int
    archived: bool = False          # read from the archive (tidemq.spark.tiered), not the live log


def topics_of(options) -> list[str]:
    raw = options.get("topics") or options.get("topic") or ""
    topics = [t.strip() for t in raw.split(",") if t.strip()]
    if not topics:
        raise ValueError("tidemq: the option 'topic' (or 'topics', comma-separated) is required")
    return topics


def flag(options, name: str, default: bool) -> bool:
    v = options.get(name)
    if v is None:
        return default
    if str(v).lower() not in ("true", "false"):
        raise ValueError(f"tidemq: option {name} must be true or false, not {v!r}")
    return str(v).lower() == "true"


def int_option(options, name: str, default: int | None) -> int | None:
    v = options.get(name)
    if v is None or v == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"tidemq: option {name} must be an integer, not {v!r}") from None


def resolve(backend: Backend, topics: list[str], spec: str | None, timestamp_ms: int | None,
            default: int, name: str | None = None, tiered: bool = False) -> Offsets:
    """Per-queue offsets for a starting/ending spec (a JSON spec may leave queues out: they get default).
    ``name``: the option's name, given where an offset past a queue's end is an error (endingOffsets).
    ``tiered``: the archive holds what the log lost, so "earliest" is a queue's first offset ever, 0."""
    given: dict = {}
    if spec and spec not in ("earliest", "latest"):
        try:
            given = json.loads(spec)
            assert isinstance(given, dict) and all(isinstance(v, dict) for v in given.values())
        except (ValueError, AssertionError):
            raise ValueError(f"tidemq: offsets must be 'earliest', 'latest' or JSON like "
                             f"{{\"topic\": {{\"0\": 42}}}}, not {spec!r}") from None
    elif spec:
        default = EARLIEST if spec == "earliest" else LATEST
    out: Offsets = {}
    for t in topics:
        per = {}
        for q in range(backend.queue_count(t)):
            mn, mx = backend.queue_range(t, q)
            want = int(given.get(t, {}).get(str(q), default))
            if timestamp_ms is not None and str(q) not in given.get(t, {}):
                per[str(q)] = backend.offset_at(t, q, timestamp_ms)
            elif want == EARLIEST:
                per[str(q)] = 0 if tiered else mn
            elif want == LATEST:
                per[str(q)] = mx
            else:
                if name is not None and want > mx:
                    raise ValueError(f"tidemq: {name} asks for {t} queue {q} up to {want}, past its end {mx}")
                per[str(q)] = want
        out[t] = per
    return out


def ranges(backend: Backend, start: Offsets, end: Offsets, fail_on_data_loss: bool,
           max_per_partition: int, tiered: bool = False) -> list[Range]:
    """The (split) ranges between two offset sets, with start offsets checked against what is left;
    ``tiered``: offsets below what is left are read from the archive (which checks they are there)."""
    out = []
    for t, queues in end.items():
        for q, e in queues.items():
            s = start.get(t, {}).get(q, 0)         # a queue new since `start`: from its beginning
            if e <= s:
                continue
            mn, _ = backend.queue_range(t, int(q))
            if s < mn and tiered:
                cut = min(mn, e)
                out += [Range(t, int(q), lo, min(cut, lo + max_per_partition), True)
                        for lo in range(s, cut, max_per_partition)]
                s = cut
            elif s < mn:
                msg = (f"offsets [{s}, {min(mn, e)}) of {t} queue {q} are no longer in the store "
                       f"(cleaned away; the queue now starts at {mn})")
                if fail_on_data_loss:
                    raise DataLossError(msg + ". Set failOnDataLoss=false to skip them.")
                log.warning("tidemq: %s: skipped (failOnDataLoss=false)", msg)
                s = min(mn, e)
            for lo in range(s, e, max_per_partition):
                out.append(Range(t, int(q), lo, min(e, lo + max_per_partition)))
    return out


def limit_rows(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """At most max_rows offsets past `start`, shared among queues in proportion to their backlog
    (Kafka's maxOffsetsPerTrigger); every queue with a backlog advances by at least one."""
    backlog = {(t, q): max(0, e - start.get(t, {}).get(q, 0)) for t, qs in latest.items() for q, e in qs.items()}
    total = sum(backlog.values())
    if total <= max_rows:
        return latest
    out: Offsets = {t: dict(qs) for t, qs in latest.items()}
    for (t, q), b in backlog.items():
        if b:
            take = max(1, b * max_rows // total)
            out[t][q] = start.get(t, {}).get(q, 0) + min(b, take)
    return out


def cap(latest: Offsets, target: Offsets) -> Offsets:
    """Offsets no further than `target` (Trigger.AvailableNow: what was there when the query began)."""
    return {t: {q: min(e, target.get(t, {}).get(q, 0)) for q, e in qs.items()} for t, qs in latest.items()}
