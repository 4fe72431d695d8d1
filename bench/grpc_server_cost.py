"""The gRPC server's own CPU per single-message SendMessage, under the server kinds grpcio offers,
and tidemq's against them: where a broker core goes on the official clients' path (issue 32.2).

    .venv/bin/python bench/grpc_server_cost.py              # 5 rounds, 3000 calls per client thread or 10 s
    .venv/bin/python bench/grpc_server_cost.py --quick      # 1 round of 500 calls per thread: a smoke run

Every sample: a fresh server in a subprocess and one client process of ``--threads`` threads, each
with its own channel (its own connection, as separate clients have), calling SendMessage with one
1 KiB NORMAL message (a distinct message id per call, the bytes built before timing; grpc's generic
unary call, no protobuf in the client's loop), one call at a time per thread; every answer checked
OK. Measured: the server process's CPU seconds during the timed calls / calls (``server_us_per_call``)
and the calls per second.

Servers (``--kinds``), all answering SendMessage as the do-nothing server of official_client.py
does (decode the request, one OK entry per message), storing nothing, unless tidemq:

* ``null aio asyncio`` (the reference): grpc.aio.server on asyncio's loop, the default options;
* ``null aio uvloop``: the same on uvloop's loop (tidemq's default, BrokerConfig.event_loop);
* ``null aio uvloop busy``: the same, its handler first burning ``--busy-us`` of thread CPU in a loop
  (default 130: about what tidemq's handler, its dispatch drain and the GC cost per call in the server,
  ``--timed``'s ``handler_us`` + ``drain_us`` + ``gc_us``): what a handler of tidemq's CPU costs a
  grpc.aio server that does nothing else (no allocation, no syscall, a few cache lines), so that
  ``tidemq`` against ``null aio uvloop busy`` is what tidemq costs beyond its handler's own time
  (bench/README.md 32.2, wave 8);
* ``null aio uvloop throughput``: with ``grpc.optimization_target=throughput``;
* ``null sync threads``: grpc.server with a ThreadPoolExecutor of ``--threads`` threads, synchronous
  handlers (the threaded server);
* ``tidemq``: ``tidemq serve`` (defaults: uvloop, ASYNC_FLUSH, the compiled SendMessage lane), topic
  Bench of 8 queues, every message stored;
* ``tidemq asyncio``: the same with TIDEMQ_EVENT_LOOP=asyncio;
* ``tidemq no handler``: ``tidemq serve`` as ``tidemq``, its SendMessage lane's handler replaced by one
  that answers a constant OK (the request not read, nothing stored): everything of the broker but
  the handler (its gRPC server set-up and options, the generic handlers, its threads and loop tasks),
  so that ``tidemq`` - ``tidemq no handler`` is what the handler costs in the server;
* ``tidemq turns``: ``tidemq serve`` as ``tidemq``, counting how many single sends (SendPath.send_one's
  calls) run in each turn of its event loop: its columns ``sends_per_loop_turn`` and
  ``after_a_turns_first`` (the share of sends that came after another in the same turn: what putting
  a turn's sends together, one store put per turn, could ever take; bench/README.md 32.2, wave 7);
* ``tidemq LABEL`` (``--src LABEL=PATH``, repeatable): ``tidemq serve`` from another tree (a snapshot),
  in the same rounds: an A/B of two versions against the same reference.

``--timed``: every tidemq row with its handler (``tidemq``, ``tidemq asyncio``, the ``--src`` rows) runs
with the handler's parts timed inside the server (``time.thread_time_ns`` around the lane's
``send_bytes``, ``SendPath.send_one``, the store put ``StorePuts.now`` (and ``StorePuts.one``), the dispatch drain
``StorePuts._drain``, and the cyclic GC through ``gc.callbacks``; ~1 us per wrapper): columns
``handler_us``, ``send_one_us``, ``put_us``, ``drain_us``, ``gc_us`` per call (warm-up included), the
CPU the handler costs in the server, where its caches are cold (about twice profile_send.py's figure).
A send that awaits (not the driver's) would count what the loop ran meanwhile.

The ratio of each row: its server CPU per call over the reference's, in the same round (lower is
cheaper); issue 32's goal: tidemq <= 1.15 x the do-nothing server's CPU per call.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

from _broker import proc_cpu_seconds
from _report import BENCH_SRC, Report, progress, scratch_dir

READY = "cost server ready on "
TOPIC = "Bench"
METHOD = "/apache.rocketmq.v2.MessagingService/SendMessage"
REFERENCE = "null aio asyncio"
KINDS = [REFERENCE, "null aio uvloop", "null aio uvloop busy", "null aio uvloop throughput", "null sync threads",
         "tidemq", "tidemq asyncio", "tidemq no handler", "tidemq turns"]
TURNS_OUT = "BENCH_TURNS_OUT"        # where ``tidemq turns`` writes {sends in a turn: turns} at its exit
TIMED_OUT = "BENCH_TIMED_OUT"        # where a ``--timed`` tidemq writes its timers at its exit
TIMERS = ("handler", "send_one", "put", "drain", "gc")
GOAL = 1.15


# The servers (a subprocess each) ---------------------------------------------------------------
def serve(kind: str, threads: int, busy_us: float = 0.0) -> None:
    import asyncio
    import signal
    from concurrent.futures import ThreadPoolExecutor

    import grpc
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as spb
    from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc

    OK = pb.Status(code=pb.Code.OK, message="OK")
    opts = [("grpc.max_receive_message_length", (4 << 20) + (512 << 10))]
    if kind.endswith("throughput"):
        opts.append(("grpc.optimization_target", "throughput"))

    def answer(request, offset):
        return spb.SendMessageResponse(status=OK, entries=[
            spb.SendResultEntry(status=OK, message_id=m.system_properties.message_id, offset=offset)
            for m in request.messages])

    if kind == "null sync threads":
        class SyncNull(sgrpc.MessagingServiceServicer):
            def SendMessage(self, request, context):
                return answer(request, 0)

        server = grpc.server(ThreadPoolExecutor(threads), options=opts)
        sgrpc.add_MessagingServiceServicer_to_server(SyncNull(), server)
        bound = server.add_insecure_port("127.0.0.1:0")
        server.start()
        done = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: done.set())
        print(f"{READY}127.0.0.1:{bound}", flush=True)
        done.wait()
        server.stop(1.0)
        return

    busy_ns = int(busy_us * 1000) if kind.endswith("busy") else 0
    clock = time.thread_time_ns

    class AioNull(sgrpc.MessagingServiceServicer):
        async def SendMessage(self, request, context):
            if busy_ns:                       # ``null aio uvloop busy``: the handler's CPU, and nothing else
                end = clock() + busy_ns
                while clock() < end:
                    pass
            return answer(request, 0)

    async def main() -> None:
        server = grpc.aio.server(options=opts)
        sgrpc.add_MessagingServiceServicer_to_server(AioNull(), server)
        bound = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print(f"{READY}127.0.0.1:{bound}", flush=True)
        await stop.wait()
        await server.stop(1.0)

    if "uvloop" in kind:
        import uvloop
        uvloop.run(main())
    else:
        asyncio.run(main())


def serve_tidemq_no_handler() -> None:
    """``tidemq serve`` (the arguments after ``--tidemq-no-handler``) with MessageSends.send_bytes
    answering a constant OK: the broker without its SendMessage handler's work."""
    from tidemq.broker.produce import send_message
    from tidemq.protocol.stubs import Code

    ok = send_message.answer_one(Code.OK, "", "0" * 32, 1)

    async def send_bytes(self, raw, context):
        return ok
    send_message.MessageSends.send_bytes = send_bytes
    _serve_after("--tidemq-no-handler")


