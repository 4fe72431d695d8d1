"""One user cannot fill the lite-subscription table for the others (consume/lite.py,
lite_subscriptions_per_user_max): a real broker with authentication on, a NORMAL user allowed to
consume its group syncs lite subscriptions under fresh client ids until it is refused
LITE_SUBSCRIPTION_QUOTA_EXCEEDED at its own bound; another user's lite consumer then subscribes, and
receives its lite topic's message. Before, only the table's bound over every user (10000) held: one
user's client ids filled it and every other lite consumer was refused."""

import time

import grpc

from tidemq.client import admin
from tidemq.protocol.signing import date_time, signed_metadata
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.auth import AUTH
from ...support.brokers import make_topic
from ...support.wait import PATIENCE_S

SUPER = ("tidemq-ak", "s3cret-sk")
MALLORY = ("mallory", "secret-of-mallory")
PER_USER = 8


def md(keys, client_id):
    return tuple(signed_metadata(keys[0], keys[1], date_time(time.time()))) + (("x-mq-client-id", client_id),)


def sync(s, keys, cid, group, lite_topic):
    return s.SyncLiteSubscription(spb.SyncLiteSubscriptionRequest(
        action=pb.LiteSubscriptionAction.PARTIAL_ADD, topic=pb.Resource(name="orders"),
        group=pb.Resource(name=group), lite_topic_set=[lite_topic]), metadata=md(keys, cid),
        timeout=PATIENCE_S).status


def test_one_user_cannot_fill_the_lite_subscription_table(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "orders", 1)
    b = broker_factory(root=root, env={**AUTH, "TIDEMQ_LITE_SUBSCRIPTIONS_PER_USER_MAX": str(PER_USER)})
    for method, req in (("CreateUser", {"name": MALLORY[0], "secret_key": MALLORY[1]}),
                        ("Grant", {"user": MALLORY[0], "resource": "topic:orders", "actions": ["sub"]}),
                        ("Grant", {"user": MALLORY[0], "resource": "group:junk", "actions": ["sub"]})):
        r = admin.call(b.endpoint, method, req, timeout_s=PATIENCE_S, metadata=md(SUPER, "admin"))
        assert r["ok"], r
    with grpc.insecure_channel(b.endpoint) as ch:
        s = sgrpc.MessagingServiceStub(ch)
        codes = [sync(s, MALLORY, f"flood-{i}", "junk", "x").code for i in range(3 * PER_USER)]
        assert codes[:PER_USER] == [Code.OK] * PER_USER
        assert set(codes[PER_USER:]) == {Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED}, "refused past its own bound"
        st = sync(s, SUPER, "agent-1", "agents", "s1")
        assert st.code == Code.OK, st
        r = s.SendMessage(spb.SendMessageRequest(messages=[pb.Message(
            topic=pb.Resource(name="orders"), body=b"m1", system_properties=pb.SystemProperties(
                message_id=f"0ALITEs1{time.time_ns()}", message_type=pb.MessageType.LITE,
                lite_topic="s1"))]), metadata=md(SUPER, "producer"), timeout=PATIENCE_S)
        assert r.entries[0].status.code == Code.OK, r
        got = []
        for _ in range(3):
            rs = s.ReceiveMessage(spb.ReceiveMessageRequest(
                group=pb.Resource(name="agents"), message_queue=pb.MessageQueue(topic=pb.Resource(name="orders")),
                batch_size=32, invisible_duration={"seconds": 300}, long_polling_timeout={"seconds": 1}),
                metadata=md(SUPER, "agent-1"), timeout=PATIENCE_S)
            got += [r.message.body for r in rs if r.HasField("message")]
            if got:
                break
        assert got == [b"m1"]
