"""SendMessage end to end with the official RocketMQ 5 Python client against `tidemq serve`."""

import time

import pytest

from ...support.brokers import SMALL, make_topic, stored
from ...support.official import msg
from ...support.wait import patience


def test_official_producer_sends_and_the_store_has_it(tmp_path, broker_factory, clients):
    producer, _consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Orders", 4)
    b = broker_factory(root, env=SMALL)
    p = producer(b.endpoint, ["Orders"])
    receipts = [p.send(msg("Orders", b"order-%d" % i, tag="TagA", keys="k%d" % i, props={"p": "v%d" % i}))
                for i in range(20)]
    fut = p.send_async(msg("Orders", b"async-1", tag="TagB"))
    receipts.append(fut.result(timeout=patience()))
    assert len({r.message_id for r in receipts}) == 21
    assert b.stop() == 0
    got = {m.msg_id: m for m in stored(root, "Orders")}
    assert len(got) == 21, "every sent message is in the store"
    for i, r in enumerate(receipts[:20]):
        m = got[r.message_id]          # the client's message id is the stored UNIQ_KEY
        assert m.body == b"order-%d" % i and m.tags == "TagA" and m.keys == ["k%d" % i]
        assert m.properties["p"] == "v%d" % i
        assert m.queue_offset == r.offset
    assert got[receipts[20].message_id].tags == "TagB"


def test_fifo_message_group_stays_in_one_queue_in_order(tmp_path, broker_factory, clients):
    producer, _consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Fifo", 4)
    b = broker_factory(root, env=SMALL)
    p = producer(b.endpoint, ["Fifo"])
    for g in ("g1", "g2", "g3"):
        for i in range(10):
            p.send(msg("Fifo", f"{g}-{i}".encode(), group=g))
    b.stop()
    by_group = {}
    for m in stored(root, "Fifo"):
        by_group.setdefault(m.properties["__SHARDINGKEY"], []).append(m)
    for g, ms in by_group.items():
        assert len({m.queue_id for m in ms}) == 1, f"group {g} spread over queues"
        assert [m.body for m in sorted(ms, key=lambda m: m.queue_offset)] == [f"{g}-{i}".encode() for i in range(10)]


def test_unknown_topic_and_bad_delivery_times_get_clear_errors(tmp_path, broker_factory, clients):
    producer, _consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Known", 2)
    b = broker_factory(root, env=SMALL)
    p = producer(b.endpoint, ["Known"])
    with pytest.raises(Exception, match="failed to fetch topic:Nope route"):
        p.send(msg("Nope", b"x"))
    delayed = msg("Known", b"much later")
    delayed.delivery_timestamp = int(time.time() * 1000) + 10 * 86_400_000
    with pytest.raises(Exception) as e:
        p.send(delayed)
    assert "timer_delay_s_max" in str(e.value) and str(e.value).startswith("40012")   # ILLEGAL_DELIVERY_TIME
    with pytest.raises(Exception, match="failed to fetch topic:RMQ_SYS_TRANS_HALF_TOPIC route"):
        p.send(msg("RMQ_SYS_TRANS_HALF_TOPIC", b"x"))
    assert p.send(msg("Known", b"still fine")).message_id


def test_auto_created_topics_when_enabled(tmp_path, broker_factory, clients):
    producer, _consumer = clients
    b = broker_factory(str(tmp_path / "store"), env=SMALL, args=("--auto-create-topics",))
    p = producer(b.endpoint, ["Fresh"])
    assert p.send(msg("Fresh", b"hello")).message_id
    b.stop()
    assert [m.body for m in stored(str(tmp_path / "store"), "Fresh")] == [b"hello"]


def test_a_batch_of_common_messages_is_stored_answered_and_deduplicated(tmp_path, broker_factory):
    """SendMessage with a batch (tidemq.client's Producer(raw=False): common messages of one topic, the
    compiled lane's slices when it is built): one result per message, the messages read back with
    their tags as NORMAL messages, a resend answered from the dedup window, a body past the limit
    refused and the rest stored."""
    from tidemq.client import Producer, PullConsumer
    from tidemq.protocol.stubs import Code

    root = str(tmp_path / "store")
    make_topic(root, "Batch", 2)
    b = broker_factory(root, env={**SMALL, "TIDEMQ_MESSAGE_BODY_BYTES_MAX": "1000"})
    with Producer(b.endpoint, raw=False) as p, PullConsumer(b.endpoint) as c:
        tags = ["A", None, "B", "A", None, "\u00fc"]
        rs = p.send_batch("Batch", [b"m-%d" % i for i in range(6)], tags=tags)
        assert [r.code for r in rs] == [Code.OK] * 6
        assert sorted(r.offset for r in rs) == [0, 0, 1, 1, 2, 2]         # round-robin over the two queues
        got = {m.system_properties.message_id: m for q in range(2) for m in c.pull("Batch", q, 0).messages}
        assert set(got) == {r.message_id for r in rs}
        for i, r in enumerate(rs):
            m = got[r.message_id]
            assert m.body == b"m-%d" % i and m.system_properties.message_type == 1        # NORMAL
            assert (m.system_properties.tag or None) == tags[i]
        again = p.send_batch("Batch", [b"m-0", b"new"], message_ids=[rs[0].message_id, "01NEWBATCH"])
        assert (again[0].code, again[0].offset, again[0].error) == (Code.OK, rs[0].offset, "duplicate: already stored")
        assert again[0].duplicate and again[1].ok and not again[1].duplicate
        mixed = p.send_batch("Batch", [b"ok", b"x" * 1001, b"ok2"])
        assert [r.code for r in mixed] == [Code.OK, Code.MESSAGE_BODY_TOO_LARGE, Code.OK]
        assert "exceeds message_body_bytes_max=1000" in mixed[1].error
    assert b.stop() == 0
    assert len(stored(root, "Batch")) == 6 + 1 + 2
