"""How the broker's own state reaches a follower: copied as its own stream (``State``, every
``replication_state_interval_ms``), not rebuilt from the log.

The commit log carries the messages, the schedule topic (delayed messages) and the half topic
(transaction half messages): those a follower has by copying the log. What lives beside the
log, a follower copies from the leader's memory as one JSON document and writes into the same
files a leader keeps (state/layout.py), so that a promoted follower opens them as any broker
opens its state at start:

    topics            the topic table: queue counts, deleted topics with the log offset where each
                      ended (the store's config/topics.json; applied to the follower's table)
    consumer_offsets  committed offsets of pull consumers (broker/consumer_offsets.json)
    pop               the pop state's snapshot (cursors, in-flight messages) and its receipt-handle
                      key: handles given out by the old leader stay valid (broker/pop/)
    timer             the timer's progress through the schedule topic (broker/timer/checkpoint.json)
    transactions      the transaction decisions (broker/transactions/)

What changed on the leader after the last copy is lost by a failover, and each part is built to
take that as it takes a restart: acks and deliveries after it come again (at least once, as after
kill -9); a delayed message or a committed transaction moved after it is found in its real topic
by its message id (parking.already_moved) and not moved twice; offsets committed after it are
committed again by their consumers.
"""

from __future__ import annotations

import json
import logging
import os

from ...io import FileIO, write_atomic
from ..state.layout import StateLayout

log = logging.getLogger("tidemq.broker")


def snapshot(store, service) -> dict:
    """The leader's broker state now (on the event loop, where consumers change it)."""
    t = store.topics
    return {
        "log_end": store.commitlog_max_offset,
        "topics": {"topics": {n: ts.queue_count for n, ts in t.topics.items()}, "deleted": dict(t.deleted)},
        "consumer_offsets": [[g, tp, q, o] for (g, tp, q), o in service.group_offsets.offsets.items()],
        "pop": {"secret": service.pop.secret.decode(), "snapshot": service.pop.snapshot()},
        "timer": service.timer.snapshot(),
        "transactions": service.transactions.snapshot(),
    }


def apply(doc: dict, store, service, state_dir: str) -> None:
    """Write the leader's state ``doc`` where this broker keeps its own, and update what the
    follower serves from memory (topics, consumer offsets). ValueError when ``doc`` is not one."""
    try:
        topics = {str(n): int(c) for n, c in doc["topics"]["topics"].items()}
        deleted = {str(n): int(e) for n, e in doc["topics"].get("deleted", {}).items()}
        offsets = {(str(g), str(t), int(q)): int(o) for g, t, q, o in doc["consumer_offsets"]}
        secret = str(doc["pop"]["secret"])
        pop, timer, txn = doc["pop"]["snapshot"], doc.get("timer"), doc["transactions"]
        if not isinstance(pop, dict) or not isinstance(txn, dict):
            raise TypeError("pop and transactions are objects")
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"not a broker state document: {e!r}") from None
    for name, end in deleted.items():
        if store.topics.deleted.get(name) != end and store.queue_count(name):
            store.delete_topic(name, end)
    for name, count in topics.items():
        if store.queue_count(name) < count:
            store.create_topic(name, count)
    fio: FileIO = store.fio
    layout = StateLayout(state_dir)
    fio.makedirs(layout.dir)
    if offsets != service.group_offsets.offsets:
        write_atomic(fio, layout.consumer_offsets,
                     json.dumps({json.dumps(list(k)): v for k, v in sorted(offsets.items())}).encode())
        service.group_offsets.offsets = offsets
    fio.makedirs(layout.pop_dir)
    write_atomic(fio, layout.pop_secret, secret.encode())
    _journal_state(fio, layout.pop_dir, pop)
    if timer is not None:
        fio.makedirs(os.path.dirname(layout.timer_checkpoint))
        write_atomic(fio, layout.timer_checkpoint, json.dumps(timer).encode())
    _journal_state(fio, layout.transactions_dir, txn)


def _journal_state(fio: FileIO, directory: str, snapshot: dict) -> None:
    """A journal's state (state/journal.py) as its snapshot, the journal emptied: what a broker
    opening it finds after a compaction."""
    fio.makedirs(directory)
    write_atomic(fio, os.path.join(directory, "snapshot.json"), json.dumps(snapshot).encode())
    path = os.path.join(directory, "journal")
    if fio.exists(path):
        h = fio.open(path, create=True)
        try:
            fio.truncate(h, 0)
            fio.fsync(h)
        finally:
            fio.close(h)
