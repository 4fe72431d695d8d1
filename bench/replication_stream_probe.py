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

The broker's differences, one at a time (32.3 wave 7, second round: why its stream's operations cost
more CPU than this probe's): ``--broker-options`` (the broker's server options and the follower's
CHANNEL_OPTIONS instead of the probe's message limits), ``--optimization-target T`` (both sides),
``--asyncio`` (asyncio's loop in both processes, not uvloop), ``--gil-threads N`` (N threads in the
server doing pure-Python work 1 ms of every 2, as put threads hold the GIL), ``--rate F`` (the server
writes at most F frames a second, idle in between, as the leader writes when appends come, not back to
back), ``--yield-frames`` (the handler yields its frames instead of ``context.write``), ``--ack-bytes``,
``--tls`` (every port and channel over TLS, a self-signed certificate made with openssl for the run).
Every run prints the CPU of both processes per frame (us; /proc's schedstat, so ns-exact) over the
measured seconds (after a warm-up of 20 frames or 0.2 s); ``PROBE_THREADS=1`` adds the server's
threads' share and its context switches per frame. With ``--producer`` the server's CPU is the frames'
and the requests' together (a run at ``--rate 5`` gives the requests' alone).

``--own-loop``: the frames are served by a second grpc.aio server (its own port) on a thread of the
server process with its own event loop, the requests and the busy task by the first, on the main
thread's loop: what the replication stream would gain from a loop of its own in the leader.

    .venv/bin/python bench/replication_stream_probe.py                    # one lane, 4 s
    .venv/bin/python bench/replication_stream_probe.py --lanes 2
    .venv/bin/python bench/replication_stream_probe.py --producer --request-work-ms 0.7
    .venv/bin/python bench/replication_stream_probe.py --producer --request-work-ms 0.7 --own-loop
    .venv/bin/python bench/replication_stream_probe.py --rate 230 --broker-options     # as the leader writes
    PROBE_THREADS=1 .venv/bin/python bench/replication_stream_probe.py --rate 230 --frame-bytes 1024
    GRPC_EXPERIMENTS=-event_engine_client .venv/bin/python bench/replication_stream_probe.py --rate 230

A probe, not a benchmark (no reference): prints frames a second (and the producer's requests a
second); run the variants interleaved and say the load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import grpc
import uvloop

PROBE_OPTIONS = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]
# the broker's (server.py's _new_server with BrokerConfig's defaults) and the follower's (transport.py)
BROKER_SERVER_OPTIONS = [("grpc.max_receive_message_length", (4 << 20) + (512 << 10)),
                         ("grpc.max_send_message_length", (4 << 20) + (512 << 10)),
                         ("grpc.http2.lookahead_bytes", 4 << 20), ("grpc.so_reuseport", 0)]
BROKER_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 256 << 20), ("grpc.max_send_message_length", 64 << 20),
                          ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000)]
SERVER_OPTIONS = CHANNEL_OPTIONS = PROBE_OPTIONS      # set by main() in each process
TLS: tuple[bytes, bytes] | None = None                # (certificate, key) with --tls: set by main()


def make_tls(directory: str) -> tuple[bytes, bytes]:
    """A self-signed certificate for 127.0.0.1 (openssl), and its key."""
    cert, key = os.path.join(directory, "probe.crt"), os.path.join(directory, "probe.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    with open(cert, "rb") as c, open(key, "rb") as k:
        return c.read(), k.read()


def _port(server: grpc.aio.Server) -> int:
    if TLS is None:
        return server.add_insecure_port("127.0.0.1:0")
    return server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(TLS[1], TLS[0])]))


def _aio_channel(port: int) -> grpc.aio.Channel:
    if TLS is None:
        return grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS)
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(TLS[0]), options=CHANNEL_OPTIONS)
SERVICE = "probe.Stream"


def _busy(ms: float) -> None:
    t = time.perf_counter()
    while time.perf_counter() - t < ms / 1000:
        pass


TCK = os.sysconf("SC_CLK_TCK")


def thread_cpu_s(pid: int) -> dict[str, float]:
    """Thread name (and id) -> CPU seconds it ran so far (schedstat: ns), of the process ``pid``."""
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as fh:
                name = fh.read().strip()
            with open(f"/proc/{pid}/task/{t}/schedstat") as fh:
                out[f"{name}/{t}"] = int(fh.read().split()[0]) / 1e9
        except OSError:
            continue
    return out


