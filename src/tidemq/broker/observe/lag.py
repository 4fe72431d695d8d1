"""Consumer lag per group, topic and queue (kafka-consumer-groups --describe).

Two kinds of group consume here: pull consumers commit offsets (consume/group_offsets.py,
UpdateOffset), pop consumers (ReceiveMessage) move a cursor with messages in flight until
acked (consume/pop_state.py). For both the committed offset is the first one the group has not
finished with; lag = the queue's max offset - committed.

    {"group", "topic", "queue", "kind": "pull" | "pop", "committed_offset", "max_offset",
     "min_offset", "lag", "inflight", "redelivering" (in flight again after a first attempt),
     "last_consumed_ms" (last commit, delivery or ack since the broker started; None: not since)}

A group's summary adds "dlq_messages": what its dead-letter topic ``%DLQ%<group>`` holds.
"""

from __future__ import annotations

from ..topic_names import dlq_topic


def group_lag(store, group_offsets, pop, group: str | None = None) -> list[dict]:
    rows: dict[tuple, dict] = {}

    def row(g: str, t: str, q: int, kind: str, committed: int, inflight: int, again: int = 0,
            at_ms: int | None = None) -> None:
        if (group is not None and g != group) or store.queue_count(t) <= q:
            return
        hi, lo = store.max_offset(t, q), store.min_offset(t, q)
        committed = max(committed, lo)       # cleaned away below the minimum: not lag any more
        rows[(g, t, q, kind)] = {"group": g, "topic": t, "queue": q, "kind": kind, "committed_offset": committed,
                                 "max_offset": hi, "min_offset": lo, "lag": max(0, hi - committed),
                                 "inflight": inflight, "redelivering": again, "last_consumed_ms": at_ms}

    committed_at = group_offsets.committed_at_ms
    for key, off in list(group_offsets.offsets.items()):
        row(*key, "pull", off, 0, 0, committed_at.get(key))
    touched = pop.touched_ms
    for key, st in list(pop.queues.items()):
        inflight = list(st.inflight.values())
        row(*key, "pop", st.committed, len(inflight), sum(1 for i in inflight if i.attempt > 1), touched.get(key))
    # a group that consumes a topic lags on its every queue, the ones it never touched included
    for g, t, kind in {(g, t, kind) for (g, t, _q, kind) in rows}:
        for q in range(store.queue_count(t)):
            if (g, t, q, kind) not in rows:
                row(g, t, q, kind, store.min_offset(t, q), 0)
    return [rows[k] for k in sorted(rows)]


def groups_summary(rows: list[dict], store=None) -> list[dict]:
    """One line per group: topics, total lag, in flight (and, given the store, its dead letters)."""
    out: dict[str, dict] = {}
    for r in rows:
        s = out.setdefault(r["group"], {"group": r["group"], "topics": set(), "lag": 0, "inflight": 0})
        s["topics"].add(r["topic"])
        s["lag"] += r["lag"]
        s["inflight"] += r["inflight"]
    for g, s in out.items():
        if store is not None:
            dlq = dlq_topic(g)
            s["dlq_messages"] = sum(store.max_offset(dlq, q) - store.min_offset(dlq, q)
                                    for q in range(store.queue_count(dlq)))
    return [{**s, "topics": sorted(s["topics"])} for _, s in sorted(out.items())]
