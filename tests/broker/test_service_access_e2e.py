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


def _admin(b, method, req):
    r = admin.call(b.endpoint, method, req, timeout_s=PATIENCE_S, metadata=md(SUPER))
    assert r["ok"], r


def _in_thread(fn) -> queue.Queue:
    out: queue.Queue = queue.Queue()

    def run():
        try:
            out.put(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out.put(e)
    threading.Thread(target=run, daemon=True).start()
    return out


@pytest.mark.parametrize("kind", ["ReceiveMessage", "PullMessage", "PullRecords"])
def test_a_revoke_during_a_long_poll_hands_nothing_out(secured, kind):
    """A single long-polling call (ReceiveMessage and PullMessage up to 30 s, PullRecords up to 60 s) was
    checked when it began only: a revoke while it waited let it hand out (and, for a receive, pop) what
    arrived after. It is checked again when the wait ends: FORBIDDEN, nothing handed out, nothing
    popped (the message is the group's next one, first delivery, once the user may sub again)."""
    from tidemq.protocol import data
    from tidemq.protocol.pull_frame import decode_response, encode_request
    group = f"pollers-{kind.lower()}"
    poller = (f"poller-{kind.lower()}", "secret-of-poller")
    _admin(secured, "CreateUser", {"name": poller[0], "secret_key": poller[1]})
    for res in ("topic:junk", f"group:{group}"):
        _admin(secured, "Grant", {"user": poller[0], "resource": res, "actions": ["sub"]})
    mq = pb.MessageQueue(topic=pb.Resource(name="junk"), id=0)
    with grpc.insecure_channel(secured.endpoint) as ch:
        s = sgrpc.MessagingServiceStub(ch)
        send(s, "junk", [b"before"])
        while receive(s, group, "junk", keys=poller, client_id="poller-1"):     # the group drained
            pass
        end = s.QueryOffset(spb.QueryOffsetRequest(message_queue=mq, query_offset_policy=pb.QueryOffsetPolicy.END),
                            metadata=md(SUPER), timeout=PATIENCE_S).offset
        if kind == "ReceiveMessage":
            call = lambda: [(r.status.code if r.HasField("status") else r.message.body)  # noqa: E731
                            for r in s.ReceiveMessage(spb.ReceiveMessageRequest(
                                group=pb.Resource(name=group), message_queue=mq, batch_size=32,
                                invisible_duration={"seconds": 300}, long_polling_timeout={"seconds": 20}),
                                metadata=md(poller, "poller-1"), timeout=PATIENCE_S)
                            if r.HasField("status") or r.HasField("message")]
        elif kind == "PullMessage":
            call = lambda: [(r.status.code if r.HasField("status") else r.message.body)  # noqa: E731
                            for r in s.PullMessage(spb.PullMessageRequest(
                                group=pb.Resource(name=group), message_queue=mq, offset=end, batch_size=32,
                                long_polling_timeout={"seconds": 20}), metadata=md(poller), timeout=PATIENCE_S)
                            if r.HasField("status") or r.HasField("message")]
        else:
            pull = ch.unary_unary(data.PULL_RECORDS_PATH)
            call = lambda: [decode_response(pull(encode_request("junk", 0, end, max_count=16,  # noqa: E731
                                                                wait_ms=20_000), metadata=md(poller),
                                                 timeout=PATIENCE_S))[0]["code"]]
        answer = _in_thread(call)
        _admin(secured, "Revoke", {"user": poller[0], "resource": "topic:junk", "actions": ["sub"]})
        send(s, "junk", [b"after"])                     # wakes the waiting call
        got = answer.get(timeout=PATIENCE_S)
        assert got == [Code.FORBIDDEN], f"{kind} after the revoke: {got}"
        _admin(secured, "Grant", {"user": poller[0], "resource": "topic:junk", "actions": ["sub"]})
        if kind == "ReceiveMessage":
            r = list(s.ReceiveMessage(spb.ReceiveMessageRequest(
                group=pb.Resource(name=group), message_queue=mq, batch_size=32, invisible_duration={"seconds": 300},
                long_polling_timeout={"seconds": 1}), metadata=md(poller, "poller-1"), timeout=PATIENCE_S))
            msgs = [(x.message.body, x.message.system_properties.delivery_attempt) for x in r if x.HasField("message")]
            assert msgs == [(b"after", 1)], "nothing was popped by the refused call"


def test_orphan_checks_go_only_to_a_producer_that_may_still_pub(secured):
    """A producer's declared topics were vetted once, when it declared them: after its user lost pub on a
    topic, the broker's orphan checks (half messages, bodies included) of that topic went on being sent
    to its stream. They go to a producer that may pub it now."""
    txer = ("txer", "secret-of-txer")
    _admin(secured, "CreateUser", {"name": txer[0], "secret_key": txer[1]})
    _admin(secured, "Grant", {"user": txer[0], "resource": "topic:junk", "actions": ["pub"]})
    producer = lambda: pb.Settings(client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(  # noqa: E731
        topics=[pb.Resource(name="junk")]))
    with grpc.insecure_channel(secured.endpoint) as ch:
        s = sgrpc.MessagingServiceStub(ch)
        revoked, other = Stream(s, txer, "txer-1"), None
        try:
            assert revoked.settings(producer()).status.code == Code.OK
            other = Stream(s, SUPER, "txn-checker")           # opened second: asked only when the first may not
            assert other.settings(producer()).status.code == Code.OK
            _admin(secured, "Revoke", {"user": txer[0], "resource": "topic:junk", "actions": ["pub"]})
            r = s.SendMessage(spb.SendMessageRequest(messages=[pb.Message(
                topic=pb.Resource(name="junk"), body=b"half-secret", system_properties=pb.SystemProperties(
                    message_id=f"0ATXN{time.time_ns()}", message_type=pb.MessageType.TRANSACTION,
                    orphaned_transaction_recovery_duration={"seconds": 1}))]),
                metadata=md(SUPER, "a-sender-gone"), timeout=PATIENCE_S)
            assert r.status.code == Code.OK, r.status
            check = other.answers.get(timeout=PATIENCE_S)
            assert check.recover_orphaned_transaction_command.message.body == b"half-secret"
            assert revoked.answers.empty(), "nothing sent to the producer whose pub was revoked"
        finally:
            for st in (revoked, other):
                if st is not None:
                    st.close()
