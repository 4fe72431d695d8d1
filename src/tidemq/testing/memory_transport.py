"""The replication transport seam (tidemq/broker/replication/transport.py) in one process, with the
faults of a network: for the group simulation (tests/sim/group_sim.py) on a SimLoop.

    net = MemoryNetwork(rng, latency_s=0.001, jitter_s=0.005, reset_rate=0.001)
    net.add(peer)                      # a member: .name, .endpoint, .alive, .server, async .gate()
    transport = net.transport("m1")    # what m1's ReplicationNode connects through
    net.cut("m0", "m1"); net.heal("m0", "m1")
    net.killed("m0")                   # m0's process died: its connections reset, its streams end

Each frame takes ``latency_s`` plus up to ``jitter_s`` (seeded), in order per direction. A link cut
(``cut``) drops what crosses it silently and the connection never carries anything again (as a
TCP connection across a partition: each side finds out by its own timeouts); a call across it
waits for its timeout. A connection resets (``reset_rate`` per frame: both sides see it break)
as a dropped TCP connection does. A member that does not run (``gate``: paused, SIGSTOP) neither
sends nor reads: frames wait for it. A killed member's connections reset at once and a call to
it is refused; its server's streams are cancelled. ``send_delay`` (None: none) is how long a
server stream's send of a frame takes (called with its size; seconds): gRPC's write awaits the
loop and the connection's flow-control window, so a stream may be busy with one frame while the log
moves on.
"""

from __future__ import annotations

import asyncio
import random
from typing import AsyncIterator

from ..broker.replication.transport import TransportError

_EOF = object()
_RESET = object()


class _Conn:
    def __init__(self, net: "MemoryNetwork", src: str, dst: str) -> None:
        self.net = net
        self.src, self.dst = src, dst
        self.up: asyncio.Queue = asyncio.Queue()        # client -> server
        self.down: asyncio.Queue = asyncio.Queue()      # server -> client
        self.dead = False           # crossed a cut: nothing is carried any more
        self.reset = False          # broken: both sides know
        self.last_at = {"up": 0.0, "down": 0.0}
        self.task: asyncio.Task | None = None


class MemoryNetwork:
    def __init__(self, rng: random.Random, latency_s: float = 0.001, jitter_s: float = 0.0,
                 reset_rate: float = 0.0) -> None:
        self.rng = rng
        self.latency_s = latency_s
        self.jitter_s = jitter_s
        self.reset_rate = reset_rate
        self.send_delay = None                      # (frame size) -> seconds a server stream's send takes
        self.peers: dict[str, object] = {}          # endpoint -> peer
        self._cut: set[frozenset] = set()
        self.conns: list[_Conn] = []
        self.frames = 0
        self.resets = 0

    def add(self, peer) -> None:
        self.peers[peer.endpoint] = peer

    def transport(self, src: str) -> "MemoryTransport":
        return MemoryTransport(self, src)

    def _peer(self, name: str):
        for p in self.peers.values():
            if p.name == name:
                return p
        return None

    # links --------------------------------------------------------------------------------------
    def cut(self, a: str, b: str) -> None:
        self._cut.add(frozenset((a, b)))

    def heal(self, a: str, b: str) -> None:
        self._cut.discard(frozenset((a, b)))

    def heal_all(self) -> None:
        self._cut.clear()

    def reset(self, a: str, b: str) -> None:
        """The connections between ``a`` and ``b`` break now (a TCP reset: both sides see it)."""
        for c in list(self.conns):
            if {c.src, c.dst} == {a, b} and not c.reset:
                c.reset = True
                c.down.put_nowait(_RESET)
                c.up.put_nowait(_RESET)
                if c.task is not None:
                    c.task.cancel()

    def linked(self, a: str, b: str) -> bool:
        return frozenset((a, b)) not in self._cut

    def killed(self, name: str) -> None:
        """``name``'s process died: its connections break (the other side sees a reset where the link
        carries it), its server's streams stop."""
        for c in list(self.conns):
            if name not in (c.src, c.dst) or c.reset:
                continue
            c.reset = True
            if not c.dead and self.linked(c.src, c.dst):
                c.down.put_nowait(_RESET)
                c.up.put_nowait(_RESET)
            if c.dst == name and c.task is not None:
                c.task.cancel()
        self.conns = [c for c in self.conns if not c.reset]

    # frames -------------------------------------------------------------------------------------
    def _send(self, c: _Conn, way: str, item) -> None:
        if c.reset:
            raise TransportError("connection reset")
        if c.dead or not self.linked(c.src, c.dst):
            c.dead = True                               # silently lost, and every frame after it
            return
        if item is not _EOF and self.reset_rate and self.rng.random() < self.reset_rate:
            self.resets += 1
            c.reset = True
            c.down.put_nowait(_RESET)
            c.up.put_nowait(_RESET)
            if c.task is not None:
                c.task.cancel()
            raise TransportError("connection reset")
        loop = asyncio.get_running_loop()
        at = max(c.last_at[way] + 1e-6, loop.time() + self.latency_s + self.jitter_s * self.rng.random())
        c.last_at[way] = at
        q = c.up if way == "up" else c.down
        self.frames += 1
        loop.call_at(at, self._arrive, c, q, item)

    def _arrive(self, c: _Conn, q: asyncio.Queue, item) -> None:
        if c.reset or c.dead:
            return
        if not self.linked(c.src, c.dst):
            c.dead = True
            return
        q.put_nowait(item)


