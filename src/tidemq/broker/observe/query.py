"""Looking messages and topics up for an operator (mqadmin queryMsgByKey / queryMsgById /
queryMsgByOffset, topicStatus; `tidemq query`, `tidemq topic status`, `tidemq config show`)."""

from __future__ import annotations

import dataclasses

from ...record.codec import StoredMessage


def message_dict(m: StoredMessage) -> dict:
    return {"topic": m.topic, "queue": m.queue_id, "queue_offset": m.queue_offset,
            "commitlog_offset": m.commitlog_offset, "msg_id": m.msg_id, "tags": m.tags, "keys": m.keys,
            "properties": m.properties, "born_timestamp_ms": m.born_timestamp_ms,
            "store_timestamp_ms": m.store_timestamp_ms, "body_bytes": len(m.body),
            "body": m.body.decode("utf-8", "backslashreplace")}


def query(store, topic: str, by: str, what, n: int) -> list[dict]:
    """Messages of ``topic`` found by key, message id, commit-log offset or (queue, time)."""
    if by in ("key", "id"):
        found = store.query_by_key(topic, what, max_count=n)
        if by == "id":
            found = [m for m in found if m.msg_id == what]
    elif by == "commitlog_offset":
        m = store.get_by_commitlog_offset(what) if store.commitlog_min_offset <= what < store.commitlog_max_offset \
            else None
        found = [m] if m is not None and m.commitlog_offset == what and m.topic == topic else []
    else:
        qid, ts = what
        if qid >= store.queue_count(topic):
            return []
        off = store.offset_for_timestamp(topic, qid, ts)
        found = store.get("", topic, qid, off, max_count=n).messages
    return [message_dict(m) for m in found[:n]]


TOPIC_STATUS_UNITS_MAX = 100_000     # a queue's bytes are exact up to this many messages, estimated beyond


def topic_status(store, topic: str, lag: list[dict]) -> dict:
    """Queues (min / max offsets, messages, record bytes: ``bytes_exact`` False when estimated
    from the last TOPIC_STATUS_UNITS_MAX messages of a longer queue) and the groups' lag."""
    queues = []
    for q in range(store.queue_count(topic)):
        lo, hi = store.min_offset(topic, q), store.max_offset(topic, q)
        nbytes, exact = store.queue_bytes(topic, q, TOPIC_STATUS_UNITS_MAX)
        queues.append({"id": q, "min_offset": lo, "max_offset": hi, "messages": hi - lo, "bytes": nbytes,
                       "bytes_exact": exact})
    groups: dict[str, dict] = {}
    for r in lag:
        if r["topic"] == topic:
            g = groups.setdefault(r["group"], {"group": r["group"], "lag": 0, "inflight": 0})
            g["lag"] += r["lag"]
            g["inflight"] += r["inflight"]
    return {"topic": topic, "space_policy": store.space_policy(topic), "queues": queues,
            "messages": sum(q["messages"] for q in queues),
            "bytes": sum(q["bytes"] for q in queues), "bytes_exact": all(q["bytes_exact"] for q in queues),
            "groups": [groups[g] for g in sorted(groups)]}


def settings(cfg) -> dict:
    """Every setting of a config object, secrets masked."""
    out = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        out[f.name] = "***" if (not f.repr and v) else v
    return out
