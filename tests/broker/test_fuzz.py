"""Every method of a real broker answered with random bytes, truncated and type-confused
requests and absurd numbers: a typed answer each time (never gRPC UNKNOWN / INTERNAL from a
handler, never a traceback in the broker's log), and the broker still serves afterwards."""

import json
import random

import grpc

from tidemq.client import Producer, PullConsumer
from tidemq.protocol import admin as api
from tidemq.protocol import data

from ..support.brokers import SMALL

CASES_PER_METHOD = 30
TYPED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED,
         grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND,
         grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.FAILED_PRECONDITION}

ABSURD = [1e400, -1e400, float("nan"), 2 ** 70, -1, [], {}, "x" * 10_000, None, True, "Infinity"]


def json_cases(rng: random.Random, fields: list[str]) -> list[bytes]:
    out = [b"", b"{", b"[]", b"null", b"1e400", b"[" * 100_000 + b"]" * 100_000, bytes(rng.randbytes(64)),
           b'{"a": Infinity}', b"\xff\xfe"]
    while len(out) < CASES_PER_METHOD:
        doc = {f: rng.choice(ABSURD) for f in rng.sample(fields, rng.randint(0, len(fields)))}
        text = json.dumps(doc, allow_nan=True)
        if rng.random() < 0.3:
            text = text[:rng.randint(0, len(text))]
        out.append(text.encode())
    return out


def call(channel, path: str, raw: bytes):
    fn = channel.unary_unary(path, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    try:
        return fn(raw, timeout=60), grpc.StatusCode.OK
    except grpc.RpcError as e:
        return None, e.code()


def test_every_method_answers_every_bad_request_with_a_typed_status(broker_factory):
    rng = random.Random(12)
    b = broker_factory(env=SMALL, args=["--auto-create-topics"])
    fields = ["name", "queues", "topic", "group", "to", "key", "id", "commitlog_offset", "queue", "timestamp_ms",
              "max", *api.ALARM_LIMITS]
    untyped = []
    with grpc.insecure_channel(b.endpoint) as ch:
        for method in api.METHODS:
            if method == api.SET_ALARM_LIMITS:
                continue                                  # below, with limits that leave the broker usable
            for raw in json_cases(rng, fields):
                answer, code = call(ch, f"/{api.SERVICE}/{method}", raw)
                if code not in TYPED:
                    untyped.append((method, raw[:60], code))
                elif answer is not None:
                    doc = json.loads(answer)
                    assert isinstance(doc, dict) and "ok" in doc, (method, raw[:60], answer[:200])
        for raw in [b"[]", b'{"disk_free_limit_bytes": 1e400}', b'{"memory_high_watermark_ratio": "x"}',
                    b'{"disk_free_limit_bytes": -1}', b'{"nope": 1}', b"{"]:
            answer, code = call(ch, f"/{api.SERVICE}/{api.SET_ALARM_LIMITS}", raw)
            assert code in TYPED and json.loads(answer)["ok"] is False, (raw, answer)
        for method, path in ((data.PULL_RECORDS, data.PULL_RECORDS_PATH), (data.SEND_RECORDS, data.SEND_RECORDS_PATH)):
            cases = json_cases(rng, ["topic", "queue_id", "offset", "max_count", "max_bytes", "wait_ms"])
            cases += [rng.randbytes(rng.randint(0, 300)) for _ in range(CASES_PER_METHOD)]
            for raw in cases:
                _answer, code = call(ch, path, raw)
                if code not in TYPED:
                    untyped.append((method, raw[:60], code))
        from tidemq.protocol.stubs import pb, spb
        service = spb.DESCRIPTOR.services_by_name["MessagingService"]
        for m in service.methods:
            if m.client_streaming:
                continue                                  # Telemetry: a stream (its garbage: the same decoder)
            path = f"/{service.full_name}/{m.name}"
            valid = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="t"), body=b"x")])
            cases = [rng.randbytes(rng.randint(1, 300)) for _ in range(CASES_PER_METHOD)]
            cases += [valid.SerializeToString()[:k] for k in (1, 3, 7)]              # truncated
            for raw in cases:
                if m.server_streaming:
                    fn = ch.unary_stream(path, request_serializer=lambda b: b, response_deserializer=lambda b: b)
                    try:
                        list(fn(raw, timeout=60))
                        code = grpc.StatusCode.OK
                    except grpc.RpcError as e:
                        code = e.code()
                else:
                    _answer, code = call(ch, path, raw)
                if code not in TYPED and code is not grpc.StatusCode.DEADLINE_EXCEEDED:
                    untyped.append((m.name, raw[:60], code))
        # a message type the enum does not know
        odd = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="odd"), body=b"x",
                                                          system_properties=pb.SystemProperties(message_type=7))])
        answer, code = call(ch, f"/{service.full_name}/SendMessage", odd.SerializeToString())
        assert code is grpc.StatusCode.OK
        got = spb.SendMessageResponse.FromString(answer)
        assert got.entries[0].status.code == pb.Code.UNSUPPORTED and "message type 7" in got.entries[0].status.message
    assert not untyped, untyped[:10]
    with Producer(b.endpoint) as p:                       # still serving
        assert all(r.ok for r in p.send_batch("after", [b"a", b"b"]))
    with PullConsumer(b.endpoint, group="g") as c:
        assert sum(len(c.pull("after", q, 0).messages) for q in range(c.queue_count("after"))) == 2
    assert b.stop() == 0
    log = b.proc.stderr.read()
    assert "Traceback" not in log, log[-3000:]