class MemoryStream:
    def __init__(self, net: MemoryNetwork, c: _Conn, src_peer, dst_peer) -> None:
        self.net, self.c, self.src, self.dst = net, c, src_peer, dst_peer

    async def write(self, frame: bytes) -> None:
        await self.src.gate()
        self.net._send(self.c, "up", frame)

    async def read(self) -> bytes | None:
        item = await self.c.down.get()
        await self.src.gate()                          # a stopped member reads nothing
        if item is _RESET:
            raise TransportError("connection reset")
        if item is _EOF:
            return None
        return item

    def cancel(self) -> None:
        c = self.c
        if not c.reset:
            try:
                self.net._send(c, "up", _EOF)          # the server's request stream ends (where it arrives)
            except TransportError:
                pass
        c.reset = True


class MemoryChannel:
    def __init__(self, net: MemoryNetwork, src: str, endpoint: str) -> None:
        self.net = net
        self.src = src
        self.endpoint = endpoint

    async def __aenter__(self) -> "MemoryChannel":
        return self

    async def __aexit__(self, *exc) -> None:
        pass

    def _dst(self):
        dst = self.net.peers.get(self.endpoint)
        return dst

    async def _call(self, fn, timeout_s: float):
        """A unary call: there and back over the link, or TransportError (refused, timed out)."""
        src = self.net._peer(self.src)
        await src.gate()
        dst = self._dst()

        async def go():
            await asyncio.sleep(self.net.latency_s)
            if not self.net.linked(self.src, dst.name if dst else ""):
                await asyncio.Event().wait()            # lost: the caller's timeout ends it
            if dst is None or not dst.alive:
                raise TransportError(f"{self.endpoint}: connection refused")
            await dst.gate()
            if not dst.alive:
                raise TransportError(f"{self.endpoint}: connection reset")
            try:
                result = await fn(dst)
            except Exception as e:  # noqa: BLE001 - the server's failure is the caller's failed call (gRPC's INTERNAL)
                raise TransportError(f"{self.endpoint}: the call failed: {e!r}") from None
            await asyncio.sleep(self.net.latency_s)
            if not self.net.linked(self.src, dst.name) or not dst.alive:
                await asyncio.Event().wait()
            return result
        try:
            return await asyncio.wait_for(go(), timeout_s)
        except asyncio.TimeoutError:
            raise TransportError(f"{self.endpoint}: no answer within {timeout_s:g} s") from None

    async def epochs(self, timeout_s: float) -> bytes:
        return await self._call(lambda dst: dst.server.epochs(), timeout_s)

    async def state(self, timeout_s: float, challenge: bytes = b"") -> AsyncIterator[bytes]:
        async def frames(dst):
            return [fr async for fr in dst.server.state_frames(challenge)]
        for fr in await self._call(frames, timeout_s):
            yield fr

    def stream(self) -> MemoryStream:
        net = self.net
        src, dst = net._peer(self.src), self._dst()
        c = _Conn(net, self.src, dst.name if dst is not None else "?")
        net.conns.append(c)
        if dst is None or not dst.alive:
            c.reset = True
            c.down.put_nowait(_RESET)
            return MemoryStream(net, c, src, dst)
        if not net.linked(self.src, dst.name):
            c.dead = True

        async def requests():
            while True:
                item = await c.up.get()
                await dst.gate()
                if item is _EOF or item is _RESET:
                    return
                yield item

        async def send(frame: bytes) -> None:
            await dst.gate()
            d = net.send_delay(len(frame)) if net.send_delay is not None else 0.0
            if d:
                await asyncio.sleep(d)              # the write awaits its turn (the loop, the window)
                await dst.gate()
            net._send(c, "down", frame)

        async def serve():
            try:
                await dst.server.serve_stream(requests(), send)
                if not c.reset:
                    net._send(c, "down", _EOF)
            except TransportError:
                pass
            except Exception:  # noqa: BLE001 - the server failed (its store stopped): the stream breaks
                if not c.reset and not c.dead and net.linked(c.src, c.dst):
                    c.down.put_nowait(_RESET)
                c.reset = True
        c.task = asyncio.get_running_loop().create_task(serve())
        return MemoryStream(net, c, src, dst)


class MemoryTransport:
    def __init__(self, net: MemoryNetwork, src: str) -> None:
        self.net = net
        self.src = src

    def connect(self, endpoint: str) -> MemoryChannel:
        return MemoryChannel(self.net, self.src, endpoint)
