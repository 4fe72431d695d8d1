"""The official RocketMQ 5 Python client (rocketmq-python-client) against a server in a subprocess:
the do-nothing server of the same protocol (``serve_null``, the reference of official_client.py),
the client process (``client_run``: synchronous sends one at a time, or ``send_async`` with
``in_flight`` sends unanswered), ``start_server`` (tidemq serve with settings from the environment,
or the do-nothing server) and ``measure`` (one sample: a server, ``clients`` client processes at
once, the server's CPU). Used by official_client.py and broker_sync_flush.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Callable

TOPIC = "Bench"
WARMUP = 50
NULL_READY = "null server ready on "
NULL_UVLOOP = "null server on uvloop"
HERE = os.path.dirname(os.path.abspath(__file__))


# The do-nothing server ------------------------------------------------------------------------
def serve_null(port: int, loop: str = "asyncio") -> None:
    """A MessagingService that answers what the official producer needs and stores nothing, on
    asyncio's default event loop or (``loop="uvloop"``) on uvloop's."""
    import asyncio
    import signal

    import grpc
    from google.protobuf import duration_pb2
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as spb
    from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc

    OK = pb.Status(code=pb.Code.OK, message="OK")

    class Null(sgrpc.MessagingServiceServicer):
        def __init__(self) -> None:
            self.offset = 0

        async def QueryRoute(self, request, context):
            broker = pb.Broker(name="null", id=0, endpoints=request.endpoints)
            q = pb.MessageQueue(topic=request.topic, id=0, permission=pb.Permission.READ_WRITE, broker=broker,
                                accept_message_types=[pb.MessageType.NORMAL, pb.MessageType.FIFO])
            return spb.QueryRouteResponse(status=OK, message_queues=[q])

        async def Heartbeat(self, request, context):
            return spb.HeartbeatResponse(status=OK)

        async def NotifyClientTermination(self, request, context):
            return spb.NotifyClientTerminationResponse(status=OK)

        async def Telemetry(self, request_iterator, context):
            async for cmd in request_iterator:
                if cmd.HasField("settings"):
                    s = pb.Settings()
                    s.CopyFrom(cmd.settings)
                    s.metric.CopyFrom(pb.Metric(on=False))
                    s.backoff_policy.CopyFrom(pb.RetryPolicy(max_attempts=3, exponential_backoff=pb.ExponentialBackoff(
                        initial=duration_pb2.Duration(nanos=10_000_000), max=duration_pb2.Duration(seconds=1),
                        multiplier=2.0)))
                    s.publishing.max_body_size = 4 << 20
                    s.publishing.validate_message_type = True
                    yield spb.TelemetryCommand(status=OK, settings=s)

        async def SendMessage(self, request, context):
            entries = []
            for m in request.messages:
                entries.append(spb.SendResultEntry(status=OK, message_id=m.system_properties.message_id,
                                                   offset=self.offset))
                self.offset += 1
            return spb.SendMessageResponse(status=OK, entries=entries)

    async def main() -> None:
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", (4 << 20) + (512 << 10))])
        sgrpc.add_MessagingServiceServicer_to_server(Null(), server)
        bound = server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print(f"{NULL_READY}127.0.0.1:{bound}", flush=True)
        await stop.wait()
        await server.stop(1.0)

    if loop == "uvloop":
        import uvloop
        uvloop.run(main())
    else:
        asyncio.run(main())


# The client process ---------------------------------------------------------------------------
def client_run(endpoint: str, count: int, max_s: float, body_bytes: int, in_flight: int = 1,
               gate: "Callable[[], None] | None" = None, done: "Callable[[dict], None] | None" = None) -> dict:
    """One client process: ``Producer.send`` one at a time (``in_flight`` 1), or ``send_async`` with at most
    ``in_flight`` sends unanswered; every answer checked (a failed send raises), every message id distinct.
    ``gate()`` runs between the warm-up and the timed sends, ``done(result)`` after them, before the
    producer shuts down (bench/multicore.py: the broker's CPU read around the timed sends only)."""
    import concurrent.futures

    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    body = os.urandom(body_bytes)

    def msg() -> "Message":
        m = Message()
        m.topic = TOPIC
        m.body = body
        return m

    p = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=30), (TOPIC,))
    p.startup()
    try:
        t_end = time.monotonic() + 30
        while True:              # the first sends may race the settings reply: retry the warm-up a little
            try:
                for _ in range(WARMUP):
                    p.send(msg())
                break
            except Exception:
                if time.monotonic() > t_end:
                    raise
                time.sleep(0.2)
        if gate is not None:
            gate()
        sent = 0
        ids = set()
        t0 = time.perf_counter()
        end = t0 + max_s
        if in_flight <= 1:
            while sent < count and time.perf_counter() < end:
                r = p.send(msg())
                ids.add(r.message_id)
                sent += 1
        else:
            pending: set = set()
            while sent < count and time.perf_counter() < end:
                while len(pending) >= in_flight:
                    answered, pending = concurrent.futures.wait(pending,
                                                                return_when=concurrent.futures.FIRST_COMPLETED)
                    ids.update(f.result().message_id for f in answered)
                pending.add(p.send_async(msg()))
                sent += 1
            ids.update(f.result().message_id for f in concurrent.futures.as_completed(pending))
        dt = time.perf_counter() - t0
        if len(ids) != sent:
            raise RuntimeError(f"{len(ids)} distinct message ids for {sent} sends")
        result = {"messages": sent, "seconds": dt}
        if done is not None:
            done(result)
    finally:
        p.shutdown()
    return result