def _serve_after(flag: str, out_env: str | None = None, data=None) -> None:
    """``tidemq serve`` with the arguments after ``flag``; with ``out_env``: ``data`` written as JSON to
    the file that variable names when the process exits."""
    import atexit

    from tidemq.cli.main import cli

    if out_env is not None:
        def dump() -> None:
            with open(os.environ[out_env], "w") as fh:
                json.dump(data, fh)
        atexit.register(dump)
    i = sys.argv.index(flag)
    cli(sys.argv[i + 1:], prog_name="tidemq", auto_envvar_prefix="TIDEMQ")


def serve_tidemq_turns() -> None:
    """``tidemq serve`` (the arguments after ``--tidemq-turns``) with SendPath.send_one counting the
    single sends of each event-loop turn (the first of a turn schedules the count's end with
    ``call_soon``: it runs once the turn's ready callbacks have); the histogram written to
    $BENCH_TURNS_OUT at exit."""
    import asyncio

    from tidemq.broker.produce.send_path import SendPath

    hist: dict[int, int] = {}
    turn = [0]

    def over() -> None:
        hist[turn[0]] = hist.get(turn[0], 0) + 1
        turn[0] = 0

    real = SendPath.send_one

    def send_one(self, *args):
        if not turn[0]:
            asyncio.get_running_loop().call_soon(over)
        turn[0] += 1
        return real(self, *args)
    SendPath.send_one = send_one
    _serve_after("--tidemq-turns", TURNS_OUT, hist)


