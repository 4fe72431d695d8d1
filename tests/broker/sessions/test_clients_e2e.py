"""Flooding the client table costs no live consumer its messages (sessions/clients.py): a real broker
with authentication on and a small table (clients_max 16, clients_per_user_max 8). Two lite consumers
of one group, heard from by heartbeats only (no Telemetry stream: a Python client's comes back minutes
after a broker restart), each subscribe a lite topic; then heartbeats with fresh client ids, from
another user and from their own, many times the table. Before, the flood evicted the consumers (no
open stream), an evicted one counted as gone, and the next receive of the group passed its lite
topic's messages over (lost for the group). (The consumers must be heard from within client_idle_s_max,
10 s here, of the receives: a few hundred calls.)"""

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
IDLE_S = 10.0
ENV = {**AUTH, "TIDEMQ_CLIENTS_MAX": "16", "TIDEMQ_CLIENTS_PER_USER_MAX": "8", "TIDEMQ_CLIENT_IDLE_S_MAX": str(IDLE_S)}


def md(keys, client_id):
    return tuple(signed_metadata(keys[0], keys[1], date_time(time.time()))) + (("x-mq-client-id", client_id),)


def heartbeat(s, keys, cid):
    r = s.Heartbeat(spb.HeartbeatRequest(group=pb.Resource(name="agents"),
                                         client_type=pb.ClientType.LITE_SIMPLE_CONSUMER),
                    metadata=md(keys, cid), timeout=PATIENCE_S)
    assert r.status.code == Code.OK, r.status


def receive(s, cid) -> list:
    got = []
    for _ in range(3):
        rs = s.ReceiveMessage(spb.ReceiveMessageRequest(
            group=pb.Resource(name="agents"), message_queue=pb.MessageQueue(topic=pb.Resource(name="orders")),
            batch_size=32, invisible_duration={"seconds": 300}, long_polling_timeout={"seconds": 1}),
            metadata=md(SUPER, cid), timeout=PATIENCE_S)
        got += [r.message.body for r in rs if r.HasField("message")]
    return got


def test_a_flood_of_client_ids_costs_no_lite_consumer_its_messages(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "orders", 1)
    started = time.monotonic()
    b = broker_factory(root=root, env=ENV)
    r = admin.call(b.endpoint, "CreateUser", {"name": MALLORY[0], "secret_key": MALLORY[1]}, timeout_s=PATIENCE_S,
                   metadata=md(SUPER, "admin"))
    assert r["ok"], r
    with grpc.insecure_channel(b.endpoint) as ch:
        s = sgrpc.MessagingServiceStub(ch)
        # a client the broker does not know counts as alive for client_idle_s_max after it starts (its
        # clients come back): past that, one forgotten counts as gone, which is what is tested here
        time.sleep(max(0.0, IDLE_S + 0.5 - (time.monotonic() - started)))
        for cid, lite_topic in (("victim-v1", "s1"), ("victim-v2", "s2")):
            heartbeat(s, SUPER, cid)
            r = s.SyncLiteSubscription(spb.SyncLiteSubscriptionRequest(
                action=pb.LiteSubscriptionAction.PARTIAL_ADD, topic=pb.Resource(name="orders"),
                group=pb.Resource(name="agents"), lite_topic_set=[lite_topic]), metadata=md(SUPER, cid),
                timeout=PATIENCE_S)
            assert r.status.code == Code.OK, r.status
        for i in range(100):                       # another user's flood, then one of their own user's
            heartbeat(s, MALLORY, f"flood-{i}")
        for i in range(100):
            heartbeat(s, SUPER, f"own-flood-{i}")
        for body, lt in ((b"m1", "s1"), (b"m2", "s2")):
            r = s.SendMessage(spb.SendMessageRequest(messages=[pb.Message(
                topic=pb.Resource(name="orders"), body=body, system_properties=pb.SystemProperties(
                    message_id=f"0ALITE{lt}{time.time_ns()}", message_type=pb.MessageType.LITE,
                    lite_topic=lt))]), metadata=md(SUPER, "producer"), timeout=PATIENCE_S)
            assert r.status.code == Code.OK, r.status
        assert receive(s, "victim-v2") == [b"m2"]
        assert receive(s, "victim-v1") == [b"m1"], "v1's lite topic was not passed over"