# Driver ---------------------------------------------------------------------------------------
class _Proc:
    """A server subprocess that prints a ready line with its port."""

    def __init__(self, argv: list[str], ready: str, env: dict, cwd: str, log: str) -> None:
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._log, env=env, cwd=cwd)
        self.pid = self.proc.pid
        out: list[bytes] = []
        t = threading.Thread(target=lambda: out.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(60)
        line = out[0].decode(errors="replace") if out else ""
        if ready not in line:
            self.stop()
            with open(log, "rb") as fh:
                raise RuntimeError(f"{argv[2:4]} did not start: {line!r}; {fh.read()[-2000:].decode(errors='replace')}")
        self.endpoint = "127.0.0.1:" + line.split(ready)[1].split()[0].rsplit(":", 1)[1]
        self.metrics = line.split("metrics on ")[1].split(")")[0].split(",")[0].strip() if "metrics on " in line else None
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def start_server(kind: str, workdir: str, env: dict) -> _Proc:
    """``tidemq`` (``tidemq serve``, settings from ``env``'s TIDEMQ_* variables, metrics on a free port,
    topic Bench of 8 queues), or the do-nothing server (``null server``, ``NULL_UVLOOP``)."""
    os.makedirs(workdir, exist_ok=True)
    if kind.startswith("tidemq"):
        p = _Proc([sys.executable, "-m", "tidemq.cli.main", "serve", "--root", os.path.join(workdir, "store"),
                   "--port", "0", "--metrics-port", str(free_port())], "ready on ", env, workdir,
                  os.path.join(workdir, "server.log"))
        from tidemq.client.admin import call
        r = call(p.endpoint, "CreateTopic", {"name": TOPIC, "queues": 8})
        if not r.get("ok"):
            p.stop()
            raise RuntimeError(f"CreateTopic: {r}")
        return p
    loop = ["--null-loop", "uvloop"] if kind == NULL_UVLOOP else []
    return _Proc([sys.executable, os.path.join(HERE, "official_client.py"), "--serve-null", "0", *loop], NULL_READY,
                 env, workdir, os.path.join(workdir, "server.log"))


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def broker_fsyncs(srv: _Proc) -> float:
    """The broker's commit-log fsyncs so far (tidemq_flushes_total on its metrics port); nan without one."""
    if srv.metrics is None:
        return float("nan")
    with urllib.request.urlopen(f"http://{srv.metrics}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("tidemq_flushes_total "):
                return float(line.split()[1])
    return float("nan")


def measure(kind: str, workdir: str, env: dict, count: int, max_s: float, body_bytes: int,
            in_flight: int = 1, clients: int = 1) -> dict:
    """One sample: a fresh server, ``clients`` client processes sending at once (``count`` sends each at
    most, ``max_s`` each), then the server stopped. messages: their sum; seconds: the longest timed part;
    server_cores_avg: the server's CPU per second of the clients' whole lives; fsyncs: the broker's
    commit-log fsyncs during them (tidemq only)."""
    from _broker import proc_cpu_seconds
    srv = start_server(kind, workdir, env)
    try:
        cpu0 = proc_cpu_seconds(srv.pid)
        f0 = broker_fsyncs(srv)
        t0 = time.perf_counter()
        argv = [sys.executable, os.path.join(HERE, "official_client.py"), "--client-run", srv.endpoint,
                "--count", str(count), "--max-seconds", str(max_s), "--body-bytes", str(body_bytes),
                "--in-flight", str(in_flight)]
        procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                  cwd=workdir) for _ in range(clients)]
        outs = []
        for cp in procs:
            try:
                out, err = cp.communicate(timeout=max_s + 120)
            except subprocess.TimeoutExpired:
                cp.kill()
                out, err = cp.communicate()
            if cp.returncode != 0 or not out.strip():
                for other in procs:
                    if other.poll() is None:
                        other.kill()
                raise RuntimeError(f"{kind}: client run failed ({cp.returncode}): {err[-3000:]}")
            outs.append(json.loads(out.strip().splitlines()[-1]))
        wall = time.perf_counter() - t0
        srv_cpu = proc_cpu_seconds(srv.pid) - cpu0
        fsyncs = broker_fsyncs(srv) - f0
        if srv.proc.poll() is not None:
            raise RuntimeError(f"{kind}: the server exited during the run ({srv.proc.returncode})")
    finally:
        srv.stop()
        # the sample's store is not read again: a run of many samples must not fill a small disk
        shutil.rmtree(os.path.join(workdir, "store"), ignore_errors=True)
    r = {"messages": sum(o["messages"] for o in outs), "seconds": max(o["seconds"] for o in outs)}
    r["server_cores_avg"] = srv_cpu / wall          # over the whole client processes (startup to shutdown)
    r["send_ms"] = r["seconds"] / r["messages"] * 1e3 * clients * in_flight   # mean time a send is unanswered
    r["fsyncs"] = fsyncs
    r["server_us_per_msg"] = srv_cpu / (r["messages"] + WARMUP * clients) * 1e6   # startup included: an upper bound
    return r
