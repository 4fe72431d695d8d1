"""How many frames a second one grpc.aio stream moves between two processes, without tidemq: the
shape of the replication stream (bench/README.md, 32.3) with nothing else in the way.

A server process (grpc.aio on uvloop, as the broker) streams ``--frame-bytes`` messages to a client
process over ``--lanes`` bidi streams (frames dealt to them in turn, at most one write under way on
each: gRPC's rule), and the client answers each frame with a 3-byte ACK on the first stream, as a
follower does. Optional disturbances of the server, as the leader has them:

* ``--loop-busy-ms B``: a task holds the server's loop B ms of every B + 2 ms (appends);
* ``--producer``: a third process sends 256 KiB requests on one stream, 4 in flight, from a sync
  gRPC client (as tidemq.client's FrameStream), answered by the server after ``--request-work-ms``
  of work on its loop each.

``--switch-interval-us``: the server's ``sys.setswitchinterval`` (the broker's thread_switch_interval_us:
500; Python's own: 5000).

``--own-loop``: the frames are served by a second grpc.aio server (its own port) on a thread of the
server process with its own event loop, the requests and the busy task by the first, on the main
thread's loop: what the replication stream would gain from a loop of its own in the leader.

    .venv/bin/python bench/replication_stream_probe.py                    # one lane, 4 s
    .venv/bin/python bench/replication_stream_probe.py --lanes 2
    .venv/bin/python bench/replication_stream_probe.py --producer --request-work-ms 0.7
    .venv/bin/python bench/replication_stream_probe.py --producer --request-work-ms 0.7 --own-loop

A probe, not a benchmark (no reference): prints frames a second (and the producer's requests a
second); run the variants interleaved and say the load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import threading
import time

import grpc
import uvloop

OPTIONS = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]
SERVICE = "probe.Stream"


def _busy(ms: float) -> None:
    t = time.perf_counter()
    while time.perf_counter() - t < ms / 1000:
        pass


async def serve(frame_bytes: int, loop_busy_ms: float, request_work_ms: float, own_loop: bool) -> None:
    payload = os.urandom(frame_bytes)
    lanes: dict[int, tuple] = {}

    async def frames(request_iterator, context) -> None:
        it = request_iterator.__aiter__()
        hello = await it.__anext__()
        n, i = hello[0], hello[1]
        if i > 0:                                      # a further lane: lane 0's sender writes on it
            done = asyncio.Event()
            lanes[i] = (context.write, done)
            await done.wait()
            return
        while len(lanes) < n - 1:
            await asyncio.sleep(0.001)
        writes = [context.write] + [lanes[k][0] for k in range(1, n)]
        under_way: list = [None] * n

        async def acks() -> None:
            async for _ in it:
                pass
        reader = asyncio.ensure_future(acks())
        k = 0
        try:
            while not reader.done():
                j = k % n
                if under_way[j] is not None:
                    await under_way[j]
                under_way[j] = asyncio.ensure_future(writes[j](payload))
                k += 1
        finally:
            for lane in range(1, n):
                lanes[lane][1].set()

    async def requests(request_iterator, context) -> None:
        async for _ in request_iterator:
            _busy(request_work_ms)
            await context.write(b"ok" * 100)

    async def busy() -> None:
        while True:
            _busy(loop_busy_ms)
            await asyncio.sleep(0.002)

    def started(handlers: dict) -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server(options=OPTIONS)
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {
            name: grpc.stream_stream_rpc_method_handler(h) for name, h in handlers.items()})])
        return server, server.add_insecure_port("127.0.0.1:0")

    if loop_busy_ms:
        asyncio.ensure_future(busy())
    if not own_loop:
        server, port = started({"Frames": frames, "Requests": requests})
        await server.start()
        print(port, port, flush=True)
        await server.wait_for_termination()
        return
    frames_port: list[int] = []
    ready = threading.Event()

    def own() -> None:
        async def run() -> None:
            server, port = started({"Frames": frames})
            await server.start()
            frames_port.append(port)
            ready.set()
            await server.wait_for_termination()
        uvloop.run(run())
    threading.Thread(target=own, daemon=True).start()
    ready.wait()
    server, port = started({"Requests": requests})
    await server.start()
    print(port, frames_port[0], flush=True)
    await server.wait_for_termination()


async def follow(port: int, lanes: int, seconds: float) -> float:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=OPTIONS) as ch:
        calls = [ch.stream_stream(f"/{SERVICE}/Frames")() for _ in range(lanes)]
        for i, c in enumerate(calls[1:], 1):
            await c.write(bytes([lanes, i]))
        await calls[0].write(bytes([lanes, 0]))
        got, k = 0, 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            await calls[k % lanes].read()
            k += 1
            got += 1
            await calls[0].write(b"ack")
        rate = got / (time.perf_counter() - t0)
        for c in calls:
            c.cancel()
        return rate


def produce(port: int, seconds: float) -> float:
    ch = grpc.insecure_channel(f"127.0.0.1:{port}", options=OPTIONS)
    room = threading.Semaphore(4)
    body = os.urandom(256 << 10)
    stop = time.perf_counter() + seconds

    def bodies():
        while time.perf_counter() < stop:
            room.acquire()
            yield body
    n = 0
    t0 = time.perf_counter()
    for _ in ch.stream_stream(f"/{SERVICE}/Requests")(bodies()):
        room.release()
        n += 1
    ch.close()
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lanes", type=int, default=1)
    ap.add_argument("--frame-bytes", type=int, default=450 << 10)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--loop-busy-ms", type=float, default=0.0)
    ap.add_argument("--producer", action="store_true")
    ap.add_argument("--request-work-ms", type=float, default=0.0)
    ap.add_argument("--own-loop", action="store_true", help="the frames on a thread with its own loop")
    ap.add_argument("--switch-interval-us", type=int, default=500)
    ap.add_argument("--role", choices=("server", "producer"), help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.role == "server":
        sys.setswitchinterval(a.switch_interval_us / 1e6)
        uvloop.run(serve(a.frame_bytes, a.loop_busy_ms, a.request_work_ms, a.own_loop))
        return
    if a.role == "producer":
        print(f"{produce(a.port, a.seconds):.0f}", flush=True)
        return
    me = [sys.executable, os.path.abspath(__file__)]
    server = subprocess.Popen(me + ["--role", "server", "--frame-bytes", str(a.frame_bytes), "--loop-busy-ms",
                                    str(a.loop_busy_ms), "--request-work-ms", str(a.request_work_ms)]
                              + (["--own-loop"] if a.own_loop else [])
                              + ["--switch-interval-us", str(a.switch_interval_us)],
                              stdout=subprocess.PIPE, text=True)
    producer = None
    try:
        port, frames_port = map(int, server.stdout.readline().split())
        if a.producer:
            producer = subprocess.Popen(me + ["--role", "producer", "--port", str(port), "--seconds",
                                              str(a.seconds + 1)], stdout=subprocess.PIPE, text=True)
            time.sleep(0.5)
        rate = uvloop.run(follow(frames_port, a.lanes, a.seconds))
        line = (f"lanes {a.lanes}{', own loop' if a.own_loop else ''}, frames of {a.frame_bytes} bytes: "
                f"{rate:,.0f} frames/s")
        if producer is not None:
            line += f"; producer {producer.stdout.readline().strip()} requests/s"
        print(f"{line} (load {os.getloadavg()[0]:.1f})")
    finally:
        for p in (producer, server):
            if p is not None:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
