"""More than one core for the official clients (issue 32.4): `tidemq serve --processes N`, N = 1 against
N = 2, the official Python client sending (bench/_official.py's client process).

Per round, for each CPU placement and each load, N = 1 and N = 2 back to back (their order alternating
round by round), each a fresh broker on a fresh root under bench/.tmp (64 MiB segments, a small index;
removed after the sample), topic ``Bench`` of 8 queues
(N = 2: queues 0, 2, 4, 6 in member 0, 1, 3, 5, 7 in member 1):

* placements: ``shared`` (no pinning: the clients and the brokers on both CPUs), ``split`` (``taskset``:
  the clients on CPU 0, every broker process on CPU 1), ``spread`` (the clients unpinned, member i on
  CPU i % 2; N = 1: its one process on CPU 1);
* loads: ``async`` (``--clients`` client processes, each ``send_async`` with ``--in-flight`` unanswered),
  ``single`` (one client process, one synchronous send at a time: what a single send costs).

Reported per sample: msgs/s (the ratio: N = 2 against N = 1 of the same placement, load and round),
broker_us_per_msg (the CPU of every broker process, the parent included, from the moment every client is
warm and told to go until the last one's timed sends are answered, per message sent), broker_cores (that
CPU per second of that window), idle_cores (the brokers' CPU per second while the clients were connected
and warm but not sending, ``--idle-seconds`` right before), net_us_per_msg (broker_us_per_msg less that idle
CPU over the window: what the sends themselves cost) and the mean send time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

from _broker import proc_cpu_seconds
from _official import TOPIC, _Proc
from _official import client_run as official_client_run
from _report import BENCH_SRC, Report, progress, scratch_dir

PLACEMENTS = ("shared", "split", "spread")
# every store of every sample smaller than the defaults (1 GiB segments, two preallocated per store, and a
# 400 MiB index: N members make N of each), the same for N = 1 and N = 2
SMALL_STORE = {"TIDEMQ_SEGMENT_SIZE_BYTES": str(64 << 20), "TIDEMQ_INDEX_SLOTS": "100000",
               "TIDEMQ_INDEX_ENTRIES": "400000"}


def start_broker(n: int, placement: str, workdir: str, env: dict) -> tuple[_Proc, list[int]]:
    """``tidemq serve`` (n = 1) or ``tidemq serve --processes n``; the pids of every broker process."""
    os.makedirs(workdir, exist_ok=True)
    argv = [sys.executable, "-m", "tidemq.cli.main", "serve", "--root", os.path.join(workdir, "store"),
            "--port", "0", "--metrics-port", "0"]
    if n > 1:
        argv += ["--processes", str(n)]
    if placement == "split":
        argv = ["taskset", "-c", "1", *argv]
    p = _Proc(argv, "ready on ", env, workdir, os.path.join(workdir, "server.log"))
    pids = [p.pid]
    if n > 1:
        with open(os.path.join(workdir, "store", "multi", "members.json")) as fh:
            pids += [m["pid"] for m in json.load(fh)["members"]]
    if placement == "spread":
        members = pids[1:] or pids
        for i, pid in enumerate(members):
            subprocess.run(["taskset", "-pc", str((i + 1) % 2 if n == 1 else i % 2), str(pid)], check=True,
                           stdout=subprocess.DEVNULL)
    from tidemq.client.admin import call
    r = call(p.endpoint, "CreateTopic", {"name": TOPIC, "queues": 8})
    if not r.get("ok"):
        p.stop()
        raise RuntimeError(f"CreateTopic: {r}")
    return p, pids


def client_run(endpoint: str, count: int, max_s: float, body_bytes: int, in_flight: int) -> None:
    """One client process (bench/_official.py's, with a gate): warm up, say ``warm``, wait for ``go`` on
    stdin, send (one at a time, or ``send_async`` with ``in_flight`` unanswered; every answer checked, every
    id distinct), print the result, wait for stdin to close, shut down: the broker's CPU is read between
    ``go`` and the last result, the timed sends only."""
    def gate() -> None:
        print("warm", flush=True)
        sys.stdin.readline()

    def done(result: dict) -> None:
        print(json.dumps(result), flush=True)
        sys.stdin.read()
    official_client_run(endpoint, count, max_s, body_bytes, in_flight, gate=gate, done=done)


def sample(n: int, placement: str, load: str, a, workdir: str, env: dict) -> dict:
    srv, pids = start_broker(n, placement, workdir, env)
    try:
        clients, in_flight = (a.clients, a.in_flight) if load == "async" else (1, 1)
        argv = [sys.executable, os.path.abspath(__file__), "--client-run", srv.endpoint,
                "--count", str(a.count if load == "async" else a.count // 4), "--max-seconds", str(a.max_seconds),
                "--body-bytes", str(a.body_bytes), "--in-flight", str(in_flight)]
        if placement == "split":
            argv = ["taskset", "-c", "0", *argv]
        err_path = os.path.join(workdir, "clients.err")

        def errors() -> str:
            with open(err_path, errors="replace") as fh:
                return fh.read()[-3000:]
        with open(err_path, "ab") as err:
            procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                      env=env, cwd=workdir) for _ in range(clients)]
        try:
            for cp in procs:
                line = cp.stdout.readline()
                if line.strip() != "warm":
                    raise RuntimeError(f"N={n} {placement} {load}: client did not warm up: {line!r} {errors()}")
            i0, ti = sum(proc_cpu_seconds(p) for p in pids), time.perf_counter()
            time.sleep(a.idle_seconds)          # the clients connected and idle: the brokers' background CPU
            cpu0 = sum(proc_cpu_seconds(p) for p in pids)
            c0 = sum(proc_cpu_seconds(cp.pid) for cp in procs)
            t0 = time.perf_counter()
            idle_cores = (cpu0 - i0) / (t0 - ti)
            for cp in procs:
                cp.stdin.write("go\n")
                cp.stdin.flush()
            outs = []
            for cp in procs:
                line = cp.stdout.readline()
                if not line.strip():
                    raise RuntimeError(f"N={n} {placement} {load}: client failed: {errors()}")
                outs.append(json.loads(line))
            wall = time.perf_counter() - t0
            cpu = sum(proc_cpu_seconds(p) for p in pids) - cpu0
            ccpu = sum(proc_cpu_seconds(cp.pid) for cp in procs) - c0
        finally:
            for cp in procs:
                try:
                    cp.stdin.close()
                    cp.wait(120)
                except (OSError, subprocess.TimeoutExpired):
                    cp.kill()
                    cp.wait()
        dead = [p for p in pids if not os.path.exists(f"/proc/{p}")]
        if dead:
            raise RuntimeError(f"N={n}: broker process(es) {dead} exited during the run")
    finally:
        srv.stop()
    msgs = sum(o["messages"] for o in outs)
    secs = max(o["seconds"] for o in outs)
    return {"rate": msgs / secs, "broker_us_per_msg": cpu / msgs * 1e6, "idle_cores": idle_cores,
            "net_us_per_msg": max(0.0, cpu - idle_cores * wall) / msgs * 1e6, "client_us_per_msg": ccpu / msgs * 1e6,
            "broker_cores": cpu / wall, "send_ms": secs / msgs * 1e3 * clients * in_flight}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=4000, help="sends per client process per async sample (upper "
                                                             "bound; a quarter of it for the single sends)")
    ap.add_argument("--max-seconds", type=float, default=8.0, help="time bound of each client's timed sends")
    ap.add_argument("--body-bytes", type=int, default=1024)
    ap.add_argument("--clients", type=int, default=2, help="client processes of the async load")
    ap.add_argument("--in-flight", type=int, default=64, help="sends unanswered per client of the async load")
    ap.add_argument("--idle-seconds", type=float, default=2.0, help="the brokers' idle CPU measured this long "
                                                                     "before each sample's sends")
    ap.add_argument("--placements", default="shared,split,spread")
    ap.add_argument("--loads", default="async,single")
    ap.add_argument("--client-run", metavar="ENDPOINT", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.client_run:
        client_run(a.client_run, a.count, a.max_seconds, a.body_bytes, a.in_flight)
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))      # the samples' clean-ups run (no orphan broker)
    placements = [p for p in a.placements.split(",") if p]
    loads = [x for x in a.loads.split(",") if x]
    assert set(placements) <= set(PLACEMENTS) and set(loads) <= {"async", "single"}
    rep = Report("multicore", params=vars(a), unit="msgs/s", reference=f"N=1, {placements[0]}, {loads[0]}",
                 reference_doc="tidemq serve (one process), the same placement and load, in the same round")
    cpu_ratios: dict[str, list[float]] = {}
    net_ratios: dict[str, list[float]] = {}
    with scratch_dir("multicore") as tmp:
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        env = dict(os.environ, HOME=home, PYTHONUNBUFFERED="1", **SMALL_STORE)
        env["PYTHONPATH"] = BENCH_SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        os.environ["HOME"] = home
        for r in range(a.rounds):
            for placement in placements:
                for load in loads:
                    got = {}
                    for n in ((1, 2) if r % 2 == 0 else (2, 1)):
                        wd = os.path.join(tmp, f"{placement}-{load}-{n}-{r}")
                        try:
                            got[n] = sample(n, placement, load, a, wd, env)
                        finally:
                            shutil.rmtree(wd, ignore_errors=True)       # N stores per sample: never kept
                        progress(f"round {r + 1}/{a.rounds} {placement} {load} N={n}: {got[n]['rate']:,.0f} msgs/s, "
                                 f"broker {got[n]['broker_us_per_msg']:.0f} us/msg, {got[n]['broker_cores']:.2f} "
                                 f"cores, send {got[n]['send_ms']:.2f} ms, idle {got[n]['idle_cores']:.3f} cores, net "
                                 f"{got[n]['net_us_per_msg']:.0f} us/msg, client {got[n]['client_us_per_msg']:.0f} us/msg; load {os.getloadavg()[0]:.1f}")
                    ref = got[1]["rate"]
                    for n in (1, 2):
                        g = got[n]
                        rep.add(f"N={n}, {placement}, {load}", g["rate"], ref=ref if n == 2 else None,
                                broker_us_per_msg=g["broker_us_per_msg"], net_us_per_msg=g["net_us_per_msg"],
                                idle_cores=g["idle_cores"], client_us_per_msg=g["client_us_per_msg"], broker_cores=g["broker_cores"], send_ms=g["send_ms"])
                    key = f"{placement}, {load}"
                    cpu_ratios.setdefault(key, []).append(got[2]["broker_us_per_msg"] / got[1]["broker_us_per_msg"])
                    net_ratios.setdefault(key, []).append(got[2]["net_us_per_msg"] / got[1]["net_us_per_msg"])
        for placement in placements:
            for load in loads:
                rep.ratio(f"N=2, {placement}, {load}", None)
        for key, xs in cpu_ratios.items():
            rep.note(f"broker CPU per message, N=2 / N=1 ({key}): median {statistics.median(xs):.3f} "
                     f"(pairs: {', '.join(f'{x:.2f}' for x in xs)})")
        for key, xs in net_ratios.items():
            rep.note(f"net of the idle CPU, N=2 / N=1 ({key}): median {statistics.median(xs):.3f} "
                     f"(pairs: {', '.join(f'{x:.2f}' for x in xs)})")
        rep.note(f"load average at the end: {os.getloadavg()}")
        rep.write(tmp)


if __name__ == "__main__":
    main()
