"""A user within its own bound of the client table cannot forget another user's live client
(sessions/clients.py): a real broker with authentication on, a table of 16 clients, 16 per user. A
push consumer's client (heartbeats only) receives a message with auto_renew; another user then sends
heartbeats under 16 fresh client ids (within its own bound, past the table's). Before, the table
forgot the oldest client of anyone: the consumer, which then counted as gone, so the broker released
its message (visible at once) and a second consumer of the group received it while the first was
still consuming it. (Forgetting matters only after client_idle_s_max from the start, 15 s here, and
the consumer must be heard from within it: a machine too loaded for that skips the test, never passes
it.)"""

import time

import grpc
import pytest

from tidemq.client import admin
from tidemq.protocol.signing import date_time, signed_metadata
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.auth import AUTH
from ...support.brokers import make_topic
from ...support.wait import PATIENCE_S

SUPER = ("tidemq-ak", "s3cret-sk")
MALLORY = ("mallory", "secret-of-mallory")
IDLE_S = 15.0
ENV = {**AUTH, "TIDEMQ_CLIENTS_MAX": "16", "TIDEMQ_CLIENTS_PER_USER_MAX": "16",
       "TIDEMQ_CLIENT_IDLE_S_MAX": str(IDLE_S), "TIDEMQ_AUTO_RENEW_CHECK_INTERVAL_MS": "100"}


def md(keys, client_id):
    return tuple(signed_metadata(keys[0], keys[1], date_time(time.time()))) + (("x-mq-client-id", client_id),)


def heartbeat(s, keys, cid):
    r = s.Heartbeat(spb.HeartbeatRequest(group=pb.Resource(name="g"), client_type=pb.ClientType.PUSH_CONSUMER),
                    metadata=md(keys, cid), timeout=PATIENCE_S)
    assert r.status.code == Code.OK, r.status


def receive(s, cid, auto_renew: bool, poll_s: int) -> list:
    req = spb.ReceiveMessageRequest(group=pb.Resource(name="g"), message_queue=pb.MessageQueue(
        topic=pb.Resource(name="orders")), batch_size=32, auto_renew=auto_renew,
        long_polling_timeout={"seconds": poll_s})
    if not auto_renew:
        req.invisible_duration.seconds = 300
    return [r.message.body for r in s.ReceiveMessage(req, metadata=md(SUPER, cid), timeout=PATIENCE_S)
            if r.HasField("message")]


def test_another_users_clients_never_forget_a_live_auto_renewing_consumer(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "orders", 1)
    started = time.monotonic()
    b = broker_factory(root=root, env=ENV)
    r = admin.call(b.endpoint, "CreateUser", {"name": MALLORY[0], "secret_key": MALLORY[1]}, timeout_s=PATIENCE_S,
                   metadata=md(SUPER, "admin"))
    assert r["ok"], r
    with grpc.insecure_channel(b.endpoint) as ch:
        s = sgrpc.MessagingServiceStub(ch)
        r = s.SendMessage(spb.SendMessageRequest(messages=[pb.Message(
            topic=pb.Resource(name="orders"), body=b"m1", system_properties=pb.SystemProperties(
                message_id=f"0AUSERS{time.time_ns()}", message_type=pb.MessageType.NORMAL))]),
            metadata=md(SUPER, "producer"), timeout=PATIENCE_S)
        assert r.entries[0].status.code == Code.OK, r
        # an unknown client counts as alive for client_idle_s_max after the start (its clients come
        # back): past that, one forgotten counts as gone, which is what is tested here
        time.sleep(max(0.0, IDLE_S + 0.5 - (time.monotonic() - started)))
        heard = time.monotonic()
        heartbeat(s, SUPER, "consumer-1")
        got = []
        for _ in range(3):
            got = got or receive(s, "consumer-1", auto_renew=True, poll_s=1)
        assert got == [b"m1"]
        for i in range(16):                        # another user, within its own bound
            heartbeat(s, MALLORY, f"flood-{i}")
        second = receive(s, "consumer-2", auto_renew=False, poll_s=2)
        if time.monotonic() - heard > IDLE_S - 1.0:
            pytest.skip("the flood and the receives outlasted client_idle_s_max: an idle consumer counts as gone")
        assert second == [], "the first consumer's message was released while it consumed it"
