"""The transport seam between a follower (follower.py) and its leader (leader.py).

A follower reaches its leader through a ``Transport``: ``connect(endpoint)`` gives a
``ReplicationChannel`` (an async context manager) with the three calls of ``tidemq.Replication``
(protocol/replication.py): ``epochs()`` (bytes: the JSON answer), ``state()`` (the STATE frames,
as they come) and ``stream()`` (a ``ReplicationStream``: ``write`` a frame, ``read`` the next one,
None when the leader ended the stream; ``cancel``). Anything that breaks a call -- the leader
unreachable, gone, the call cancelled or timed out -- is a ``TransportError``.

The leader's side is transport-free: ``ReplicationServer.serve_stream(requests, send)``,
``epochs()``, ``state_frames()``; ``ReplicationServer.handler()`` binds them to gRPC.

``GrpcTransport`` is the real one: grpc.aio channels made with the member's credentials
(protection/members.py: TLS where the ports speak it, every call signed with the broker's keys); a
leader's refusal of them (wrong keys, not a super user, TLS) is said plainly in the error.
``tidemq.testing.memory_transport`` runs a group in one process, with the faults a test injects.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Protocol

import grpc

from ...protocol import replication as rp
from ..protection.members import MemberCredentials, refusal

CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 256 << 20), ("grpc.max_send_message_length", 64 << 20),
                   ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000)]


class TransportError(ConnectionError):
    """A call to the leader could not be made, or broke (the text says why)."""


class ReplicationStream(Protocol):
    async def write(self, frame: bytes) -> None: ...

    async def read(self) -> bytes | None: ...

    def cancel(self) -> None: ...


class ReplicationChannel(Protocol):
    async def __aenter__(self) -> "ReplicationChannel": ...

    async def __aexit__(self, *exc) -> None: ...

    async def epochs(self, timeout_s: float) -> bytes: ...

    def state(self, timeout_s: float, challenge: bytes = b"") -> AsyncIterator[bytes]: ...

    def stream(self) -> ReplicationStream: ...


class Transport(Protocol):
    def connect(self, endpoint: str) -> ReplicationChannel: ...


def _error(e: grpc.aio.AioRpcError) -> TransportError:
    why = refusal(e)                    # wrong keys, not a super user, TLS: said once, plainly
    return TransportError(f"the leader {why}" if why else f"{e.code().name}: {e.details() or ''}")


class GrpcStream:
    def __init__(self, call) -> None:
        self._call = call

    async def write(self, frame: bytes) -> None:
        try:
            await self._call.write(frame)
        except grpc.aio.AioRpcError as e:
            raise _error(e) from None
        except (asyncio.InvalidStateError, grpc.RpcError) as e:
            raise TransportError(f"the stream ended: {e}") from None

    async def read(self) -> bytes | None:
        try:
            raw = await self._call.read()
        except grpc.aio.AioRpcError as e:
            raise _error(e) from None
        except (asyncio.InvalidStateError, grpc.RpcError) as e:
            raise TransportError(f"the stream ended: {e}") from None
        return None if raw is grpc.aio.EOF else raw

    def cancel(self) -> None:
        self._call.cancel()


class GrpcChannel:
    def __init__(self, endpoint: str, creds: MemberCredentials) -> None:
        self.endpoint = endpoint
        self.creds = creds
        self._ch = creds.channel(endpoint, CHANNEL_OPTIONS)

    async def __aenter__(self) -> "GrpcChannel":
        return self

    async def __aexit__(self, *exc) -> None:
        await self._ch.close()

    async def epochs(self, timeout_s: float) -> bytes:
        try:
            return await self._ch.unary_unary(rp.EPOCHS_PATH)(b"", timeout=timeout_s, metadata=self.creds.metadata())
        except grpc.aio.AioRpcError as e:
            raise _error(e) from None

    async def state(self, timeout_s: float, challenge: bytes = b"") -> AsyncIterator[bytes]:
        call = self._ch.unary_stream(rp.STATE_PATH)(challenge, timeout=timeout_s, metadata=self.creds.metadata())
        try:
            async for raw in call:
                yield raw
        except grpc.aio.AioRpcError as e:
            raise _error(e) from None

    def stream(self) -> GrpcStream:
        return GrpcStream(self._ch.stream_stream(rp.STREAM_PATH)(metadata=self.creds.metadata()))


class GrpcTransport:
    def __init__(self, credentials=lambda: MemberCredentials.of(None)) -> None:
        """``credentials()``: the MemberCredentials calls are made with (asked at each connection)."""
        self.credentials = credentials

    def connect(self, endpoint: str) -> GrpcChannel:
        return GrpcChannel(endpoint, self.credentials())
