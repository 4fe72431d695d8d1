"""Message types per topic (`tidemq topic create --message-type`) and the trace context, end to end
against `tidemq serve` with the official Python client and its protocol classes: a topic of one type
is routed with that type only (the client refuses another before sending), the broker refuses a
mismatch with the code RocketMQ's proxy answers (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE), a mixed topic
takes every type; a message's trace_context comes back on delivery."""

import grpc
import pytest

from tidemq.protocol.stubs import pb, sgrpc, spb

from ...support.brokers import SMALL, admin_call, make_topic
from ...support.official import msg, receive_all
from ...support.wait import PATIENCE_S


def one(topic, mid, mtype, **sp):
    return spb.SendMessageRequest(messages=[pb.Message(
        topic=pb.Resource(name=topic), body=b"x-" + mid.encode(),
        system_properties=pb.SystemProperties(message_id=mid, message_type=mtype, **sp))])


def test_a_topic_takes_only_its_message_type_and_trace_context_is_kept(tmp_path, broker_factory, clients):
    from rocketmq.v5.exception import IllegalArgumentException
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Plain", 2)
    make_topic(root, "Mixed", 2)
    b = broker_factory(root, env=SMALL)
    r = admin_call(b.endpoint, "CreateTopic", {"name": "Plain", "message_type": "normal"})
    assert r["ok"] and r["message_type"] == "normal"
    assert admin_call(b.endpoint, "CreateTopic", {"name": "Plain", "message_type": "sometimes"})["ok"] is False
    kinds = {t["topic"]: t["message_type"] for t in admin_call(b.endpoint, "ListTopics")["topics"]}
    assert kinds["Plain"] == "normal" and kinds["Mixed"] == "mixed"

    p = producer(b.endpoint, ["Plain", "Mixed"])
    assert p.send(msg("Plain", b"normal")).message_id
    with pytest.raises(IllegalArgumentException):            # the route says NORMAL only
        p.send(msg("Plain", b"fifo", group="g1"))
    assert p.send(msg("Mixed", b"fifo", group="g1")).message_id

    ch = grpc.insecure_channel(b.endpoint)
    try:
        stub = sgrpc.MessagingServiceStub(ch)
        route = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Plain")), timeout=PATIENCE_S)
        assert {tuple(q.accept_message_types) for q in route.message_queues} == {(pb.MessageType.NORMAL,)}
        # a client that does not look at the route (or looked before the type was set): the broker's check
        for mtype, extra in ((pb.MessageType.FIFO, {"message_group": "g"}),
                             (pb.MessageType.TRANSACTION, {}), (pb.MessageType.PRIORITY, {"priority": 3})):
            r = stub.SendMessage(one("Plain", f"M{mtype}", mtype, **extra), timeout=PATIENCE_S)
            assert r.entries[0].status.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, r
            assert "expected type is NORMAL" in r.entries[0].status.message
        r = stub.SendMessage(one("Mixed", "TRACED", pb.MessageType.NORMAL, trace_context="00-abc-def-01"),
                             timeout=PATIENCE_S)
        assert r.entries[0].status.code == pb.Code.OK
        got = list(stub.ReceiveMessage(spb.ReceiveMessageRequest(
            group=pb.Resource(name="tracer"), message_queue=pb.MessageQueue(topic=pb.Resource(name="Mixed")),
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"), batch_size=8,
            invisible_duration={"seconds": 300}, long_polling_timeout={"seconds": 5}), timeout=PATIENCE_S))
        by_id = {x.message.system_properties.message_id: x.message for x in got if x.HasField("message")}
        assert by_id["TRACED"].system_properties.trace_context == "00-abc-def-01"
        assert "TRACE_CONTEXT" not in by_id["TRACED"].user_properties
    finally:
        ch.close()
    # tidemq's own lane (SendRecords: NORMAL messages) is checked the same way
    from tidemq.client import Producer
    assert admin_call(b.endpoint, "CreateTopic", {"name": "Ordered", "message_type": "fifo"})["ok"]
    with Producer(b.endpoint) as tp:
        assert [r.code for r in tp.send_batch("Ordered", [b"a", b"b"])] == \
            [pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE] * 2
        assert all(r.ok for r in tp.send_batch("Plain", [b"c"]))
    c = consumer(b.endpoint, "readers", "Plain")
    assert sorted(m.body for m in receive_all(c, 2)) == [b"c", b"normal"], "nothing refused was stored"
