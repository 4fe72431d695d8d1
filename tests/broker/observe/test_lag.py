"""Lag per group, topic and queue, for pull (committed offsets) and pop (cursor, in flight) groups."""

from types import SimpleNamespace

from tidemq.broker.consume.pop_state import Inflight, QueueState
from tidemq.broker.observe.lag import group_lag, groups_summary
from tidemq.store import Message, MessageStore

from tests.support.store import small_config


def test_lag_covers_every_queue_of_a_consumed_topic(tmp_path):
    store = MessageStore(small_config(str(tmp_path / "s"))).start()
    try:
        store.create_topic("T", 3)
        store.put_batch([Message("T", b"x" * 10, queue_id=q) for q in (0, 0, 0, 1, 1, 2) * 2])
        offsets = SimpleNamespace(offsets={("pull", "T", 0): 4, ("pull", "T", 1): 1},
                                  committed_at_ms={("pull", "T", 0): 1234})
        pop = SimpleNamespace(queues={("popper", "T", 2): QueueState(cursor=3, inflight={1: Inflight(1, 0, 1),
                                                                                        2: Inflight(2, 0, 2)})},
                              touched_ms={})
        rows = group_lag(store, offsets, pop)
        got = {(r["group"], r["queue"]): (r["kind"], r["committed_offset"], r["max_offset"], r["lag"], r["inflight"])
               for r in rows}
        assert got == {("pull", 0): ("pull", 4, 6, 2, 0), ("pull", 1): ("pull", 1, 4, 3, 0),
                       ("pull", 2): ("pull", 0, 2, 2, 0),          # never committed: lags from the minimum
                       ("popper", 0): ("pop", 0, 6, 6, 0), ("popper", 1): ("pop", 0, 4, 4, 0),
                       ("popper", 2): ("pop", 1, 2, 1, 2)}         # offset 1 in flight: not consumed yet
        assert [r["group"] for r in group_lag(store, offsets, pop, "popper")] == ["popper"] * 3
        extra = {(r["group"], r["queue"]): (r["redelivering"], r["last_consumed_ms"]) for r in rows}
        assert extra[("popper", 2)] == (1, None) and extra[("pull", 0)] == (0, 1234)
        assert groups_summary(rows) == [{"group": "popper", "topics": ["T"], "lag": 11, "inflight": 2},
                                        {"group": "pull", "topics": ["T"], "lag": 7, "inflight": 0}]
        store.put_batch([Message("%DLQ%popper", b"dead") for _ in range(3)])
        dlq = {g["group"]: g["dlq_messages"] for g in groups_summary(rows, store)}
        assert dlq == {"popper": 3, "pull": 0}
    finally:
        store.shutdown()


def test_offsets_of_deleted_topics_and_queues_are_left_out(tmp_path):
    store = MessageStore(small_config(str(tmp_path / "s"))).start()
    try:
        store.create_topic("T", 1)
        offsets = SimpleNamespace(offsets={("g", "gone", 0): 3, ("g", "T", 5): 1}, committed_at_ms={})
        assert group_lag(store, offsets, SimpleNamespace(queues={}, touched_ms={})) == []
    finally:
        store.shutdown()
