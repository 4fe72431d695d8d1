"""What an authenticated user may do through the RPCs every user may call (Telemetry, Heartbeat,
NotifyClientTermination): nothing to another application's groups, topics or clients. Through a
real broker with authentication on, raw MessagingService stubs signed as each user.

    victim   the broker's own super user (tidemq-ak): group billing on topic orders
    mallory  NORMAL, pub and sub on topic junk only
"""

import queue
import threading
import time

import grpc
import pytest

from tidemq.client import admin
from tidemq.protocol.signing import date_time, signed_metadata
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ..support.auth import AUTH
from ..support.brokers import brokers, make_topic

SUPER = ("tidemq-ak", "s3cret-sk")
MALLORY = ("mallory", "secret-of-mallory")
PATIENCE_S = 60


def md(keys, client_id=None):
    out = tuple(signed_metadata(keys[0], keys[1], date_time(time.time())))
    return out + ((("x-mq-client-id", client_id),) if client_id else ())


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("service-access") / "store")
    for t in ("orders", "junk"):
        make_topic(root, t, 1)
    with brokers(root) as start_broker:
        b = start_broker(env=AUTH)
        for method, req in (("CreateUser", {"name": MALLORY[0], "secret_key": MALLORY[1]}),
                            ("Grant", {"user": MALLORY[0], "resource": "topic:junk", "actions": ["pub", "sub"]})):
            r = admin.call(b.endpoint, method, req, timeout_s=PATIENCE_S, metadata=md(SUPER))
            assert r["ok"], r
        yield b


class Stream:
    """A Telemetry stream held open: commands written with put, answers read with answer."""

    def __init__(self, stub, keys, client_id):
        self.out: queue.Queue = queue.Queue()
        self.call = stub.Telemetry(iter(self.out.get, None), metadata=md(keys, client_id), timeout=PATIENCE_S * 4)
        self.answers: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        try:
            for cmd in self.call:
                self.answers.put(cmd)
        except grpc.RpcError as e:
            self.answers.put(e)

    def settings(self, settings) -> "spb.TelemetryCommand":
        self.out.put(spb.TelemetryCommand(settings=settings))
        return self.answers.get(timeout=PATIENCE_S)

    def close(self):
        self.out.put(None)
        self.call.cancel()
        self.reader.join(PATIENCE_S)


def send(stub, topic, bodies):
    r = stub.SendMessage(spb.SendMessageRequest(messages=[
        pb.Message(topic=pb.Resource(name=topic), body=b, system_properties=pb.SystemProperties(
            message_id=f"0A{topic}{i}{time.time_ns()}", message_type=pb.MessageType.NORMAL))
        for i, b in enumerate(bodies)]), metadata=md(SUPER), timeout=PATIENCE_S)
    assert r.status.code == Code.OK, r.status


def receive(stub, group, topic, keys=SUPER, client_id="victim-1") -> list:
    got = []
    for _ in range(3):          # a few receives: a queue's first one may find nothing yet
        rs = stub.ReceiveMessage(spb.ReceiveMessageRequest(
            group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic)),
            batch_size=32, invisible_duration={"seconds": 300}, long_polling_timeout={"seconds": 1}),
            metadata=md(keys, client_id), timeout=PATIENCE_S)
        got += [r.message.body for r in rs if r.HasField("message")]
    return got


