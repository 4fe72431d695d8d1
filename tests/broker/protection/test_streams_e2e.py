"""Open Telemetry streams and long polls are bounded per connection and per user
(protection/streams.py): a real broker with authentication on and small bounds; raw stubs signed as
each user, each gRPC channel its own connection. One more than a bound is answered at once with
TOO_MANY_REQUESTS in the method's own way; a stream that ends makes room again. Before, any signed-in
user could hold as many as it liked (each a task, buffers and an outbox on the broker)."""

import queue
import threading
import time

import grpc

from tidemq.client import admin
from tidemq.protocol import data
from tidemq.protocol.pull_frame import decode_response, encode_request
from tidemq.protocol.signing import date_time, signed_metadata
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.auth import AUTH
from ...support.brokers import make_topic
from ...support.wait import PATIENCE_S, wait_until

SUPER = ("tidemq-ak", "s3cret-sk")
OTHER = ("other", "secret-of-other")
ENV = {**AUTH, "TIDEMQ_STREAMS_PER_CONNECTION_MAX": "2", "TIDEMQ_STREAMS_PER_USER_MAX": "3"}
SETTINGS = pb.Settings(client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="T")]))


def md(keys, client_id):
    return tuple(signed_metadata(keys[0], keys[1], date_time(time.time()))) + (("x-mq-client-id", client_id),)


def connection(endpoint):
    """A channel on a connection of its own (gRPC shares one between channels alike otherwise)."""
    return grpc.insecure_channel(endpoint, options=[("grpc.use_local_subchannel_pool", 1)])


class Telemetry:
    """A Telemetry stream: ``first`` is the broker's first command (its answer to our settings, or the
    refusal it opens with)."""

    def __init__(self, ch, keys, client_id):
        self.out: queue.Queue = queue.Queue()
        self.out.put(spb.TelemetryCommand(settings=SETTINGS))
        self.call = sgrpc.MessagingServiceStub(ch).Telemetry(iter(self.out.get, None), metadata=md(keys, client_id),
                                                             timeout=PATIENCE_S * 4)
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.first = self.answers.get(timeout=PATIENCE_S)

    def _read(self):
        try:
            for cmd in self.call:
                self.answers.put(cmd.status.code)
        except grpc.RpcError as e:
            self.answers.put(e.code())
        self.answers.put(None)

    def close(self):
        self.out.put(None)
        self.call.cancel()


def test_streams_and_long_polls_are_bounded_per_connection_and_per_user(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "T", 1)
    b = broker_factory(root=root, env=ENV)
    r = admin.call(b.endpoint, "CreateUser", {"name": OTHER[0], "secret_key": OTHER[1]}, timeout_s=PATIENCE_S,
                   metadata=md(SUPER, "admin"))
    assert r["ok"], r
    opened = []
    with connection(b.endpoint) as a, connection(b.endpoint) as c:
        try:
            for i in range(2):
                opened.append(Telemetry(a, SUPER, f"a{i}"))
                assert opened[-1].first == Code.OK
            extra = Telemetry(a, SUPER, "a2")
            assert extra.first == Code.TOO_MANY_REQUESTS, "a third on one connection"
            assert extra.answers.get(timeout=PATIENCE_S) is None, "and the refused stream ends"
            rs = list(sgrpc.MessagingServiceStub(a).ReceiveMessage(spb.ReceiveMessageRequest(
                group=pb.Resource(name="G"), message_queue=pb.MessageQueue(topic=pb.Resource(name="T")),
                batch_size=1, long_polling_timeout={"seconds": 20}), metadata=md(SUPER, "a3"), timeout=PATIENCE_S))
            assert [x.status.code for x in rs] == [Code.TOO_MANY_REQUESTS], "a long poll counts too"

            opened.append(Telemetry(c, SUPER, "c0"))
            assert opened[-1].first == Code.OK, "another connection"
            extra = Telemetry(c, SUPER, "c1")
            assert extra.first == Code.TOO_MANY_REQUESTS, "the user's fourth, across its connections"
            pull = c.unary_unary(data.PULL_RECORDS_PATH)
            head = decode_response(pull(encode_request("T", 0, 0, wait_ms=20_000), metadata=md(SUPER, "c2"),
                                        timeout=PATIENCE_S))[0]
            assert head["code"] == Code.TOO_MANY_REQUESTS
            opened.append(Telemetry(c, OTHER, "o0"))
            assert opened[-1].first == Code.OK, "another user's on the same connection"

            opened.pop(0).close()                   # one of the first connection's ends: room again
            again = wait_until(lambda: (t := Telemetry(a, SUPER, "a4")).first == Code.OK and t,
                               "a stream accepted once one ended")
            opened.append(again)
        finally:
            for t in opened:
                t.close()
