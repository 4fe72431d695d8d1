"""Requests that are not what their method takes get a typed answer: INVALID_ARGUMENT, never
gRPC's UNKNOWN with a traceback in the broker's log.

gRPC decodes a request with the method's deserializer (``SendMessageRequest.FromString`` for
the RocketMQ service) before any handler runs; bytes that are not that message raise there, and
gRPC answers UNKNOWN and logs the exception with its traceback, once per request: a client
sending garbage fills the log. This interceptor gives every handler a deserializer that turns a
decoding failure into a marker, and a behaviour that answers the marker with INVALID_ARGUMENT
naming the method (for streamed requests: at the message that is not one)."""

from __future__ import annotations

import logging

import grpc

log = logging.getLogger("tidemq.broker")


class _Undecodable:
    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def undecodable(request) -> bool:
    """Whether a request is the marker of bytes its method could not decode (answered
    INVALID_ARGUMENT by its tolerant handler)."""
    return type(request) is _Undecodable


def _tolerant(deserialize):
    if deserialize is None:
        return None

    def decode(raw: bytes):
        try:
            return deserialize(raw)
        except Exception as e:  # noqa: BLE001 - whatever a deserializer raises, the request is not one
            return _Undecodable(e)
    return decode


async def _refuse(context, method: str, bad: _Undecodable) -> None:
    log.info("%s: a request that is not one (%s)", method, bad.error)
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{method}: the request is not a valid message of "
                                                          f"this method ({type(bad.error).__name__})")


async def decoded(deserialize, raw: bytes, context, method: str):
    """``raw`` decoded with ``deserialize``, for a handler given the request's bytes; bytes that
    are not one are answered as the tolerant handlers answer them (INVALID_ARGUMENT)."""
    try:
        return deserialize(raw)
    except Exception as e:  # noqa: BLE001 - whatever a deserializer raises, the request is not one
        await _refuse(context, method, _Undecodable(e))


def typed_decoding(handlers, prefix: str = "/apache.rocketmq.v2.") -> list:
    """``handlers`` (generic RPC handlers) with their methods under ``prefix`` made tolerant."""
    return [TypedDecoding(h, prefix) for h in handlers]


class TypedDecoding(grpc.GenericRpcHandler):
    """A generic handler whose methods under ``prefix`` (the RocketMQ service: protobuf requests,
    async handlers; tidemq's own services take raw bytes or JSON and answer bad ones themselves)
    are their tolerant twins. A wrapper of the handlers, not a server interceptor: with any
    interceptor, grpc.aio looks every call's handler up through a coroutine chain, which cost
    the official client's one-message sends ~2-3 % of their rate (bench/README.md)."""

    def __init__(self, inner: grpc.GenericRpcHandler, prefix: str = "/apache.rocketmq.v2.") -> None:
        self.inner = inner
        self.prefix = prefix
        # method -> (the handler, its tolerant twin): the twin made once per handler, not per call
        self._made: dict[str, tuple] = {}

    def service(self, details):
        handler = self.inner.service(details)
        method = details.method
        if handler is None or not method.startswith(self.prefix):
            return handler
        made = self._made.get(method)
        if made is None or made[0] is not handler:
            made = self._made[method] = (handler, self._tolerant_twin(method, handler))
        return made[1]

    @staticmethod
    def _tolerant_twin(method: str, handler):
        """``handler`` with a deserializer that never raises and a behaviour that answers what it
        could not decode with INVALID_ARGUMENT. A handler given the request's bytes (no deserializer)
        decodes them itself: it is kept as it is."""
        if handler.request_deserializer is None:
            return handler
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary_unary(request, context):
                if isinstance(request, _Undecodable):
                    await _refuse(context, method, request)
                return await inner(request, context)
            return grpc.unary_unary_rpc_method_handler(unary_unary, _tolerant(handler.request_deserializer),
                                                       handler.response_serializer)
        if handler.unary_stream is not None:
            inner_us = handler.unary_stream

            async def unary_stream(request, context):
                if isinstance(request, _Undecodable):
                    await _refuse(context, method, request)
                async for item in inner_us(request, context):
                    yield item
            return grpc.unary_stream_rpc_method_handler(unary_stream, _tolerant(handler.request_deserializer),
                                                        handler.response_serializer)
        if handler.stream_stream is not None:
            inner_ss = handler.stream_stream

            async def stream_stream(requests, context):
                async def checked():
                    async for r in requests:
                        if isinstance(r, _Undecodable):
                            await _refuse(context, method, r)
                        yield r
                async for item in inner_ss(checked(), context):
                    yield item
            return grpc.stream_stream_rpc_method_handler(stream_stream, _tolerant(handler.request_deserializer),
                                                         handler.response_serializer)
        return handler