def switches(pid: int) -> int:
    """Context switches (voluntary + not) of the process ``pid``'s threads so far."""
    n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/status") as fh:
                n += sum(int(line.split()[1]) for line in fh if "ctxt_switches" in line)
        except OSError:
            continue
    return n


def cpu_s(pid: int) -> float:
    """CPU seconds of the process ``pid``'s threads so far (the ``--gil-threads`` not counted)."""
    return sum(v for k, v in thread_cpu_s(pid).items() if not k.startswith("gil-thread/"))


def _gil_thread() -> None:
    import ctypes
    ctypes.CDLL(None).prctl(15, b"gil-thread", 0, 0, 0)          # PR_SET_NAME: not counted by cpu_s
    while True:
        t = time.perf_counter()
        x = 0
        while time.perf_counter() - t < 0.001:
            x += 1
        time.sleep(0.001)


async def serve(frame_bytes: int, loop_busy_ms: float, request_work_ms: float, own_loop: bool,
                rate: float = 0.0, yield_frames: bool = False) -> None:
    payload = os.urandom(frame_bytes)
    lanes: dict[int, tuple] = {}
    gap_s = 1.0 / rate if rate else 0.0

    async def yielded(request_iterator, context):
        it = request_iterator.__aiter__()
        await it.__anext__()

        async def acks() -> None:
            async for _ in it:
                pass
        reader = asyncio.ensure_future(acks())
        while not reader.done():
            if gap_s:
                await asyncio.sleep(gap_s)
            yield payload

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
                if gap_s:
                    await asyncio.sleep(gap_s)
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
        server = grpc.aio.server(options=SERVER_OPTIONS)
        if yield_frames and "Frames" in handlers:
            handlers = dict(handlers, Frames=yielded)
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {
            name: grpc.stream_stream_rpc_method_handler(h) for name, h in handlers.items()})])
        return server, _port(server)

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


async def follow(port: int, lanes: int, seconds: float, server_pid: int, ack: bytes) -> tuple[float, float, float]:
    """Frames a second, and the server's and this process's CPU per frame (us)."""
    async with _aio_channel(port) as ch:
        calls = [ch.stream_stream(f"/{SERVICE}/Frames")() for _ in range(lanes)]
        for i, c in enumerate(calls[1:], 1):
            await c.write(bytes([lanes, i]))
        await calls[0].write(bytes([lanes, 0]))
        warm = time.perf_counter() + 0.2
        for _ in range(20):                              # warm up (20 frames, 0.2 s at most)
            if time.perf_counter() > warm:
                break
            await calls[0].read()
            await calls[0].write(ack)
        got, k = 0, 0
        th0, sw0 = thread_cpu_s(server_pid), switches(server_pid)
        t0, s0, c0 = time.perf_counter(), cpu_s(server_pid), time.process_time()
        while time.perf_counter() - t0 < seconds:
            await calls[k % lanes].read()
            k += 1
            got += 1
            await calls[0].write(ack)
        s1, c1 = cpu_s(server_pid), time.process_time()
        if os.environ.get("PROBE_THREADS"):
            d = {k: (v - th0.get(k, 0.0)) * 1e6 / got for k, v in thread_cpu_s(server_pid).items()}
            print("  server threads, us per frame:", {k: round(v) for k, v in d.items() if v >= 5},
                  f"context switches per frame: {(switches(server_pid) - sw0) / got:.1f}")
        rate = got / (time.perf_counter() - t0)
        for c in calls:
            c.cancel()
        return rate, (s1 - s0) * 1e6 / got, (c1 - c0) * 1e6 / got


