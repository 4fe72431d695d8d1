"""Authentication end to end: with an access key and secret configured, the official client with
the right secret sends and receives; a wrong secret, no credentials, a missing or malformed
authorization header, a correctly signed header whose date is stale, ahead or not a date (a
replay) are answered UNAUTHORIZED in the status of every kind of RPC (unary, server stream, the
Telemetry stream), and the admin service answers the same code in its JSON answer."""

import logging
import time

import grpc
import pytest

from tidemq.client import admin
from tidemq.protocol.signing import date_time, sign, signed_metadata
from tidemq.protocol.stubs import Code, pb, sgrpc, spb


from ...support.auth import AUTH
from ...support.brokers import make_topic
from ...support.official import REQUEST_TIMEOUT_S, msg, receive_all, start


def official(endpoint, ak, sk, topic):
    from rocketmq import ClientConfiguration, Credentials, Producer
    p = Producer(ClientConfiguration(endpoint, Credentials(ak, sk), request_timeout=REQUEST_TIMEOUT_S), (topic,))
    p.startup()
    return p


def test_the_right_secret_is_accepted_and_a_wrong_one_refused(tmp_path, broker_factory, caplog):
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
    root = str(tmp_path / "store")
    make_topic(root, "Secure", 2)
    b = broker_factory(root, env=AUTH)
    p = official(b.endpoint, "tidemq-ak", "s3cret-sk", "Secure")
    c = start(lambda: SimpleConsumer(ClientConfiguration(b.endpoint, Credentials("tidemq-ak", "s3cret-sk"),
                                                         request_timeout=REQUEST_TIMEOUT_S), "g",
                                     {"Secure": FilterExpression("*")}, await_duration=1))
    try:
        ids = {p.send(msg("Secure", b"m%d" % i)).message_id for i in range(3)}
        got = receive_all(c, 3)
        assert {m.message_id for m in got} == ids
        for m in got:
            c.ack(m)
    finally:
        c.shutdown()
        p.shutdown()

    # The client logs the status it was answered to its own logger, which does not propagate to the
    # root (rocketmq/v5/log/log_config.py: a file handler, "propagate": False): caplog's handler is
    # added to that logger itself, so that what is asserted does not hang on the client's log set-up.
    client_log = logging.getLogger("rocketmq-python-client")
    client_log.addHandler(caplog.handler)
    try:
        for ak, sk in (("tidemq-ak", "wrong"), ("other-ak", "s3cret-sk"), ("", "")):
            bad = official(b.endpoint, ak, sk, "Secure")   # starts: the client only logs a failed route
            try:
                with pytest.raises(Exception, match="failed to fetch topic:Secure route"):
                    bad.send(msg("Secure", b"never"))
            finally:
                bad.shutdown()
    finally:
        client_log.removeHandler(caplog.handler)
    assert "40100, unauthorized: unknown access key or wrong signature" in caplog.text
    assert "40100, unauthorized: the authorization header needs Credential" in caplog.text


def test_every_kind_of_rpc_answers_unauthorized(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "Secure", 1)
    b = broker_factory(root, env=AUTH)
    topic = pb.Resource(name="Secure")
    signed_at = date_time(time.time())          # signed now: a stale date is refused (test_auth.py)
    good = signed_metadata("tidemq-ak", "s3cret-sk", signed_at)
    java_style = [("x-mq-date-time", signed_at), ("authorization", "MQv2-HMAC-SHA1 Credential=tidemq-ak/region, "
                  f"SignedHeaders=x-mq-date-time, Signature={sign('s3cret-sk', signed_at).upper()}")]
    wrong_date = [("x-mq-date-time", "20260101T120001Z"), good[1][:]]    # signed for another date
    refused = {
        "no header": None,
        "wrong secret": signed_metadata("tidemq-ak", "nope", signed_at),
        "wrong access key": signed_metadata("someone", "s3cret-sk", signed_at),
        "another date": wrong_date,
        "other scheme": [("x-mq-date-time", signed_at), ("authorization", "Basic dGlkZW1xOg==")],
        "no date": [good[1]],
        # correctly signed, but not now: a captured header replayed later (or made up) is refused
        "stale, correctly signed": signed_metadata("tidemq-ak", "s3cret-sk", date_time(time.time() - 3 * 86_400)),
        "ahead, correctly signed": signed_metadata("tidemq-ak", "s3cret-sk", date_time(time.time() + 3 * 86_400)),
        "year 2000, correctly signed": signed_metadata("tidemq-ak", "s3cret-sk", "20000101T000000Z"),
        "not a date, correctly signed": signed_metadata("tidemq-ak", "s3cret-sk", "not-a-date"),
    }
    with grpc.insecure_channel(b.endpoint) as ch:
        stub = sgrpc.MessagingServiceStub(ch)
        send = spb.SendMessageRequest(messages=[pb.Message(topic=topic, body=b"x", system_properties=pb.SystemProperties(
            message_id="01AB", message_type=pb.MessageType.NORMAL, body_encoding=pb.Encoding.IDENTITY))])
        for md in (good, java_style):
            assert stub.QueryRoute(spb.QueryRouteRequest(topic=topic), metadata=md).status.code == Code.OK
            assert stub.SendMessage(send, metadata=md).status.code == Code.OK
        for why, md in refused.items():
            r = stub.QueryRoute(spb.QueryRouteRequest(topic=topic), metadata=md)
            assert r.status.code == Code.UNAUTHORIZED and r.status.message.startswith("unauthorized"), why
            assert stub.SendMessage(send, metadata=md).status.code == Code.UNAUTHORIZED, why
        md = refused["wrong secret"]
        recv = list(stub.ReceiveMessage(spb.ReceiveMessageRequest(
            group=pb.Resource(name="g"), message_queue=pb.MessageQueue(topic=topic), batch_size=1), metadata=md,
            timeout=30))
        assert [r.status.code for r in recv] == [Code.UNAUTHORIZED]
        pulled = list(stub.PullMessage(spb.PullMessageRequest(
            group=pb.Resource(name="g"), message_queue=pb.MessageQueue(topic=topic, id=0)), metadata=md, timeout=30))
        assert [r.status.code for r in pulled] == [Code.UNAUTHORIZED]
        settings = spb.TelemetryCommand(settings=pb.Settings(client_type=pb.ClientType.PRODUCER))
        tele = list(stub.Telemetry(iter([settings]), metadata=md, timeout=30))
        assert [(t.status.code, t.HasField("settings")) for t in tele] == [(Code.UNAUTHORIZED, False)]
        tele = stub.Telemetry(iter([settings]), metadata=good, timeout=30)
        first = next(tele)
        assert first.status.code == Code.OK and first.HasField("settings")
        tele.cancel()

    # the admin service answers the same failure with the same code, in its own (JSON) answer
    r = admin.call(b.endpoint, "ListTopics")
    assert (r["ok"], r["code"]) == (False, "UNAUTHORIZED") and r["error"].startswith("unauthorized")
    for why in ("stale, correctly signed", "year 2000, correctly signed", "wrong secret"):
        r = admin.call(b.endpoint, "ListTopics", metadata=refused[why])
        assert (r["ok"], r["code"]) == (False, "UNAUTHORIZED"), why
    assert admin.call(b.endpoint, "ListTopics", metadata=good)["ok"]
    assert admin.call(b.endpoint, "Alarms", metadata=good)["alarms"]["auth"] is True
