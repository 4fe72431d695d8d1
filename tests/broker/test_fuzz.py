"""Every method of a real broker answered with random bytes, truncated and type-confused
requests and absurd numbers: a typed answer each time (never gRPC UNKNOWN / INTERNAL from a
handler, never a traceback in the broker's log), and the broker still serves afterwards. Also
well-formed protobufs of every MessagingService method with every number at an extreme (negative
and 2^62 offsets, 2^31 batch sizes, huge and negative durations), 100,000 ack entries, message
types 8 and 9, and garbage and absurd commands on the Telemetry stream."""

import json
import random

import grpc

from tidemq.client import Producer, PullConsumer
from tidemq.protocol import admin as api
from tidemq.protocol import data

from ..support.brokers import SMALL
from ..support.wait import PATIENCE_S

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


# Well-formed requests with absurd numbers ------------------------------------------------------

_INTS = {32: [-1, -(2 ** 31), 2 ** 31 - 1, 0], 64: [-1, -(2 ** 62), 2 ** 62, 2 ** 63 - 1],
         "u32": [2 ** 32 - 1, 0, 1, 2 ** 31], "u64": [2 ** 64 - 1, 2 ** 62, 0, 1]}


def message_class(descriptor):
    from google.protobuf import message_factory
    return message_factory.GetMessageClass(descriptor)


def _ints(f, k: int) -> int:
    from google.protobuf.descriptor import FieldDescriptor as F
    if f.type in (F.TYPE_UINT32, F.TYPE_FIXED32):
        return _INTS["u32"][k % 4]
    if f.type in (F.TYPE_UINT64, F.TYPE_FIXED64):
        return _INTS["u64"][k % 4]
    if f.type in (F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64):
        return _INTS[64][k % 4]
    return _INTS[32][k % 4]


def absurd(cls, k: int, topic: str, depth: int = 0):
    """A well-formed ``cls`` whose every number is an extreme (variant ``k``), names ``topic``."""
    from google.protobuf.descriptor import FieldDescriptor as F
    m = cls()
    for f in cls.DESCRIPTOR.fields:
        repeated = f.is_repeated
        if f.type == F.TYPE_MESSAGE:
            if f.message_type.GetOptions().map_entry:
                getattr(m, f.name)["k"] = "v" if f.message_type.fields_by_name["value"].type == F.TYPE_STRING \
                    else getattr(m, f.name).get("k")
                continue
            if depth >= 3:
                continue
            sub = absurd(message_class(f.message_type), k, topic, depth + 1)
            if repeated:
                getattr(m, f.name).add().CopyFrom(sub)
            else:
                getattr(m, f.name).CopyFrom(sub)
            continue
        if f.type == F.TYPE_STRING:
            v = topic
        elif f.type == F.TYPE_BYTES:
            v = b"x"
        elif f.type == F.TYPE_BOOL:
            v = True
        elif f.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
            v = [float("inf"), float("nan"), -1e308, 1e308][k % 4]
        else:
            v = _ints(f, k)
        if repeated:
            getattr(m, f.name).append(v)
        else:
            setattr(m, f.name, v)
    return m


def statuses(answer) -> list:
    """The status codes a response (or a stream's responses) carries."""
    items = answer if isinstance(answer, list) else [answer]
    return [r.status.code for r in items if r.HasField("status")]


