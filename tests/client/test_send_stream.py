"""FrameStream (tidemq/client/send_stream.py) against small gRPC servers of its method: answers
handed over in order with their ids, never more than the window unanswered, an older broker
(UNIMPLEMENTED) answered by the unary calls, a broker that stops answering timed out, the
caller's own error raised as it is, a refusal answered before any frame was taken raised
as the refusal; Producer.send_batches on it."""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest

from tidemq.client import ClientError, Producer
from tidemq.client.client import _Channel
from tidemq.client.send_stream import FrameStream, Unsupported
from tidemq.protocol import data
from tidemq.protocol.send_frame import decode_request, encode_response
from tidemq.protocol.stubs import Code

WINDOW = 3


class Server:
    """SendRecordsStream (and, with ``unary``, SendRecords) answering each frame with one OK
    entry per message whose offset is the frame's number; ``answer=False``: never answers."""

    def __init__(self, stream: bool = True, unary: bool = False, answer: bool = True, refuse: bool = False) -> None:
        self.received = 0
        self.unanswered_max = 0
        self.release = threading.Event()
        self.server = grpc.server(futures.ThreadPoolExecutor(4))
        methods = {}
        if stream:
            behaviour = self._refuse if refuse else self._stream if answer else self._mute
            methods[data.SEND_RECORDS_STREAM] = grpc.stream_stream_rpc_method_handler(behaviour)
        if unary:
            methods[data.SEND_RECORDS] = grpc.unary_unary_rpc_method_handler(self._unary)
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(data.SERVICE, methods),))
        self.endpoint = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def _answer(self, frame: bytes) -> bytes:
        _topic, msgs = decode_request(frame)
        k = self.received
        self.received += 1
        return encode_response(Code.OK, "", [(Code.OK, 0, k)] * len(msgs))

    def _stream(self, requests, context):
        answered = 0
        for frame in requests:
            self.unanswered_max = max(self.unanswered_max, self.received + 1 - answered)
            yield self._answer(frame)
            answered += 1

    def _refuse(self, requests, context):
        yield encode_response(Code.UNAUTHORIZED, "the request carries no authorization header", [])

    def _mute(self, requests, context):
        for _frame in requests:
            self.received += 1
        self.release.wait(60)
        return iter(())

    def _unary(self, frame, context):
        return self._answer(frame)

    def stop(self) -> None:
        self.release.set()
        self.server.stop(0)


@pytest.fixture
def servers():
    made: list[Server] = []

    def make(**kw) -> Server:
        made.append(Server(**kw))
        return made[-1]
    yield make
    for s in made:
        s.stop()


def frames(n: int, per: int = 2):
    from tidemq.protocol.send_frame import encode_request
    for k in range(n):
        ids = [b"01F%dM%d" % (k, i) for i in range(per)]
        yield encode_request("T", [b"body"] * per, ids), ids


def test_every_answer_in_order_with_its_ids_never_more_than_the_window_unanswered(servers):
    s = servers()
    got = []
    FrameStream(_Channel(s.endpoint, 30), WINDOW, 30).run(frames(20), lambda raw, ids: got.append((raw, ids)))
    assert [ids for _raw, ids in got] == [ids for _f, ids in frames(20)]
    assert s.received == 20 and 1 <= s.unanswered_max <= WINDOW


def test_an_older_broker_gives_back_what_was_sent_and_the_producer_sends_it_unary(servers):
    s = servers(stream=False, unary=True)
    with pytest.raises(Unsupported) as e:
        FrameStream(_Channel(s.endpoint, 30), WINDOW, 30).run(frames(10), lambda raw, ids: None)
    assert 1 <= len(e.value.sent) <= WINDOW and e.value.sent[0][1] == [b"01F0M0", b"01F0M1"]
    with Producer(s.endpoint, max_in_flight=WINDOW) as p:
        rs = p.send_batches("T", [[b"a", b"b"]] * 7)
    assert len(rs) == 14 and rs.all_ok() and sorted({r.offset for r in rs}) == list(range(7))


def test_a_broker_that_stops_answering_is_a_timeout(servers):
    s = servers(answer=False)
    with pytest.raises(ClientError) as e:
        FrameStream(_Channel(s.endpoint, 30), WINDOW, 0.5).run(frames(10), lambda raw, ids: None)
    assert e.value.code == Code.REQUEST_TIMEOUT and "resend them with the same message ids" in str(e.value)


def test_the_callers_error_is_raised_as_it_is(servers):
    s = servers()

    def failing():
        yield from frames(2)
        raise KeyError("the caller's")
    got = []
    with pytest.raises(KeyError, match="the caller's"):
        FrameStream(_Channel(s.endpoint, 30), WINDOW, 30).run(failing(), lambda raw, ids: got.append(ids))


def test_a_refusal_answered_before_any_frame_was_taken_is_the_refusal(servers):
    s = servers(refuse=True)
    later = threading.Event()

    def held():                           # no frame is taken until the refusal has been handled
        later.wait(60)
        yield from frames(2)
    try:
        with pytest.raises(ClientError) as e:
            FrameStream(_Channel(s.endpoint, 30), WINDOW, 30).run(held(), lambda raw, ids: Producer._record_results(raw, ids))
    finally:
        later.set()
    assert e.value.code == Code.UNAUTHORIZED
