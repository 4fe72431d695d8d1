"""Bounds on the calls a client keeps open: Telemetry streams and long polls.

A Telemetry stream stays open for the client's life, and a long poll (ReceiveMessage, PullMessage,
PullRecords) or a PullRecordsStream / SendRecordsStream for up to a minute or for ever; each holds a
task, its buffers and (Telemetry) an outbox on the broker. Any client -- any signed-in user, with
authentication on -- could open thousands of them. So at most

* ``streams_per_connection_max`` such calls are open at once on one connection (the gRPC peer: the
  client's own for a call a follower forwarded, forwarded.py), and
* ``streams_per_user_max`` of one user's (authentication on) across all its connections;

one more is answered at once, before its handler runs, with the protocol's TOO_MANY_REQUESTS (the
RocketMQ service: the response's status, Telemetry as one command; tidemq.Data: the frame's code),
which the clients back off on. A call counts from when it passed the guard (access.py: IDENTITY says
who) until it ends, however it ends. Every other call passes untouched.
"""

from __future__ import annotations

import inspect

import grpc

from ...protocol import data
from ...protocol.stubs import Code
from .access import IDENTITY, MESSAGING, first_handler, refusal_answer
from .forwarded import unsigned_peer

LONG = frozenset({MESSAGING + "Telemetry", MESSAGING + "ReceiveMessage", MESSAGING + "PullMessage",
                  data.PULL_RECORDS_PATH, data.PULL_RECORDS_STREAM_PATH, data.SEND_RECORDS_STREAM_PATH})


class StreamLimits:
    """The open long calls, counted per connection and per user."""

    def __init__(self, per_connection_max: int, per_user_max: int) -> None:
        self.per_connection_max = per_connection_max
        self.per_user_max = per_user_max
        self.by_peer: dict[str, int] = {}
        self.by_user: dict[str, int] = {}
        self.refused = 0

    def enter(self, peer: str, user: str | None) -> str | None:
        """None, the call counted (``leave`` it when it ends); else why it is refused."""
        n = self.by_peer.get(peer, 0)
        if n >= self.per_connection_max:
            self.refused += 1
            return (f"too many open streams and long polls on this connection ({n}; "
                    f"streams_per_connection_max={self.per_connection_max}): close some first")
        if user is not None:
            u = self.by_user.get(user, 0)
            if u >= self.per_user_max:
                self.refused += 1
                return (f"too many open streams and long polls of user {user!r} ({u}; "
                        f"streams_per_user_max={self.per_user_max}): close some first")
            self.by_user[user] = u + 1
        self.by_peer[peer] = n + 1
        return None

    def leave(self, peer: str, user: str | None) -> None:
        for table, key in ((self.by_peer, peer), (self.by_user, user)):
            if key is None:
                continue
            n = table.get(key, 0) - 1
            if n > 0:
                table[key] = n
            else:
                table.pop(key, None)

    def snapshot(self) -> dict:
        return {"connections": len(self.by_peer), "open": sum(self.by_peer.values()), "refused": self.refused}


def _who(context) -> tuple[str, str | None]:
    """(the client's connection, its user): the guard's identity (a forwarded call's client, checked);
    with authentication off, the call's peer, or the client's a follower says it forwards for."""
    who = IDENTITY.get()
    if who is not None:
        return who.peer, who.user
    return unsigned_peer(context.invocation_metadata()) or context.peer(), None


_MAKERS = {(False, False): grpc.unary_unary_rpc_method_handler, (False, True): grpc.unary_stream_rpc_method_handler,
           (True, False): grpc.stream_unary_rpc_method_handler, (True, True): grpc.stream_stream_rpc_method_handler}


def _bounded(method: str, handler, limits: StreamLimits):
    inner = handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    if inner is None:
        return handler

    def refused(text: str):
        return refusal_answer(method, Code.TOO_MANY_REQUESTS, text)

    if inspect.isasyncgenfunction(inner):
        async def call(request, context):
            peer, user = _who(context)
            why = limits.enter(peer, user)
            if why is not None:
                yield refused(why)
                return
            try:
                async for item in inner(request, context):
                    yield item
            finally:
                limits.leave(peer, user)
    else:
        streamed_out = handler.response_streaming

        async def call(request, context):
            peer, user = _who(context)
            why = limits.enter(peer, user)
            if why is not None:
                if streamed_out:
                    await context.write(refused(why))
                    return None
                return refused(why)
            try:
                return await inner(request, context)
            finally:
                limits.leave(peer, user)
    return _MAKERS[handler.request_streaming, handler.response_streaming](
        call, handler.request_deserializer, handler.response_serializer)


class Bounded(grpc.GenericRpcHandler):
    """``inner`` (generic handlers) with their long calls (``LONG``) bounded by ``limits``."""

    def __init__(self, inner: list, limits: StreamLimits) -> None:
        self.inner = inner
        self.limits = limits
        self._made: dict[str, tuple] = {}        # method -> (the handler, its bounded twin)

    def service(self, details):
        handler = first_handler(self.inner, details)
        if handler is None:
            return None
        method = details.method
        if method not in LONG:
            return handler
        made = self._made.get(method)
        if made is None or made[0] is not handler:
            made = self._made[method] = (handler, _bounded(method, handler, self.limits))
        return made[1]