def serve_tidemq_timed() -> None:
    """``tidemq serve`` (the arguments after ``--tidemq-timed``) with the handler's parts timed (the
    module's doc: ``--timed``); {timer: ns, "calls": n} written to $BENCH_TIMED_OUT at exit."""
    import gc

    from tidemq.broker.produce.send_message import MessageSends
    from tidemq.broker.produce.send_path import SendPath
    from tidemq.broker.puts import StorePuts

    clock = time.thread_time_ns
    ns = dict.fromkeys(TIMERS, 0)
    ns["calls"] = 0

    def timed(name: str, real):
        def run(*args):
            t0 = clock()
            try:
                return real(*args)
            finally:
                ns[name] += clock() - t0
        return run

    real_send = MessageSends.send_bytes

    async def send_bytes(self, raw, context):
        t0 = clock()
        try:
            return await real_send(self, raw, context)
        finally:
            ns["handler"] += clock() - t0
            ns["calls"] += 1
    MessageSends.send_bytes = send_bytes
    SendPath.send_one = timed("send_one", SendPath.send_one)
    StorePuts.now = timed("put", StorePuts.now)
    if hasattr(StorePuts, "one"):              # the one-message put (MessageStore.put_one), where there is one
        StorePuts.one = timed("put", StorePuts.one)
    StorePuts._drain = timed("drain", StorePuts._drain)
    began = [0]

    def on_gc(phase: str, _info) -> None:
        if phase == "start":
            began[0] = clock()
        else:
            ns["gc"] += clock() - began[0]
    gc.callbacks.append(on_gc)
    _serve_after("--tidemq-timed", TIMED_OUT, ns)


# The client process ----------------------------------------------------------------------------
def drive(endpoint: str, threads: int, calls: int, max_s: float, body_bytes: int) -> dict:
    import grpc
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as spb

    body = os.urandom(body_bytes)
    pid = os.getpid()

    def request(t: int, i: int) -> bytes:
        sp = pb.SystemProperties(message_id=f"01{pid:08X}{t:04X}{i:012X}", message_type=pb.MessageType.NORMAL,
                                 born_host="127.0.0.1")
        sp.born_timestamp.seconds = int(time.time())
        m = pb.Message(topic=pb.Resource(name=TOPIC), body=body, system_properties=sp)
        return spb.SendMessageRequest(messages=[m]).SerializeToString()

    warm = 50
    reqs = [[request(t, i) for i in range(calls + warm)] for t in range(threads)]
    channels = [grpc.insecure_channel(endpoint) for _ in range(threads)]
    stubs = [ch.unary_unary(METHOD, request_serializer=None, response_deserializer=None) for ch in channels]
    bad = [0] * threads
    done = [0] * threads
    start = threading.Barrier(threads + 1)
    ended = threading.Barrier(threads + 1)
    stop_at = [0.0]

    def run(t: int) -> None:
        call = stubs[t]
        for raw in reqs[t][:warm]:
            call(raw, timeout=30)
        start.wait()
        n = 0
        for raw in reqs[t][warm:]:
            out = spb.SendMessageResponse.FromString(call(raw, timeout=30))
            if out.status.code != pb.Code.OK:
                bad[t] += 1
            n += 1
            if time.perf_counter() >= stop_at[0]:     # read each call: the parent sets it after the barrier
                break
        done[t] = n
        ended.wait()

    ts = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(threads)]
    for t in ts:
        t.start()
    stop_at[0] = time.perf_counter() + 3600
    start.wait()                          # every thread warmed up: the parent reads the server's CPU now
    stop_at[0] = time.perf_counter() + max_s
    print("timing", flush=True)
    t0 = time.perf_counter()
    ended.wait()
    dt = time.perf_counter() - t0
    print("timed", flush=True)
    for ch in channels:
        ch.close()
    if sum(bad):
        raise RuntimeError(f"{sum(bad)} calls not answered OK")
    return {"calls": sum(done), "seconds": dt}