def test_well_formed_requests_with_absurd_numbers_get_typed_statuses(broker_factory):
    """Negative and 2^62 offsets, 2^31 batch sizes, huge and negative durations, 100,000 ack
    entries, message types 8 and 9, garbage and absurd commands on the Telemetry stream: every
    method answers with a status of its own (never an unset one, never INTERNAL_SERVER_ERROR), no
    traceback in the log, and the broker serves afterwards."""
    from tidemq.protocol.stubs import pb, spb
    b = broker_factory(env={**SMALL, "TIDEMQ_LONG_POLLING_S_MAX": "1"}, args=["--auto-create-topics"])
    topic = "fz"
    with Producer(b.endpoint) as p:
        assert all(r.ok for r in p.send_batch(topic, [b"m%d" % i for i in range(20)]))
    service = spb.DESCRIPTOR.services_by_name["MessagingService"]
    bad = []
    with grpc.insecure_channel(b.endpoint, options=[("grpc.max_send_message_length", 64 << 20)]) as ch:
        def unary(m, req):
            fn = ch.unary_unary(f"/{service.full_name}/{m.name}", request_serializer=lambda r: r.SerializeToString(),
                                response_deserializer=message_class(m.output_type).FromString)
            return fn(req, timeout=120)

        def stream(m, req):
            fn = ch.unary_stream(f"/{service.full_name}/{m.name}", request_serializer=lambda r: r.SerializeToString(),
                                 response_deserializer=message_class(m.output_type).FromString)
            return list(fn(req, timeout=120))

        def check(name, req, call, m):
            try:
                codes = statuses(call(m, req))
            except grpc.RpcError as e:
                if e.code() not in TYPED:
                    bad.append((name, e.code(), e.details()))
                return
            if not codes or any(c in (pb.Code.CODE_UNSPECIFIED, pb.Code.INTERNAL_SERVER_ERROR) for c in codes):
                bad.append((name, codes, str(req)[:200]))

        for m in service.methods:
            if m.client_streaming:
                continue
            call = stream if m.server_streaming else unary
            for k in range(4):
                check(f"{m.name}#{k}", absurd(message_class(m.input_type), k, topic), call, m)
        by = {m.name: m for m in service.methods}
        acks = spb.AckMessageRequest(group=pb.Resource(name="g"), topic=pb.Resource(name=topic), entries=[
            spb.AckMessageEntry(message_id="m", receipt_handle="%s:0:%d:1:0" % (topic, i)) for i in range(100_000)])
        check("AckMessage x100000", acks, unary, by["AckMessage"])
        for t in (8, 9):
            req = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=topic), body=b"x",
                                                              system_properties=pb.SystemProperties(message_type=t))])
            got = unary(by["SendMessage"], req)
            assert got.entries[0].status.code == pb.Code.UNSUPPORTED, (t, got)
        pulls = [spb.PullMessageRequest(group=pb.Resource(name="g"), message_queue=pb.MessageQueue(
            topic=pb.Resource(name=topic), id=0), offset=o, batch_size=n,
            long_polling_timeout={"seconds": s}) for o, n, s in ((-1, 2 ** 31 - 1, 2 ** 40), (2 ** 62, 1, -5),
                                                                  (0, 2 ** 31 - 1, 0))]
        for req in pulls:
            check(f"PullMessage {req.offset}/{req.batch_size}", req, stream, by["PullMessage"])
        # a pull at the queue's end asking to wait 2^40 s, with no deadline: answered after long_polling_s_max
        import threading
        at_end = spb.PullMessageRequest(group=pb.Resource(name="g"), message_queue=pb.MessageQueue(
            topic=pb.Resource(name=topic), id=0), offset=2 ** 40, batch_size=1, long_polling_timeout={"seconds": 2 ** 40})
        with PullConsumer(b.endpoint) as c:
            at_end.offset = c.query_offset(topic, 0)
        answer: list = []
        fn = ch.unary_stream(f"/{service.full_name}/PullMessage", request_serializer=lambda r: r.SerializeToString(),
                             response_deserializer=spb.PullMessageResponse.FromString)
        t = threading.Thread(target=lambda: answer.extend(fn(at_end)), daemon=True)
        t.start()
        t.join(PATIENCE_S)
        assert statuses(answer) == [pb.Code.MESSAGE_NOT_FOUND], "a long poll is bounded by long_polling_s_max"
        # the Telemetry stream: garbage, then absurd commands
        tele = f"/{service.full_name}/Telemetry"
        rng = random.Random(9)
        raw = ch.stream_stream(tele, request_serializer=lambda x: x, response_deserializer=lambda x: x)
        try:
            list(raw(iter([rng.randbytes(n) for n in (1, 7, 100, 3000)]), timeout=60))
        except grpc.RpcError as e:
            if e.code() not in TYPED:
                bad.append(("Telemetry garbage", e.code(), e.details()))
        typed = ch.stream_stream(tele, request_serializer=lambda r: r.SerializeToString(),
                                 response_deserializer=spb.TelemetryCommand.FromString)
        try:
            answers = list(typed(iter([absurd(spb.TelemetryCommand, k, topic) for k in range(4)]), timeout=60))
            if any(a.HasField("status") and a.status.code in (pb.Code.CODE_UNSPECIFIED,
                                                             pb.Code.INTERNAL_SERVER_ERROR) for a in answers):
                bad.append(("Telemetry absurd", [a.status.code for a in answers]))
        except grpc.RpcError as e:
            if e.code() not in TYPED:
                bad.append(("Telemetry absurd", e.code(), e.details()))
    assert not bad, bad[:10]
    # a million queues: refused before anything is made, with a typed code
    from ..support.brokers import admin_call
    r = admin_call(b.endpoint, api.CREATE_TOPIC, {"name": "million", "queues": 1_000_000})
    assert r["ok"] is False and r["code"] == api.Refusal.LIMIT_EXCEEDED.value and "topic_queues_max" in r["error"], r
    assert "million" not in {t["topic"] for t in admin_call(b.endpoint, api.LIST_TOPICS)["topics"]}
    r = admin_call(b.endpoint, api.QUERY, {"topic": topic, "key": "k", "max": 10_000})
    assert r["ok"] is False and r["code"] == api.Refusal.LIMIT_EXCEEDED.value, r
    with Producer(b.endpoint) as p:                       # still serving
        assert all(r.ok for r in p.send_batch("after", [b"a"]))
    assert b.stop() == 0
    log = b.proc.stderr.read()
    assert "Traceback" not in log, log[-3000:]
