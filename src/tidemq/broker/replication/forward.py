"""The leader port: the group's write endpoint, served by every member (RocketMQ 5's proxy role).

The official clients are given every member's leader port and connect, through gRPC's
pick_first, to the first that answers; they never learn which member leads. So each member
serves its leader port all the time: while it leads, with its own services (the same as its
port); while it follows, by forwarding every call, bytes as they are, metadata (the client's id,
its signature) and status included, to the leader it follows, with the client's address signed by
this member (protection/forwarded.py: the leader judges the call by it); while no leader is known (an
election), with UNAVAILABLE, which the clients retry. A client whose member is killed connects to
the next one at once (that address never failed: no reconnect backoff to wait out), and a
client whose member changed role keeps its connection: a failover costs it the election, not a
reconnection. A fenced member (cut off from its coordinator: it cannot tell who leads) closes its
leader port (node.py), so that its clients move to another member's instead of being refused for
as long as the partition lasts; it never answers from its own services then.

A forwarded call gets at most ``leader_port_forward_timeout_ms`` (or the client's deadline, when
shorter): a leader that stopped answering (SIGSTOP, a hung process, a partition not yet noticed)
costs the client that much, then UNAVAILABLE, which the official clients retry, by then through
the member that leads next.

Every method of every service is forwarded, unary or streamed (``STREAMING`` names the streamed
ones of the RocketMQ service; the rest are unary). QueryRoute, when no leader answers it (an
election, a leader killed or stopped), is answered by the member itself (``_route``: the route is
the group's, the same from every member).
"""

from __future__ import annotations

import asyncio

import grpc

from ..protection.access import first_handler
from ..protection.forwarded import HEADERS as FORWARDED_HEADERS
from ..protection.forwarded import forwarded_headers
from ..protection.members import MemberCredentials

STREAMING = {
    "/apache.rocketmq.v2.MessagingService/Telemetry": "stream_stream",
    "/apache.rocketmq.v2.MessagingService/ReceiveMessage": "unary_stream",
    "/apache.rocketmq.v2.MessagingService/PullMessage": "unary_stream",
    "/tidemq.Replication/Stream": "stream_stream",
    "/tidemq.Replication/State": "unary_stream",
    "/tidemq.Data/SendRecordsStream": "stream_stream",
    "/tidemq.Data/PullRecordsStream": "unary_stream",
}
ROUTE = "/apache.rocketmq.v2.MessagingService/QueryRoute"
OPTIONS = [("grpc.max_receive_message_length", 256 << 20), ("grpc.max_send_message_length", 256 << 20),
           ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000)]
DROP = {"user-agent", "content-type", "te", "grpc-timeout", "grpc-accept-encoding", "grpc-encoding"}


def _metadata(context, secret_key: str | None = None):
    """The call's headers as the client sent them (a client's own forwarded-for headers dropped), and
    this member's word on whose call it is, signed (protection/forwarded.py: the leader judges the call
    by the client's address, not this member's)."""
    kept = tuple((k, v) for k, v in (context.invocation_metadata() or ())
                 if k not in DROP and not k.startswith(":") and k not in FORWARDED_HEADERS)
    return kept + forwarded_headers(secret_key, context.peer(), kept)