# Driver ----------------------------------------------------------------------------------------
class Server:
    def __init__(self, kind: str, workdir: str, env: dict, threads: int, src: str | None = None,
                 timed: bool = False, busy_us: float = 0.0) -> None:
        os.makedirs(workdir, exist_ok=True)
        self._log = open(os.path.join(workdir, "server.log"), "ab")
        if kind.startswith("tidemq"):
            env = dict(env, TIDEMQ_EVENT_LOOP="asyncio" if kind.endswith("asyncio") else "uvloop",
                       TIDEMQ_SEGMENT_SIZE_BYTES=str(256 << 20))
            if src is not None:                 # --src: this row's tidemq from another tree
                env["PYTHONPATH"] = src + os.pathsep + env["PYTHONPATH"]
                # (and for the servers run as this script, --timed's among them: _report puts
                # TIDEMQ_BENCH_SRC, else the checkout's src, first on sys.path, ahead of PYTHONPATH)
                env["TIDEMQ_BENCH_SRC"] = src
            argv = [sys.executable, "-m", "tidemq.cli.main", "serve", "--root", os.path.join(workdir, "store"),
                    "--port", "0", "--metrics-port", "0"]      # 0: no metrics port
            if kind == "tidemq no handler":
                argv[1:3] = [os.path.abspath(__file__), "--tidemq-no-handler"]
            elif kind == "tidemq turns":
                argv[1:3] = [os.path.abspath(__file__), "--tidemq-turns"]
                env = dict(env, **{TURNS_OUT: os.path.join(workdir, "turns.json")})
            elif timed:
                argv[1:3] = [os.path.abspath(__file__), "--tidemq-timed"]
                env = dict(env, **{TIMED_OUT: os.path.join(workdir, "timed.json")})
            ready = "ready on "
        else:
            argv = [sys.executable, os.path.abspath(__file__), "--serve", kind, "--threads", str(threads),
                    "--busy-us", str(busy_us)]
            ready = READY
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._log, env=env, cwd=workdir)
        line = self.proc.stdout.readline().decode(errors="replace")
        if ready not in line:
            self.stop()
            raise RuntimeError(f"{kind} did not start: {line!r}")
        self.endpoint = "127.0.0.1:" + line.split(ready)[1].split()[0].rsplit(":", 1)[1]
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()
        if kind.startswith("tidemq"):
            from tidemq.client.admin import call
            r = call(self.endpoint, "CreateTopic", {"name": TOPIC, "queues": 8})
            if not r.get("ok"):
                self.stop()
                raise RuntimeError(f"CreateTopic: {r}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def thread_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the process's main thread (the event loop's, in every aio server
    and in tidemq), from /proc; the rest of the process's CPU is its other threads' (gRPC's
    EventEngine and completion-queue poller, tidemq's flush, warmer and disk threads)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/stat") as fh:
            parts = fh.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def measure(kind: str, workdir: str, env: dict, a) -> dict:
    timed = a.timed and kind.startswith("tidemq") and kind not in ("tidemq no handler", "tidemq turns")
    srv = Server(kind, workdir, env, a.threads, a.srcs.get(kind), timed, a.busy_us)
    try:
        errlog = open(os.path.join(workdir, "client.err"), "w+")
        cp = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--drive", srv.endpoint,
                               "--threads", str(a.threads), "--count", str(a.count), "--max-seconds",
                               str(a.max_seconds), "--body-bytes", str(a.body_bytes)],
                              stdout=subprocess.PIPE, stderr=errlog, text=True, env=env, cwd=workdir)

        def failed(what: str) -> RuntimeError:
            if cp.poll() is None:
                cp.kill()
            cp.wait()
            errlog.seek(0)
            return RuntimeError(f"{kind}: the client failed ({what}, exit {cp.returncode}): {errlog.read()[-3000:]}")

        with errlog:
            if cp.stdout.readline().strip() != "timing":
                raise failed("no start")
            cpu0, main0 = proc_cpu_seconds(srv.proc.pid), thread_cpu_seconds(srv.proc.pid)
            if cp.stdout.readline().strip() != "timed":
                raise failed("no end")
            cpu = proc_cpu_seconds(srv.proc.pid) - cpu0
            main = thread_cpu_seconds(srv.proc.pid) - main0
            out = cp.stdout.read()          # (communicate() would skip what readline() buffered)
            if cp.wait(120) != 0 or not out.strip():
                raise failed("no result")
        r = json.loads(out.strip().splitlines()[-1])
        if srv.proc.poll() is not None:
            raise RuntimeError(f"{kind}: the server exited during the run")
    finally:
        srv.stop()
    if timed:                                   # (warm-up calls included)
        with open(os.path.join(workdir, "timed.json")) as fh:
            ns = json.load(fh)
        for t in TIMERS:
            r[f"{t}_us"] = ns[t] / max(1, ns["calls"]) / 1e3
    if kind == "tidemq turns":                  # (warm-up calls included)
        with open(os.path.join(workdir, "turns.json")) as fh:
            hist = {int(k): v for k, v in json.load(fh).items()}
        sends = sum(k * v for k, v in hist.items())
        r["sends_per_loop_turn"] = sends / max(1, sum(hist.values()))
        r["after_a_turns_first"] = sum((k - 1) * v for k, v in hist.items()) / max(1, sends)
    r["server_us_per_call"] = cpu / r["calls"] * 1e6
    r["loop_thread_us_per_call"] = main / r["calls"] * 1e6
    r["server_cores"] = cpu / r["seconds"]
    return r


