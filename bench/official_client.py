"""The official RocketMQ 5 Python client (rocketmq-python-client) sending to tidemq, versus the same
client sending to a do-nothing server of the same protocol: the broker must never be the
bottleneck of the official client.

    .venv/bin/python bench/official_client.py            # 5 rounds, <= 3000 msgs or 20 s per sample
    .venv/bin/python bench/official_client.py --quick    # 1 round of 300: a smoke run

Per round, in a rotating order (each sample in its own client process, each server fresh):

* ``tidemq``: ``tidemq serve`` (defaults: ASYNC_FLUSH) in a subprocess on a fresh store under
  bench/.tmp, topic ``Bench`` with 8 queues.
* ``null server`` (the reference): a do-nothing ``apache.rocketmq.v2.MessagingService`` written in
  this file (``--serve-null``), a grpc.aio server in a subprocess: QueryRoute answers one
  READ_WRITE queue with the request's endpoints, Telemetry answers every settings command with
  status OK, publishing.max_body_size, an exponential backoff and metric off (the stream stays
  open), Heartbeat and NotifyClientTermination OK, SendMessage OK with one entry per message
  echoing its message_id. It stores nothing.
* ``null server on uvloop`` (for information): the same do-nothing server on uvloop's event loop
  (tidemq's default, BrokerConfig.event_loop), so the ratio against the loop tidemq runs on can be
  read too: its ratio column is against the reference, tidemq / it is the quotient of the two.

The client process (``--client-run``): Producer(ClientConfiguration(endpoint, Credentials(),
request_timeout=10), ("Bench",)), startup, 50 untimed sends, then ``Producer.send`` of a 1 KiB
message, one per request, until ``--count`` messages or ``--max-seconds``; shutdown. HOME points
at a scratch directory (the client writes ~/logs/rocketmq_python/).

Goal (issue 6): tidemq >= 0.9 x the do-nothing server. Also reported: the mean latency of a send
and the CPU cores the server process used during the sample.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

from _report import BENCH_SRC, Report, progress, scratch_dir

GOAL = 0.9
TOPIC = "Bench"
WARMUP = 50
NULL_READY = "null server ready on "
NULL_UVLOOP = "null server on uvloop"


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
def client_run(endpoint: str, count: int, max_s: float, body_bytes: int) -> dict:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    body = os.urandom(body_bytes)

    def msg() -> "Message":
        m = Message()
        m.topic = TOPIC
        m.body = body
        return m

    p = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=10), (TOPIC,))
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
        sent = 0
        ids = set()
        t0 = time.perf_counter()
        end = t0 + max_s
        while sent < count and time.perf_counter() < end:
            r = p.send(msg())
            ids.add(r.message_id)
            sent += 1
        dt = time.perf_counter() - t0
    finally:
        p.shutdown()
    if len(ids) != sent:
        raise RuntimeError(f"{len(ids)} distinct message ids for {sent} sends")
    return {"messages": sent, "seconds": dt}


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
    os.makedirs(workdir, exist_ok=True)
    if kind == "tidemq":
        p = _Proc([sys.executable, "-m", "tidemq.cli.main", "serve", "--root", os.path.join(workdir, "store"),
                   "--port", "0"], "ready on ", env, workdir, os.path.join(workdir, "server.log"))
        from tidemq.client.admin import call
        r = call(p.endpoint, "CreateTopic", {"name": TOPIC, "queues": 8})
        if not r.get("ok"):
            p.stop()
            raise RuntimeError(f"CreateTopic: {r}")
        return p
    loop = ["--null-loop", "uvloop"] if kind == NULL_UVLOOP else []
    return _Proc([sys.executable, os.path.abspath(__file__), "--serve-null", "0", *loop], NULL_READY, env, workdir,
                 os.path.join(workdir, "server.log"))


def measure(kind: str, workdir: str, env: dict, a) -> dict:
    from _broker import proc_cpu_seconds
    srv = start_server(kind, workdir, env)
    try:
        cpu0 = proc_cpu_seconds(srv.pid)
        t0 = time.perf_counter()
        cp = subprocess.run([sys.executable, os.path.abspath(__file__), "--client-run", srv.endpoint,
                             "--count", str(a.count), "--max-seconds", str(a.max_seconds),
                             "--body-bytes", str(a.body_bytes)], capture_output=True, text=True, env=env,
                            cwd=workdir, timeout=a.max_seconds + 120)
        wall = time.perf_counter() - t0
        srv_cpu = proc_cpu_seconds(srv.pid) - cpu0
        if cp.returncode != 0 or not cp.stdout.strip():
            raise RuntimeError(f"{kind}: client run failed ({cp.returncode}): {cp.stderr[-3000:]}")
        r = json.loads(cp.stdout.strip().splitlines()[-1])
        if srv.proc.poll() is not None:
            raise RuntimeError(f"{kind}: the server exited during the run ({srv.proc.returncode})")
    finally:
        srv.stop()
    r["server_cores_avg"] = srv_cpu / wall          # over the whole client process (startup to shutdown)
    r["send_ms"] = r["seconds"] / r["messages"] * 1e3
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=3000, help="sends per sample (upper bound)")
    ap.add_argument("--max-seconds", type=float, default=20.0, help="time bound of the timed sends")
    ap.add_argument("--body-bytes", type=int, default=1024)
    ap.add_argument("--quick", action="store_true", help="1 round of 300 sends: a smoke run")
    ap.add_argument("--serve-null", type=int, metavar="PORT", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--null-loop", choices=("asyncio", "uvloop"), default="asyncio", help=argparse.SUPPRESS)
    ap.add_argument("--client-run", metavar="ENDPOINT", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve_null is not None:
        serve_null(a.serve_null, a.null_loop)
        return
    if a.client_run:
        print(json.dumps(client_run(a.client_run, a.count, a.max_seconds, a.body_bytes)), flush=True)
        return
    if a.quick:
        a.rounds, a.count = 1, 300
    rep = Report("official_client", unit="msgs/s", reference="null server",
                 reference_doc="a do-nothing MessagingService (grpc.aio, in a subprocess, written in "
                               "bench/official_client.py): route, settings, heartbeat, SendMessage OK; stores nothing",
                 params={"client": "rocketmq-python-client " + _dist("rocketmq-python-client"),
                         "body_bytes": a.body_bytes, "rounds": a.rounds, "count_per_sample_max": a.count,
                         "max_seconds_per_sample": a.max_seconds, "warmup_sends": WARMUP,
                         "tidemq": "tidemq serve, defaults (ASYNC_FLUSH), topic of 8 queues",
                         "send": "Producer.send, one 1 KiB message per request, synchronous"})
    rep.ratio("tidemq", GOAL)
    rep.ratio(NULL_UVLOOP, None)
    kinds = ["tidemq", "null server", NULL_UVLOOP]
    with scratch_dir("official_client") as tmp:
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        env = dict(os.environ, HOME=home, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = BENCH_SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        os.environ["HOME"] = home         # this process imports tidemq.protocol.admin only, but to be safe
        for r in range(a.rounds):
            order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
            if r // len(kinds) % 2:
                order.reverse()
            got = {}
            for k in order:
                res = measure(k, os.path.join(tmp, f"{k.replace(' ', '_')}-{r}"), env, a)
                got[k] = res
                progress(f"round {r + 1}/{a.rounds} {k}: {res['messages'] / res['seconds']:,.0f} msgs/s "
                         f"({res['messages']} in {res['seconds']:.2f}s, {res['send_ms']:.3f} ms per send; "
                         f"server {res['server_cores_avg']:.2f} cores)")
            ref = got["null server"]["messages"] / got["null server"]["seconds"]
            rep.add("null server", ref, send_ms=got["null server"]["send_ms"],
                    server_cores=got["null server"]["server_cores_avg"])
            x = got["tidemq"]["messages"] / got["tidemq"]["seconds"]
            rep.add("tidemq", x, ref=ref, send_ms=got["tidemq"]["send_ms"],
                    server_cores=got["tidemq"]["server_cores_avg"])
            u = got[NULL_UVLOOP]["messages"] / got[NULL_UVLOOP]["seconds"]
            rep.add(NULL_UVLOOP, u, ref=ref, send_ms=got[NULL_UVLOOP]["send_ms"],
                    server_cores=got[NULL_UVLOOP]["server_cores_avg"])
            progress(f"round {r + 1}/{a.rounds}: tidemq / null server = {x / ref:.3f}, "
                     f"tidemq / null server on uvloop = {x / u:.3f}")
        rep.note("send_ms: mean wall time of one Producer.send. server_cores: CPU seconds of the server process "
                 "per second of the client process's life (startup, warm-up, timed sends, shutdown).")
        rep.write(tmp)


def _dist(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    main()