def test_a_lite_consumers_settings_for_a_group_it_may_not_sub_are_refused_and_change_nothing(secured):
    """Telemetry is open to every user, but the settings of a lite consumer make its group consume the
    bind topic as lite topics: a user without sub on that group and topic must not do that to another
    application's group (it would pass over every message the group has, as no client subscribes
    their lite topics)."""
    with grpc.insecure_channel(secured.endpoint) as ch:
        s = sgrpc.MessagingServiceStub(ch)
        send(s, "orders", [b"o1", b"o2", b"o3"])
        evil = Stream(s, MALLORY, "mallory-lite")
        try:
            answer = evil.settings(pb.Settings(
                client_type=pb.ClientType.LITE_SIMPLE_CONSUMER,
                subscription=pb.Subscription(group=pb.Resource(name="billing"), subscriptions=[
                    pb.SubscriptionEntry(topic=pb.Resource(name="orders"),
                                         expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"))])))
            assert answer.status.code == Code.FORBIDDEN, answer.status
            assert "mallory" in answer.status.message and "billing" in answer.status.message
            assert sorted(receive(s, "billing", "orders")) == [b"o1", b"o2", b"o3"]
        finally:
            evil.close()


def lite_settings(group, topic):
    return pb.Settings(client_type=pb.ClientType.LITE_SIMPLE_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name=topic), expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"))]))


def test_a_user_naming_another_users_client_id_reaches_a_client_of_its_own(secured):
    """Client ids are predictable (host, pid, time). NotifyClientTermination and Heartbeat are open to
    every user: naming a victim's client id must not end that client's lite subscriptions (its lite
    topics' messages would be passed over for its group: lost) nor anything else of it."""
    with grpc.insecure_channel(secured.endpoint) as ch:
        s = sgrpc.MessagingServiceStub(ch)
        streams = []
        try:
            for cid, lite_topic in (("victim-v1", "s1"), ("victim-v2", "s2")):
                st = Stream(s, SUPER, cid)
                streams.append(st)
                assert st.settings(lite_settings("agents", "orders")).status.code == Code.OK
                r = s.SyncLiteSubscription(spb.SyncLiteSubscriptionRequest(
                    action=pb.LiteSubscriptionAction.PARTIAL_ADD, topic=pb.Resource(name="orders"),
                    group=pb.Resource(name="agents"), lite_topic_set=[lite_topic]),
                    metadata=md(SUPER, cid), timeout=PATIENCE_S)
                assert r.status.code == Code.OK, r.status
            r = s.NotifyClientTermination(spb.NotifyClientTerminationRequest(group=pb.Resource(name="agents")),
                                          metadata=md(MALLORY, "victim-v1"), timeout=PATIENCE_S)
            assert r.status.code == Code.OK
            for body, lt in ((b"m1", "s1"), (b"m2", "s2")):
                r = s.SendMessage(spb.SendMessageRequest(messages=[pb.Message(
                    topic=pb.Resource(name="orders"), body=body, system_properties=pb.SystemProperties(
                        message_id=f"0ALITE{lt}{time.time_ns()}", message_type=pb.MessageType.LITE,
                        lite_topic=lt))]), metadata=md(SUPER), timeout=PATIENCE_S)
                assert r.status.code == Code.OK, r.status
            assert receive(s, "agents", "orders", client_id="victim-v2") == [b"m2"]
            assert receive(s, "agents", "orders", client_id="victim-v1") == [b"m1"]
        finally:
            for st in streams:
                st.close()


def test_a_revoke_ends_a_pull_records_stream_that_is_open(secured):
    """A PullRecordsStream with wait_ms never ends by itself: a revoke (or a deleted user) must stop
    it serving, as it stops every call made after it, not only the ones made from then on."""
    from tidemq.protocol import data
    from tidemq.protocol.pull_frame import decode_response, encode_request
    reader = ("reader", "secret-of-reader")
    for method, req in (("CreateUser", {"name": reader[0], "secret_key": reader[1]}),
                        ("Grant", {"user": reader[0], "resource": "topic:junk", "actions": ["sub"]})):
        r = admin.call(secured.endpoint, method, req, timeout_s=PATIENCE_S, metadata=md(SUPER))
        assert r["ok"], r
    with grpc.insecure_channel(secured.endpoint) as ch:
        s = sgrpc.MessagingServiceStub(ch)
        send(s, "junk", [b"before"])
        pull = ch.unary_stream(data.PULL_RECORDS_STREAM_PATH)
        call = pull(encode_request("junk", 0, 0, max_count=16, wait_ms=500), metadata=md(reader),
                    timeout=PATIENCE_S * 4)
        answers: queue.Queue = queue.Queue()

        def read():
            try:
                for raw in call:
                    answers.put(decode_response(raw)[0])
            except grpc.RpcError as e:
                answers.put(e)
            answers.put(None)
        t = threading.Thread(target=read, daemon=True)
        t.start()
        try:
            first = answers.get(timeout=PATIENCE_S)
            assert first["code"] == Code.OK and first["count"] >= 1, first
            r = admin.call(secured.endpoint, "Revoke", {"user": reader[0], "resource": "topic:junk",
                                                        "actions": ["sub"]}, timeout_s=PATIENCE_S, metadata=md(SUPER))
            assert r["ok"], r
            send(s, "junk", [b"after"])
            while True:
                got = answers.get(timeout=PATIENCE_S)
                assert isinstance(got, dict), got
                assert got["code"] != Code.OK or got["count"] == 0, f"served after the revoke: {got}"
                if got["code"] == Code.FORBIDDEN:
                    assert "reader" in got["message"] and "junk" in got["message"]
                    break
            assert answers.get(timeout=PATIENCE_S) is None, "the stream ends after its refusal"
        finally:
            call.cancel()
            t.join(PATIENCE_S)