class LeaderPort(grpc.GenericRpcHandler):
    def __init__(self, node, local: list) -> None:
        """``local``: this broker's own handlers (served while it leads)."""
        self.node = node
        self.local = local
        self._channels: dict[str, grpc.aio.Channel] = {}
        self.forwarded = 0
        self.routes_answered = 0                # QueryRoutes a follower answered itself (no leader answered)

    def _metadata(self, context) -> tuple:
        keys = MemberCredentials.of(self.node).keys
        return _metadata(context, keys[1] if keys is not None else None)

    def _local(self, details):
        return first_handler(self.local, details)

    def service(self, details):
        node = self.node
        if node.leading and not node.fenced:
            return self._local(details)
        if details.method == ROUTE:
            local = self._local(details)
            if local is not None and local.unary_unary is not None:
                async def route(request, context):
                    return await self._route(request, context, local)
                return grpc.unary_unary_rpc_method_handler(route)
        kind = STREAMING.get(details.method, "unary_unary")
        fn = getattr(self, "_" + kind)
        method = details.method

        async def unary_unary(request, context):
            return await fn(method, request, context)

        async def streamed(request, context):
            async for r in fn(method, request, context):
                yield r
        return getattr(grpc, f"{kind}_rpc_method_handler")(unary_unary if kind == "unary_unary" else streamed)

    def _timeout(self, context) -> float:
        """The forwarded call's deadline: the client's, at most leader_port_forward_timeout_ms."""
        cap = self.node.config.leader_port_forward_timeout_ms / 1000
        left = context.time_remaining()
        return cap if left is None else min(cap, left)

    async def _abort_for(self, context, e: grpc.aio.AioRpcError, timeout_s: float) -> None:
        """The leader's error status as it is; our own cut deadline as UNAVAILABLE (retried)."""
        left = context.time_remaining()
        if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and (left is None or left > 0.05):
            await context.abort(grpc.StatusCode.UNAVAILABLE,
                                f"broker group {self.node.group!r}: the leader {self.node.leader_endpoint} did not "
                                f"answer within {timeout_s:g} s (leader_port_forward_timeout_ms); try again")
        await context.abort(e.code(), e.details() or "")

    async def _target(self, context) -> grpc.aio.Channel:
        ep = self.node.leader_endpoint
        if not ep or self.node.leading:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"broker group {self.node.group!r}: no leader is "
                                                             f"elected yet; try again")
        ch = self._channels.get(ep)
        if ch is None:
            for old in self._channels.values():
                await old.close()
            # TLS where the port speaks it (the call keeps its own signature: the leader checks the client)
            self._channels = {ep: (ch := MemberCredentials.of(self.node).channel(ep, OPTIONS))}
        self.forwarded += 1
        return ch

    @staticmethod
    async def _relay_status(context, call) -> None:
        context.set_trailing_metadata(tuple(await call.trailing_metadata() or ()))
        code = await call.code()
        if code != grpc.StatusCode.OK:
            await context.abort(code, await call.details() or "")

    async def _unary_unary(self, method, request, context):
        ch = await self._target(context)
        timeout_s = self._timeout(context)
        changed = getattr(self.node, "role_changed", None)
        call = ch.unary_unary(method)(request, metadata=self._metadata(context), timeout=timeout_s)
        try:
            if changed is None:
                resp = await call
            else:
                resp = await self._unless_changed(call, changed, context)
        except grpc.aio.AioRpcError as e:
            await self._abort_for(context, e, timeout_s)
        context.set_trailing_metadata(tuple(await call.trailing_metadata() or ()))
        return resp

    async def _route(self, request: bytes, context, local):
        """QueryRoute at a follower's leader port: the leader's answer (it may create the topic); while
        no leader answers it (an election under way, a leader killed or stopped), this member's own,
        which is the group's too (routes.py), instead of UNAVAILABLE: a reader given the leader ports
        learns the members it may read from when it needs them most."""
        node = self.node
        if node.leader_endpoint and not node.leading:
            ch = await self._target(context)
            timeout_s = self._timeout(context)
            left = context.time_remaining()
            if left is not None:
                timeout_s = min(timeout_s, left / 2)     # time left for the member's own answer
            call = ch.unary_unary(ROUTE)(request, metadata=self._metadata(context), timeout=timeout_s)
            answer = asyncio.ensure_future(self._unary_unary_answer(call))
            changed = getattr(node, "role_changed", None)
            moved = asyncio.ensure_future(changed.wait()) if changed is not None else None
            try:
                await asyncio.wait([f for f in (answer, moved) if f is not None], return_when=asyncio.FIRST_COMPLETED)
            finally:
                if moved is not None:
                    moved.cancel()
            if not answer.done():                 # this member follows another leader now: its own answer
                call.cancel()
                answer.cancel()
            else:
                try:
                    resp = answer.result()
                    context.set_trailing_metadata(tuple(await call.trailing_metadata() or ()))
                    return resp
                except grpc.aio.AioRpcError as e:
                    if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                        await context.abort(e.code(), e.details() or "")
        self.routes_answered += 1
        req = local.request_deserializer(request) if local.request_deserializer is not None else request
        resp = await local.unary_unary(req, context)
        return local.response_serializer(resp) if local.response_serializer is not None else resp

    async def _unary_unary_answer(self, call):
        return await call

    async def _unless_changed(self, call, changed: asyncio.Event, context):
        """The forwarded call's answer, or UNAVAILABLE as soon as this member follows another leader
        (or leads, or is fenced): a call to a leader that stopped answering is not waited for."""
        answer = asyncio.ensure_future(self._unary_unary_answer(call))
        moved = asyncio.ensure_future(changed.wait())
        try:
            await asyncio.wait((answer, moved), return_when=asyncio.FIRST_COMPLETED)
        finally:
            moved.cancel()
        if not answer.done():
            call.cancel()
            answer.cancel()
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"broker group {self.node.group!r}: the leader "
                                                             f"changed while the call was forwarded; try again")
        return answer.result()

    async def _unary_stream(self, method, request, context):
        async for r in self._streamed("unary_stream", method, request, context):
            yield r

    async def _stream_stream(self, method, requests, context):
        async for r in self._streamed("stream_stream", method, requests, context):
            yield r

    async def _streamed(self, kind: str, method, request, context):
        ch = await self._target(context)
        call = getattr(ch, kind)(method)(request, metadata=self._metadata(context), timeout=context.time_remaining())
        try:
            async for r in call:
                yield r
        except grpc.aio.AioRpcError as e:
            await context.abort(e.code(), e.details() or "")
        await self._relay_status(context, call)

    async def close(self) -> None:
        for ch in self._channels.values():
            await ch.close()
        self._channels = {}
