"""Every RPC answers with a real status (code 0 is illegal to the clients), malformed requests
included; unsupported RPCs say so instead of gRPC UNIMPLEMENTED or a hang."""

import grpc
import pytest

from tidemq.protocol.stubs import pb, sgrpc, spb

from ..support.brokers import SMALL, brokers, make_topic, stored
from ..support.wait import PATIENCE_S


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    """One broker for the tests that send it requests it refuses or answers without storing anything
    (a broker's start is most of such a test's time)."""
    with brokers(str(tmp_path_factory.mktemp("service") / "store")) as start:
        b = start()
        ch = grpc.insecure_channel(b.endpoint)
        yield sgrpc.MessagingServiceStub(ch)
        ch.close()


UNARY = ["QueryRoute", "Heartbeat", "SendMessage", "AckMessage", "ChangeInvisibleDuration",
         "ForwardMessageToDeadLetterQueue", "QueryAssignment", "NotifyClientTermination", "EndTransaction",
         "QueryOffset", "GetOffset", "UpdateOffset", "RecallMessage", "SyncLiteSubscription"]


@pytest.mark.parametrize("rpc", UNARY)
def test_unary_rpcs_answer_a_status_for_an_empty_request(stub, rpc):
    req = getattr(spb, f"{rpc}Request")()
    resp = getattr(stub, rpc)(req, timeout=30)
    assert resp.status.code != 0, f"{rpc} answered code 0"


@pytest.mark.parametrize("rpc", ["ReceiveMessage", "PullMessage"])
def test_streaming_rpcs_answer_a_status_and_end(stub, rpc):
    resps = list(getattr(stub, rpc)(getattr(spb, f"{rpc}Request")(), timeout=30))
    assert resps and resps[0].status.code not in (0, pb.Code.OK)
    assert resps[0].status.code in (pb.Code.TOPIC_NOT_FOUND, pb.Code.ILLEGAL_CONSUMER_GROUP)  # names nothing


def test_forged_and_malformed_receipt_handles_are_invalid(stub):
    for handle in ("nonsense", "T:0:0:1:0123456789abcdef"):
        r = stub.AckMessage(spb.AckMessageRequest(group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
                                                  entries=[spb.AckMessageEntry(message_id="m", receipt_handle=handle)]),
                            timeout=30)
        assert r.status.code == pb.Code.INVALID_RECEIPT_HANDLE
        r = stub.ChangeInvisibleDuration(spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name="G"), topic=pb.Resource(name="T"), receipt_handle=handle,
            invisible_duration={"seconds": 5}, message_id="m"), timeout=30)
        assert r.status.code == pb.Code.INVALID_RECEIPT_HANDLE and r.receipt_handle == handle


def test_send_of_malformed_messages(stub):
    r = stub.SendMessage(spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="bad topic!"),
                                                                     body=b"x")]), timeout=30)
    assert r.status.code == pb.Code.ILLEGAL_TOPIC and len(r.entries) == 1
    r = stub.SendMessage(spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="T"), body=b"")]),
                         timeout=30)
    assert r.status.code == pb.Code.MESSAGE_BODY_EMPTY
    r = stub.SendMessage(spb.SendMessageRequest(), timeout=30)
    assert r.status.code == pb.Code.BAD_REQUEST


def test_telemetry_answers_settings_and_stays_open(stub):
    import threading
    done = threading.Event()
    settings = pb.Settings(client_type=pb.ClientType.PRODUCER,
                           publishing=pb.Publishing(topics=[pb.Resource(name="T")], max_body_size=1))

    def requests():
        yield spb.TelemetryCommand(settings=settings)
        yield spb.TelemetryCommand(settings=settings)
        done.wait(PATIENCE_S)         # the client keeps the stream open until it is done

    stream = stub.Telemetry(requests(), timeout=PATIENCE_S)
    for _ in range(2):
        r = next(stream)
        assert r.status.code == pb.Code.OK
        assert r.settings.publishing.max_body_size == 4 * 1024 * 1024, "the broker's limit, never the client's"
        assert r.settings.backoff_policy.HasField("exponential_backoff")
        assert r.settings.metric.on is False
    assert not stream.done(), "the server keeps the stream open"
    done.set()                        # the client half-closes: the server ends the stream
    assert list(stream) == []


def test_the_one_message_lane_answers_as_the_general_path(tmp_path, broker_factory):
    """SendMessage's short lane (a NORMAL message with an id, maybe a tag): stored and answered with
    its id and offset; its resend answered from the dedup window (general path); a body or an id
    the store refuses answered with the store's typed status; every stored one read back."""
    root = str(tmp_path / "store")
    make_topic(root, "T", 1)
    b = broker_factory(root, env={**SMALL, "TIDEMQ_MESSAGE_BODY_BYTES_MAX": "2048"})
    ch = grpc.insecure_channel(b.endpoint)
    stub = sgrpc.MessagingServiceStub(ch)

    def send(mid: str, body: bytes, **sp):
        m = pb.Message(topic=pb.Resource(name="T"), body=body,
                       system_properties=pb.SystemProperties(message_id=mid, message_type=pb.MessageType.NORMAL,
                                                             born_host="10.0.0.7", **sp))
        return stub.SendMessage(spb.SendMessageRequest(messages=[m]), timeout=PATIENCE_S)

    try:
        first = send("id-1", b"one", tag="TagA")
        assert first.status.code == pb.Code.OK and [(e.message_id, e.offset) for e in first.entries] == [("id-1", 0)]
        again = send("id-1", b"one", tag="TagA")
        assert again.status.code == pb.Code.OK and again.entries[0].offset == 0
        assert "duplicate" in again.status.message
        assert send("id-2", b"two").entries[0].offset == 1
        too_big = send("id-3", b"x" * 4096)
        assert too_big.status.code == pb.Code.MESSAGE_BODY_TOO_LARGE and too_big.entries[0].message_id == "id-3"
        long_id = send("i" * 40_000, b"y")
        assert long_id.status.code == pb.Code.MESSAGE_PROPERTIES_TOO_LARGE
    finally:
        ch.close()
    assert b.stop() == 0
    got = stored(root, "T")
    assert [(m.msg_id, m.body, m.tags, m.born_host) for m in got] == [("id-1", b"one", "TagA", "10.0.0.7:0"),
                                                                        ("id-2", b"two", None, "10.0.0.7:0")]