def produce(port: int, seconds: float) -> float:
    ch = (grpc.insecure_channel(f"127.0.0.1:{port}", options=PROBE_OPTIONS) if TLS is None else
          grpc.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(TLS[0]), options=PROBE_OPTIONS))
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
    global SERVER_OPTIONS, CHANNEL_OPTIONS, TLS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lanes", type=int, default=1)
    ap.add_argument("--frame-bytes", type=int, default=450 << 10)
    ap.add_argument("--ack-bytes", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--loop-busy-ms", type=float, default=0.0)
    ap.add_argument("--producer", action="store_true")
    ap.add_argument("--request-work-ms", type=float, default=0.0)
    ap.add_argument("--own-loop", action="store_true", help="the frames on a thread with its own loop")
    ap.add_argument("--switch-interval-us", type=int, default=500)
    ap.add_argument("--broker-options", action="store_true", help="the broker's server and channel options")
    ap.add_argument("--optimization-target", choices=("latency", "blend", "throughput"))
    ap.add_argument("--asyncio", action="store_true", help="asyncio's loop, not uvloop, in both")
    ap.add_argument("--gil-threads", type=int, default=0, help="server threads of pure-Python work, 1 ms of 2")
    ap.add_argument("--rate", type=float, default=0.0, help="frames a second at most (0: back to back)")
    ap.add_argument("--yield-frames", action="store_true", help="the handler yields frames (one lane)")
    ap.add_argument("--server-option", action="append", default=[], metavar="K=V", help="a server option (int)")
    ap.add_argument("--channel-option", action="append", default=[], metavar="K=V", help="a channel option (int)")
    ap.add_argument("--tls", action="store_true", help="TLS on the ports and channels (a self-signed certificate)")
    ap.add_argument("--tls-dir", help=argparse.SUPPRESS)
    ap.add_argument("--role", choices=("server", "producer"), help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    a, _ = ap.parse_known_args()
    flags = " ".join(sys.argv[1:]) or "bare"
    if a.broker_options:
        SERVER_OPTIONS, CHANNEL_OPTIONS = BROKER_SERVER_OPTIONS, BROKER_CHANNEL_OPTIONS
    if a.optimization_target:
        SERVER_OPTIONS = SERVER_OPTIONS + [("grpc.optimization_target", a.optimization_target)]
        CHANNEL_OPTIONS = CHANNEL_OPTIONS + [("grpc.optimization_target", a.optimization_target)]
    SERVER_OPTIONS = SERVER_OPTIONS + [(k, int(v)) for k, v in (o.split("=") for o in a.server_option)]
    CHANNEL_OPTIONS = CHANNEL_OPTIONS + [(k, int(v)) for k, v in (o.split("=") for o in a.channel_option)]
    if a.tls:
        if a.tls_dir is None:
            a.tls_dir = tempfile.mkdtemp(prefix="probe-tls-")
            sys.argv += ["--tls-dir", a.tls_dir]
            make_tls(a.tls_dir)
        with open(os.path.join(a.tls_dir, "probe.crt"), "rb") as c, open(os.path.join(a.tls_dir, "probe.key"), "rb") as k:
            TLS = (c.read(), k.read())
    run = asyncio.run if a.asyncio else uvloop.run
    if a.role == "server":
        sys.setswitchinterval(a.switch_interval_us / 1e6)
        for _ in range(a.gil_threads):
            threading.Thread(target=_gil_thread, daemon=True).start()
        run(serve(a.frame_bytes, a.loop_busy_ms, a.request_work_ms, a.own_loop, a.rate, a.yield_frames))
        return
    if a.role == "producer":
        print(f"{produce(a.port, a.seconds):.0f}", flush=True)
        return
    me = [sys.executable, os.path.abspath(__file__)]
    server = subprocess.Popen(me + sys.argv[1:] + ["--role", "server"], stdout=subprocess.PIPE, text=True)
    producer = None
    try:
        port, frames_port = map(int, server.stdout.readline().split())
        if a.producer:
            producer = subprocess.Popen(me + ["--role", "producer", "--port", str(port), "--seconds", str(a.seconds + 1)]
                                        + (["--tls", "--tls-dir", a.tls_dir] if a.tls else []),
                                        stdout=subprocess.PIPE, text=True)
            time.sleep(0.5)
        rate, server_us, client_us = run(follow(frames_port, a.lanes, a.seconds, server.pid, b"a" * a.ack_bytes))
        line = (f"[{flags}] frames of {a.frame_bytes} bytes: {rate:,.0f} frames/s, CPU per frame: server "
                f"{server_us:.0f} us, client {client_us:.0f} us")
        if producer is not None:
            line += f"; producer {producer.stdout.readline().strip()} requests/s"
        print(f"{line} (load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        for p in (producer, server):
            if p is not None:
                p.kill()
                p.wait()
        if a.tls:
            shutil.rmtree(a.tls_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
