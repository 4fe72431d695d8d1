"""Consumer lag per group, topic and queue (kafka-consumer-groups --describe).

Two kinds of group consume here: pull consumers commit offsets (consume/group_offsets.py,
UpdateOffset), pop consumers (ReceiveMessage) move a cursor with messages in flight until
acked (consume/pop_state.py). For both the committed offset is the first one the group has not
finished with; lag = the queue's max offset - committed.

    {"group", "topic", "queue", "kind": "pull" | "pop", "committed_offset", "max_offset",
     "min_offset", "lag", "inflight"}
"""

from __future__ import annotations


def group_lag(store, group_offsets, pop, group: str | None = None) -> list[dict]:
    rows: dict[tuple, dict] = {}

    def row(g: str, t: str, q: int, kind: str, committed: int, inflight: int) -> None:
        if (group is not None and g != group) or store.queue_count(t) <= q:
            return
        hi, lo = store.max_offset(t, q), store.min_offset(t, q)
        committed = max(committed, lo)       # cleaned away below the minimum: not lag any more
        rows[(g, t, q, kind)] = {"group": g, "topic": t, "queue": q, "kind": kind, "committed_offset": committed,
                                 "max_offset": hi, "min_offset": lo, "lag": max(0, hi - committed),
                                 "inflight": inflight}

    for (g, t, q), off in list(group_offsets.offsets.items()):
        row(g, t, q, "pull", off, 0)
    for (g, t, q), st in list(pop.queues.items()):
        row(g, t, q, "pop", st.committed, len(st.inflight))
    # a group that consumes a topic lags on its every queue, the ones it never touched included
    for g, t, kind in {(g, t, kind) for (g, t, _q, kind) in rows}:
        for q in range(store.queue_count(t)):
            if (g, t, q, kind) not in rows:
                row(g, t, q, kind, store.min_offset(t, q), 0)
    return [rows[k] for k in sorted(rows)]


def groups_summary(rows: list[dict]) -> list[dict]:
    """One line per group: topics, total lag, in flight."""
    out: dict[str, dict] = {}
    for r in rows:
        s = out.setdefault(r["group"], {"group": r["group"], "topics": set(), "lag": 0, "inflight": 0})
        s["topics"].add(r["topic"])
        s["lag"] += r["lag"]
        s["inflight"] += r["inflight"]
    return [{**s, "topics": sorted(s["topics"])} for _, s in sorted(out.items())]
