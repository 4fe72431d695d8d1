"""tidemq.testing.memory_transport: the replication transport in one process, on a SimLoop -- frames in
order with their latency, a cut link that loses what crosses it and never carries anything again
on that connection (a call across it waits for its timeout), a stopped member that reads nothing
until it runs, a killed one whose connections reset and calls are refused."""

import asyncio
import random

import pytest

from tidemq.broker.replication.transport import TransportError
from tidemq.io import ManualClock
from tidemq.testing.memory_transport import MemoryNetwork
from tidemq.testing.sim_loop import run


class Echo:
    """A server: echoes every request frame, answers epochs with its name."""

    def __init__(self, name):
        self.name = name

    async def epochs(self):
        return self.name.encode()

    async def state_frames(self, challenge=b""):
        yield b"s"

    async def serve_stream(self, requests, send):
        async for r in requests:
            await send(b"echo " + r)


class Peer:
    def __init__(self, name):
        self.name, self.endpoint, self.alive, self.paused = name, f"{name}:1", True, False
        self.server = Echo(name)
        self._resume = None

    async def gate(self):
        while self.paused:
            self._resume = self._resume or asyncio.Event()
            await self._resume.wait()

    def resume(self):
        self.paused = False
        if self._resume is not None:
            self._resume.set()
            self._resume = None


def net_of(**kw):
    net = MemoryNetwork(random.Random(1), latency_s=0.01, **kw)
    a, b = Peer("a"), Peer("b")
    net.add(a)
    net.add(b)
    return net, a, b


def test_frames_arrive_in_order_after_their_latency():
    net, a, b = net_of(jitter_s=0.05)

    async def main():
        loop = asyncio.get_running_loop()
        async with net.transport("a").connect("b:1") as ch:
            assert await ch.epochs(1.0) == b"b"
            s = ch.stream()
            t0 = loop.time()
            for i in range(20):
                await s.write(b"%d" % i)
            got = [await s.read() for _ in range(20)]
            assert got == [b"echo %d" % i for i in range(20)] and loop.time() - t0 >= 0.02
    run(main, ManualClock())


def test_a_cut_loses_silently_and_a_call_across_it_times_out():
    net, a, b = net_of()

    async def main():
        async with net.transport("a").connect("b:1") as ch:
            s = ch.stream()
            await s.write(b"1")
            assert await s.read() == b"echo 1"
            net.cut("a", "b")
            await s.write(b"2")
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(s.read(), 5.0)
            net.heal("a", "b")
            await s.write(b"3")
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(s.read(), 5.0)       # that connection carries nothing any more
            net.cut("a", "b")
            with pytest.raises(TransportError):
                await ch.epochs(2.0)
    run(main, ManualClock())


def test_a_stopped_member_reads_nothing_until_it_runs_and_a_killed_one_resets():
    net, a, b = net_of()

    async def main():
        async with net.transport("a").connect("b:1") as ch:
            s = ch.stream()
            b.paused = True
            await s.write(b"x")
            reading = asyncio.ensure_future(s.read())
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(reading), 3.0)
            b.resume()
            assert await reading == b"echo x"
            b.alive = False
            net.killed("b")
            with pytest.raises(TransportError):
                await s.read()
            with pytest.raises(TransportError):
                await ch.epochs(1.0)
    run(main, ManualClock())


def test_a_server_streams_send_takes_the_time_send_delay_says():
    net, _, _ = net_of()
    sizes = []

    def delay(size):
        sizes.append(size)
        return 0.5

    net.send_delay = delay

    async def main():
        loop = asyncio.get_running_loop()
        async with net.transport("a").connect("b:1") as ch:
            s = ch.stream()
            t0 = loop.time()
            await s.write(b"x")
            assert await s.read() == b"echo x"
            return loop.time() - t0

    took = run(main, ManualClock())      # (without it: 0.02, the way there and back)
    assert sizes == [len(b"echo x")], "asked once, with the frame's size"
    assert took >= 0.5 + 0.01, "the send's time, then the frame's way back"
