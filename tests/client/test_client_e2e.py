"""tidemq.client against `tidemq serve`: batched sends (one request, one store batch, one result
per message, several in flight), pulls by offset from every queue, offset queries, group offsets."""

import time

import pytest

from tidemq.client import ClientError, Producer, PullConsumer
from tidemq.protocol.stubs import pb

from ..support.brokers import SMALL, make_topic, stored


def pull_all(c, topic, n_queues, batch=100):
    got = []
    for q in range(n_queues):
        off = c.query_offset(topic, q, "BEGINNING")
        while True:
            r = c.pull(topic, q, off, batch_size=batch)
            got += r.messages
            if not r.found:
                break
            off = r.next_offset
    return got


def test_batches_and_pulls(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "Fast", 4)
    b = broker_factory(root, env=SMALL)
    with Producer(b.endpoint, max_in_flight=3) as p, PullConsumer(b.endpoint, group="etl") as c:
        assert p.queue_count("Fast") == 4
        rs = p.send_batch("Fast", [b"one-%d" % i for i in range(100)], tags="T", keys=[["k%d" % i] for i in range(100)],
                          properties=[{"i": str(i)} for i in range(100)])
        assert len(rs) == 100 and all(r.ok for r in rs)
        rs2 = p.send_batches("Fast", ([b"many-%d-%d" % (j, i) for i in range(50)] for j in range(20)))
        assert len(rs2) == 1000 and all(r.ok for r in rs2)
        got = pull_all(c, "Fast", 4)
        assert len(got) == 1100
        assert {m.system_properties.message_id for m in got} == {r.message_id for r in rs + rs2}
        first = {m.system_properties.message_id: m for m in got}[rs[7].message_id]
        assert first.body == b"one-7" and first.system_properties.tag == "T"
        assert list(first.system_properties.keys) == ["k7"] and dict(first.user_properties) == {"i": "7"}
        # offsets: end, by timestamp, group offsets
        ends = [c.query_offset("Fast", q, "END") for q in range(4)]
        assert sum(ends) == 1100
        assert c.query_offset("Fast", 0, "TIMESTAMP", timestamp_ms=int(time.time() * 1000) + 60_000) == ends[0]
        assert c.committed("Fast", 1) is None
        c.commit("Fast", 1, 17)
        assert c.committed("Fast", 1) == 17
        r = c.pull("Fast", 0, ends[0] + 5)
        assert r.code == pb.Code.ILLEGAL_OFFSET and r.next_offset == ends[0]
        r = c.pull("Fast", 0, ends[0], long_polling_s=0.5)        # nothing new: waits, then empty
        assert r.code == pb.Code.MESSAGE_NOT_FOUND and r.next_offset == ends[0]
        with pytest.raises(ClientError):
            c.pull("Nope", 0, 0)
    assert b.stop() == 0
    assert len(stored(root, "Fast")) == 1100
    # committed offsets survive a restart
    b2 = broker_factory(root, env=SMALL)
    with PullConsumer(b2.endpoint, group="etl") as c:
        assert c.committed("Fast", 1) == 17


def test_a_batch_with_a_bad_message_answers_per_message(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "Mixed", 1)
    b = broker_factory(root, env={**SMALL, "TIDEMQ_MESSAGE_BODY_BYTES_MAX": "1000"})
    with Producer(b.endpoint) as p:
        rs = p.send_batch("Mixed", [b"ok", b"x" * 2000, b"ok2"])
        assert [r.ok for r in rs] == [True, False, True]
        assert rs[1].code == pb.Code.MESSAGE_BODY_TOO_LARGE
