"""Where the time goes in the broker benchmarks: py-spy samples of the broker process and of the
client (this process) while tidemq.client produces or consumes, summarized per function.

    .venv/bin/python bench/profile_broker.py --what produce --count 200000
    .venv/bin/python bench/profile_broker.py --what consume --count 100000
    .venv/bin/python bench/profile_broker.py --what produce --native      # C frames too (slower)

Same workload as bench/broker_produce.py / broker_consume.py (1 KiB bodies, batches of 256, 4 in
flight, topic of 8 queues, a broker subprocess on a fresh store under bench/.tmp). Writes the raw
py-spy files to bench/.tmp/ (kept) and bench/results/pyspy_broker_<what>.md: for the broker and
for the client, the share of samples by innermost function (self) and by function (inclusive).
A tool, not a benchmark: no reference, no goal.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from _broker import TidemqSystem, proc_cpu_seconds
from _report import RESULTS_DIR, TMP_PARENT, machine, progress, settle


def pyspy_bin() -> str:
    p = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return p if os.path.exists(p) else (shutil.which("py-spy") or "py-spy")


def start_pyspy(pid: int, out: str, rate: int, native: bool) -> subprocess.Popen:
    cmd = [pyspy_bin(), "record", "-r", str(rate), "-f", "raw", "-o", out, "--pid", str(pid), "--nonblocking"]
    if native:
        cmd.remove("--nonblocking")
        cmd.append("--native")
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)
    if p.poll() is not None:
        raise SystemExit(f"py-spy failed: {p.stderr.read().decode(errors='replace')}")
    return p


def stop_pyspy(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def _fn(frame: str) -> str:
    # "name (path/to/file.py:123)" -> "name (file.py)"; native frames as they are
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    if "site-packages/" in path:
        path = path.split("site-packages/", 1)[1]
    elif "/tidemq/" in path:
        path = "tidemq/" + path.split("/tidemq/", 1)[1]
    else:
        path = os.path.basename(path)
    return f"{name} ({path})" if path else name


def summarize(path: str, top: int = 25) -> list[str]:
    self_ = collections.Counter()
    incl = collections.Counter()
    threads = collections.Counter()
    total = 0
    with open(path) as fh:
        for line in fh:
            stack, _, cnt = line.rstrip("\n").rpartition(" ")
            if not stack or not cnt.isdigit():
                continue
            frames = stack.split(";")
            c = int(cnt)
            total += c
            head = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
            th = next((f for f in frames if f.startswith("thread ")), "?")
            threads[th.split(" ", 2)[-1] if th != "?" else "?"] += c
            if not head:
                continue
            self_[_fn(head[-1])] += c
            for fn in {_fn(f) for f in head}:
                incl[fn] += c
    out = [f"{total:,} samples (active threads only).", ""]
    if not total:
        return out

    def table(title: str, counter: collections.Counter, n: int) -> None:
        out.extend([f"**{title}**", "", "| % | where |", "|---|---|"])
        out.extend(f"| {100 * c / total:.1f} | `{f}` |" for f, c in counter.most_common(n))
        out.append("")

    table("threads", threads, 8)
    table("innermost frame (self)", self_, top)
    table("function (inclusive)", incl, top)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--what", choices=("produce", "consume"), default="produce")
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--max-seconds", type=float, default=30.0)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--in-flight", type=int, default=4)
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--native", action="store_true", help="py-spy --native (C frames; pauses the process)")
    a = ap.parse_args()
    body = os.urandom(1024)
    os.makedirs(TMP_PARENT, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="profile_broker-", dir=TMP_PARENT)
    raw_broker = os.path.join(TMP_PARENT, f"pyspy_broker_{a.what}.broker.txt")
    raw_client = os.path.join(TMP_PARENT, f"pyspy_broker_{a.what}.client.txt")
    env = {"TIDEMQ_PULL_IN_MEMORY_COUNT_MAX": str(a.batch), "TIDEMQ_PULL_IN_MEMORY_BYTES_MAX": str(1 << 20)}
    try:
        with TidemqSystem(tmp, env=env) as s:
            if a.what == "consume":
                s.produce(body, a.count, a.batch, 120.0, a.in_flight)
            else:
                s.produce(body, 1024, a.batch, 30.0, a.in_flight)
            settle()
            spies = [start_pyspy(s.pid, raw_broker, a.rate, a.native), start_pyspy(os.getpid(), raw_client, a.rate,
                                                                                   a.native)]
            srv0, cli0 = proc_cpu_seconds(s.pid), time.process_time()
            if a.what == "produce":
                r = s.produce(body, a.count, a.batch, a.max_seconds, a.in_flight)
            else:
                r = s.consume(s.stored(), a.batch, a.max_seconds)
            srv, cli = proc_cpu_seconds(s.pid) - srv0, time.process_time() - cli0
            for p in spies:
                stop_pyspy(p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n, dt = r["messages"], r["seconds"]
    md = [f"# py-spy: tidemq {a.what} through tidemq.client", "",
          f"{machine()['date']}; {n:,} messages in {dt:.2f} s = {n / dt:,.0f} msgs/s under the profiler "
          f"(py-spy -r {a.rate}{' --native' if a.native else ' --nonblocking'}). CPU per message: broker "
          f"{srv / n * 1e6:.1f} us ({srv / dt:.2f} cores), client process {cli / n * 1e6:.1f} us ({cli / dt:.2f} cores).",
          "", f"Raw files: `{os.path.relpath(raw_broker)}`, `{os.path.relpath(raw_client)}`.", "",
          "## Broker process", ""] + summarize(raw_broker) + ["## Client (this process)", ""] + summarize(raw_client)
    text = "\n".join(md) + "\n"
    os.makedirs(RESULTS_DIR, exist_ok=True)
    out = os.path.join(RESULTS_DIR, f"pyspy_broker_{a.what}.md")
    with open(out, "w") as fh:
        fh.write(text)
    print(text)
    progress(f"wrote {os.path.relpath(out)}")


if __name__ == "__main__":
    main()
