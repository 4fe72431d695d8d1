"""Bytes that are not the method's request message get INVALID_ARGUMENT, for unary,
server-streaming and bidirectional methods; good requests pass untouched; other services
(raw bytes, JSON) are not wrapped."""

import asyncio

import grpc
import pytest

from tidemq.broker.protection.decoding import decoded, typed_decoding
from tidemq.protocol.stubs import pb, spb

SERVICE = "apache.rocketmq.v2.Probe"
GOOD = spb.QueryRouteRequest(topic=pb.Resource(name="T")).SerializeToString()
BAD = b"\xff\xff\xff\xff\x0f garbage"
ANSWER = spb.QueryRouteResponse().SerializeToString()


def handlers():
    async def unary(req, ctx):
        return spb.QueryRouteResponse()

    async def stream(req, ctx):
        for _ in range(2):
            yield spb.QueryRouteResponse()

    async def bidi(reqs, ctx):
        async for _ in reqs:
            yield spb.QueryRouteResponse()

    async def raw(req, ctx):
        return b"raw:" + req

    decode, encode = spb.QueryRouteRequest.FromString, spb.QueryRouteResponse.SerializeToString

    async def from_bytes(raw, ctx):          # given the bytes, decoding them itself (SendMessage's lane)
        await decoded(decode, raw, ctx, f"/{SERVICE}/Bytes")
        return spb.QueryRouteResponse()

    probe = grpc.method_handlers_generic_handler(SERVICE, {
        "Bytes": grpc.unary_unary_rpc_method_handler(from_bytes, None, encode),
        "Unary": grpc.unary_unary_rpc_method_handler(unary, decode, encode),
        "Stream": grpc.unary_stream_rpc_method_handler(stream, decode, encode),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi, decode, encode)})
    other = grpc.method_handlers_generic_handler("tidemq.Probe", {
        "Raw": grpc.unary_unary_rpc_method_handler(raw)})
    return [probe, other]


async def scenario():
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(typed_decoding(handlers()))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    out = {}
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            unary = ch.unary_unary(f"/{SERVICE}/Unary")
            out["unary good"] = await unary(GOOD, timeout=60)
            for name, call in (("unary bad", lambda: unary(BAD, timeout=60)),
                               ("stream bad", lambda: _drain(ch.unary_stream(f"/{SERVICE}/Stream")(BAD, timeout=60))),
                               ("bidi bad", lambda: _drain(ch.stream_stream(f"/{SERVICE}/Bidi")(
                                   iter([GOOD, BAD]), timeout=60)))):
                try:
                    out[name] = await call()
                except grpc.aio.AioRpcError as e:
                    out[name] = (e.code(), e.details())
            out["stream good"] = await _drain(ch.unary_stream(f"/{SERVICE}/Stream")(GOOD, timeout=60))
            out["raw"] = await ch.unary_unary("/tidemq.Probe/Raw")(BAD, timeout=60)
            out["bytes good"] = await ch.unary_unary(f"/{SERVICE}/Bytes")(GOOD, timeout=60)
            try:
                out["bytes bad"] = await ch.unary_unary(f"/{SERVICE}/Bytes")(BAD, timeout=60)
            except grpc.aio.AioRpcError as e:
                out["bytes bad"] = (e.code(), e.details())
    finally:
        await server.stop(None)
    return out


async def _drain(call):
    return [r async for r in call]


@pytest.fixture(scope="module")
def answers():
    return asyncio.run(scenario())


def test_good_requests_pass(answers):
    assert answers["unary good"] == ANSWER
    assert answers["stream good"] == [ANSWER, ANSWER]


@pytest.mark.parametrize("kind", ["unary bad", "stream bad", "bidi bad"])
def test_undecodable_requests_are_invalid_argument_naming_the_method(answers, kind):
    code, details = answers[kind]
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert SERVICE in details and "not a valid message" in details


def test_services_outside_the_prefix_are_not_wrapped(answers):
    assert answers["raw"] == b"raw:" + BAD


def test_a_handler_given_the_bytes_is_kept_and_answers_what_is_not_a_request_the_same_way(answers):
    class Details:
        method = f"/{SERVICE}/Bytes"
    probe = handlers()[0]
    assert typed_decoding([probe])[0].service(Details()) is probe.service(Details()), "no deserializer: not wrapped"
    assert answers["bytes good"] == ANSWER
    code, details = answers["bytes bad"]
    assert code == grpc.StatusCode.INVALID_ARGUMENT and f"/{SERVICE}/Bytes" in details