def main() -> None:
    if "--tidemq-no-handler" in sys.argv:
        serve_tidemq_no_handler()
        return
    if "--tidemq-turns" in sys.argv:
        serve_tidemq_turns()
        return
    if "--tidemq-timed" in sys.argv:
        serve_tidemq_timed()
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=3000, help="calls per client thread per sample (upper bound)")
    ap.add_argument("--max-seconds", type=float, default=10.0, help="time bound of the timed calls")
    ap.add_argument("--threads", type=int, default=8, help="client threads (and the threaded server's threads)")
    ap.add_argument("--body-bytes", type=int, default=1024)
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated servers (the reference always runs)")
    ap.add_argument("--src", action="append", default=[], metavar="LABEL=PATH",
                    help="another row, 'tidemq LABEL': tidemq serve from the tree PATH (a snapshot: "
                         "_report.py snapshot), measured in the same rounds as the others (A/B interleaved)")
    ap.add_argument("--busy-us", type=float, default=130.0,
                    help="the CPU microseconds the 'null aio uvloop busy' server's handler burns per call (a "
                         "stand-in for tidemq's handler: its handler_us under --timed)")
    ap.add_argument("--quick", action="store_true", help="1 round of 500 calls per thread: a smoke run")
    ap.add_argument("--timed", action="store_true",
                    help="the tidemq rows' handler timed inside the server, by part (columns handler_us, send_one_us, "
                         "put_us, drain_us, gc_us)")
    ap.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--drive", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        serve(a.serve, a.threads, a.busy_us)
        return
    if a.drive:
        print(json.dumps(drive(a.drive, a.threads, a.count, a.max_seconds, a.body_bytes)), flush=True)
        return
    if a.quick:
        a.rounds, a.count = 1, 500
    kinds = [REFERENCE] + [k for k in a.kinds.split(",") if k and k != REFERENCE]
    a.srcs = {}
    for spec in a.src:
        label, _, path = spec.partition("=")
        if not label or not os.path.isdir(os.path.join(path, "tidemq")):
            raise SystemExit(f"--src {spec!r}: want LABEL=PATH, PATH a tree holding tidemq/")
        a.srcs[f"tidemq {label}"] = os.path.abspath(path)
    kinds += list(a.srcs)
    unknown = set(kinds) - set(KINDS) - set(a.srcs)
    if unknown:
        raise SystemExit(f"unknown kinds: {sorted(unknown)}; known: {KINDS}")
    rep = Report("grpc_server_cost", unit="server us per call", reference=REFERENCE,
                 reference_doc="a do-nothing SendMessage (decode, one OK entry per message) on grpc.aio.server, "
                               "asyncio's loop, default options, in a subprocess; ratio = CPU per call / its",
                 params={"threads": a.threads, "rounds": a.rounds, "count_per_thread_max": a.count,
                         "max_seconds": a.max_seconds, "body_bytes": a.body_bytes, "busy_us": a.busy_us,
                         "call": "SendMessage, one 1 KiB NORMAL message, one call at a time per client thread, "
                                 "a channel per thread"})
    for k in kinds[1:]:
        rep.ratio(k, None)
    with scratch_dir("grpc_server_cost") as tmp:
        env = dict(os.environ, PYTHONUNBUFFERED="1", HOME=tmp)
        env["PYTHONPATH"] = BENCH_SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for r in range(a.rounds):
            order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
            got = {}
            for k in order:
                res = got[k] = measure(k, os.path.join(tmp, f"{k.replace(' ', '_')}-{r}"), env, a)
                progress(f"round {r + 1}/{a.rounds} {k}: {res['server_us_per_call']:.0f} us of server CPU per call "
                         f"({res['loop_thread_us_per_call']:.0f} on its main thread), "
                         f"{res['calls'] / res['seconds']:,.0f} calls/s, server {res['server_cores']:.2f} cores"
                         + (f", {res['sends_per_loop_turn']:.3f} sends per loop turn, {res['after_a_turns_first']:.1%} "
                            f"after a turn's first" if "sends_per_loop_turn" in res else "")
                         + ("; per call: " + ", ".join(f"{t} {res[f'{t}_us']:.1f} us" for t in TIMERS)
                            if "handler_us" in res else ""))
            ref = got[REFERENCE]["server_us_per_call"]
            rep.add(REFERENCE, ref, calls_per_s=got[REFERENCE]["calls"] / got[REFERENCE]["seconds"],
                    server_cores=got[REFERENCE]["server_cores"],
                    loop_thread_us_per_call=got[REFERENCE]["loop_thread_us_per_call"])
            for k in kinds[1:]:
                turns = {c: got[k][c] for c in ("sends_per_loop_turn", "after_a_turns_first") + tuple(
                    f"{t}_us" for t in TIMERS) if c in got[k]}
                rep.add(k, got[k]["server_us_per_call"], ref=ref, calls_per_s=got[k]["calls"] / got[k]["seconds"],
                        server_cores=got[k]["server_cores"], loop_thread_us_per_call=got[k]["loop_thread_us_per_call"],
                        **turns)
            if "tidemq" in got and "null aio uvloop" in got:
                progress(f"round {r + 1}/{a.rounds}: tidemq / null aio uvloop (the same loop) = "
                         f"{got['tidemq']['server_us_per_call'] / got['null aio uvloop']['server_us_per_call']:.3f}")
        rep.note("ratio: the row's server CPU per call over the reference's in the same round: LOWER is cheaper "
                 "(issue 32's goal for tidemq: <= 1.15 x the do-nothing server).")
        rep.note("server_cores: the server's CPU per second of the timed calls (2 CPUs here, shared with the client).")
        if a.timed:
            rep.note("handler_us, send_one_us, put_us, drain_us, gc_us (--timed): thread CPU per call inside the server of "
                     "the lane's send_bytes, SendPath.send_one, the store put (StorePuts.now or .one), the dispatch drain and the "
                     "cyclic GC (warm-up calls included; ~1 us of timer each).")
        if "tidemq turns" in kinds:
            rep.note("sends_per_loop_turn (tidemq turns): single sends per event-loop turn that had one; after_a_turns_first: "
                     "the share of sends that came after another in the same turn (what one store put per turn could take).")
        rep.note("loop_thread_us_per_call: the part of the server's CPU per call spent on its main thread (the event "
                 "loop's: grpc.aio's per-call work and the handler; the threaded server's handlers run on its pool).")
        rep.write(tmp)


if __name__ == "__main__":
    main()
