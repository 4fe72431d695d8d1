"""Every RPC answers with a real status (code 0 is illegal to the clients), malformed requests
included; unsupported RPCs say so instead of gRPC UNIMPLEMENTED or a hang."""

import grpc
import pytest

from tidemq.protocol.stubs import pb, sgrpc, spb

from ..support.wait import PATIENCE_S


@pytest.fixture
def stub(tmp_path, broker_factory):
    b = broker_factory(str(tmp_path / "store"))
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
