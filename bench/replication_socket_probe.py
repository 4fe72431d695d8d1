"""What the replication stream's operations would cost on a plain TCP connection read and written by
the event loops themselves (uvloop's streams, no gRPC): the same shape as
bench/replication_stream_probe.py, to say what a transport other than grpc.aio could give (bench/README.md,
32.3 wave 8).

A server process (uvloop) writes ``--frame-bytes`` frames (a 40-byte header and the payload, one
``StreamWriter.write`` each, as ``rp.encode`` makes them) to a client process, back to back or at most
``--rate`` a second (idle in between: as the leader writes when appends come); the client reads each
whole frame and answers it with a small ACK (``--ack-bytes``), which the server reads on the same
loop. ``--tls``: both ends over TLS (a self-signed certificate made with openssl for the run), as the
members' channels are. Prints frames a second and each process's CPU per frame (us, all threads: user +
system from /proc's schedstat) over the measured seconds, after a warm-up of 20 frames.

    .venv/bin/python bench/replication_socket_probe.py                       # back to back, 450 KiB
    .venv/bin/python bench/replication_socket_probe.py --rate 230            # one at a time, as the leader
    .venv/bin/python bench/replication_socket_probe.py --rate 230 --frame-bytes 1024
    .venv/bin/python bench/replication_socket_probe.py --rate 230 --tls

A probe, not a benchmark (no reference): run it interleaved with replication_stream_probe.py's
variants and say the load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import subprocess
import sys
import tempfile
import time

import uvloop

HEADER = 40


def cpu_s() -> float:
    """This process's CPU seconds, all threads (schedstat: ns)."""
    total = 0
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total / 1e9


async def server(a, port_out) -> None:
    ctx = None
    if a.tls:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(a.cert, a.key)
    done = asyncio.get_running_loop().create_future()
    payload = os.urandom(a.frame_bytes)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        acks = 0
        sent = 0
        marks: dict = {}
        acked = asyncio.Event()

        async def read_acks() -> None:
            nonlocal acks
            while True:
                await reader.readexactly(a.ack_bytes)
                acks += 1
                acked.set()
                if acks == 20:
                    marks["t0"], marks["c0"] = time.monotonic(), cpu_s()

        reading = asyncio.create_task(read_acks())
        gap = 1 / a.rate if a.rate else 0.0
        start = time.monotonic()
        while "t0" not in marks or time.monotonic() - marks["t0"] < a.seconds:
            header = (a.frame_bytes).to_bytes(4, "little") + bytes(HEADER - 4)
            writer.write(header + payload)         # (one buffer: rp.encode's bytes)
            await writer.drain()
            sent += 1
            if gap:
                await asyncio.sleep(max(0.0, start + sent * gap - time.monotonic()))
            else:
                while sent - acks > 2:             # at most a few frames ahead of the ACKs
                    acked.clear()
                    await acked.wait()
        t1, c1, n = time.monotonic(), cpu_s(), acks - 20
        reading.cancel()
        writer.close()
        done.set_result((n / (t1 - marks["t0"]), (c1 - marks["c0"]) / max(n, 1) * 1e6))

    srv = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=ctx)
    port_out.write(f"{srv.sockets[0].getsockname()[1]}\n")
    port_out.flush()
    rate, us = await done
    srv.close()
    print(f"server: {rate:,.0f} frames/s, {us:,.0f} us of CPU a frame")


class _Frames(asyncio.BufferedProtocol):
    """The client's reading: whole frames assembled in one preallocated buffer (recv_into), each
    answered by an ACK written from the callback that completes it (no task, no copy but the kernel's)."""

    def __init__(self, a, done: asyncio.Future) -> None:
        self.buf = bytearray(HEADER + a.frame_bytes + 65536)
        self.view = memoryview(self.buf)
        self.have = 0
        self.ack = bytes(a.ack_bytes)
        self.n, self.t0, self.c0 = 0, 0.0, 0.0
        self.done = done

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int):
        return self.view[self.have:]

    def buffer_updated(self, nbytes: int) -> None:
        self.have += nbytes
        while self.have >= HEADER:
            need = HEADER + int.from_bytes(self.buf[:4], "little")
            if self.have < need:
                return
            self.transport.write(self.ack)
            self.n += 1
            if self.n == 20:
                self.t0, self.c0 = time.monotonic(), cpu_s()
            rest = self.have - need
            if rest:
                self.buf[:rest] = self.buf[need:self.have]
            self.have = rest

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def client(a, port: int) -> None:
    ctx = None
    if a.tls:
        ctx = ssl.create_default_context(cafile=a.cert)
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    _, proto = await loop.create_connection(lambda: _Frames(a, done), "127.0.0.1", port, ssl=ctx)
    await done
    t1, c1 = time.monotonic(), cpu_s()
    m = proto.n - 20
    print(f"client: {m / (t1 - proto.t0):,.0f} frames/s, {(c1 - proto.c0) / max(m, 1) * 1e6:,.0f} us of CPU a frame "
          f"(read + ACK)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frame-bytes", type=int, default=450 << 10)
    ap.add_argument("--ack-bytes", type=int, default=40)
    ap.add_argument("--rate", type=float, default=0.0, help="frames a second at most (0: back to back)")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--role", choices=("server", "client"), default=None)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--cert", default="")
    ap.add_argument("--key", default="")
    a = ap.parse_args()
    if a.role == "server":
        uvloop.run(server(a, sys.stdout))
        return
    if a.role == "client":
        uvloop.run(client(a, a.port))
        return
    with tempfile.TemporaryDirectory() as tmp:
        extra = []
        if a.tls:
            cert, key = os.path.join(tmp, "probe.crt"), os.path.join(tmp, "probe.key")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                            "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out",
                            cert], check=True, capture_output=True)
            extra = ["--tls", "--cert", cert, "--key", key]
        common = [sys.executable, __file__, "--frame-bytes", str(a.frame_bytes), "--ack-bytes", str(a.ack_bytes),
                  "--rate", str(a.rate), "--seconds", str(a.seconds), *extra]
        srv = subprocess.Popen([*common, "--role", "server"], stdout=subprocess.PIPE, text=True)
        port = int(srv.stdout.readline())
        cli = subprocess.Popen([*common, "--role", "client", "--port", str(port)])
        print(srv.stdout.read().strip())
        srv.wait()
        cli.wait()


if __name__ == "__main__":
    main()
