"""Compare versions of src/ on the broker's produce or consume path, interleaved: CPU per message.

    .venv/bin/python bench/_report.py snapshot                  # freeze HEAD (repeat at other commits)
    .venv/bin/python bench/compare_broker.py bench/.tmp/src-AAAA src --what produce --rounds 4

Each round runs one sample per version, in a fresh process with TIDEMQ_BENCH_SRC pointing at it
(``src`` for the checkout), alternating the order every round. A sample: a broker subprocess on a
fresh store (bench/_broker.TidemqSystem), then tidemq.client producing ``--count`` 1 KiB messages
(256 per batch, 4 in flight) or, for ``consume``, reading them back with iter_records(256,
prefetch 2). Reported per version, medians over rounds: msgs/s, the broker's CPU per message (all
its threads), its main thread's (the event loop: what one Python process is bound by) and the
client process's. A tool (no reference, no goal): CPU per message is steadier than msgs/s here.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))


def _task_ticks(pid: int) -> dict[str, int]:
    out = {}
    for t in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(t + "/stat") as fh:
                parts = fh.read().rsplit(")", 1)[1].split()
            out[os.path.basename(t)] = int(parts[11]) + int(parts[12])
        except (OSError, IndexError, ValueError):
            pass
    return out


def sample(what: str, count: int) -> dict:
    """One sample in this process (TIDEMQ_BENCH_SRC set by the caller): JSON-able figures."""
    sys.path.insert(0, BENCH)
    from _broker import TidemqSystem, proc_cpu_seconds
    body = os.urandom(1024)
    hz = os.sysconf("SC_CLK_TCK")
    with tempfile.TemporaryDirectory(prefix="compare-broker-", dir=os.path.join(BENCH, ".tmp")) as wd:
        with TidemqSystem(wd) as s:
            s.produce(body, 1024 if what == "produce" else count, 256, 120.0, 4)
            pid = s.broker.pid
            a, c0, u0 = _task_ticks(pid), proc_cpu_seconds(pid), time.process_time()
            if what == "produce":
                r = s.produce(body, count, 256, 30.0, 4)
            else:
                r = s.consume(count, 256, 30.0)
            b, c1, u1 = _task_ticks(pid), proc_cpu_seconds(pid), time.process_time()
    n = r["messages"]
    main = (b.get(str(pid), 0) - a.get(str(pid), 0)) / hz
    return {"msgs_per_s": n / r["seconds"], "broker_us": (c1 - c0) / n * 1e6, "main_us": main / n * 1e6,
            "client_us": (u1 - u0) / n * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("versions", nargs="*", help="snapshot directories (`_report.py snapshot`), or src")
    ap.add_argument("--what", choices=("produce", "consume"), default="produce")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--count", type=int, default=600_000)
    ap.add_argument("--sample", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.sample:
        print(json.dumps(sample(a.what, a.count)), flush=True)
        return
    if not a.versions:
        raise SystemExit("give the versions to compare")
    versions = [os.path.abspath(v) for v in a.versions]
    got: dict[str, list[dict]] = {v: [] for v in versions}
    for r in range(a.rounds):
        for v in (versions if r % 2 == 0 else versions[::-1]):
            env = dict(os.environ, TIDEMQ_BENCH_SRC=v)
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--sample", "--what", a.what,
                                  "--count", str(a.count)], env=env, capture_output=True, text=True, check=True)
            d = json.loads(out.stdout.strip().splitlines()[-1])
            got[v].append(d)
            print(f"round {r + 1}/{a.rounds} {os.path.basename(v)}: "
                  + ", ".join(f"{k} {x:,.2f}" for k, x in d.items()), flush=True)
    for v in versions:
        med = {k: statistics.median(d[k] for d in got[v]) for k in got[v][0]}
        print(f"{os.path.basename(v)} (median of {a.rounds}): " + ", ".join(f"{k} {x:,.2f}" for k, x in med.items()))


if __name__ == "__main__":
    main()
