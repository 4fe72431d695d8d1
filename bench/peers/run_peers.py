"""Install (if missing), start, measure and stop the durable peers alone: a check that they work
here and what they do, outside the broker benchmarks (which measure them in their own runs).

    .venv/bin/python bench/peers/run_peers.py                 # 3 rounds x 200k msgs of 1 KiB, <= 20 s per sample
    .venv/bin/python bench/peers/run_peers.py --quick         # 1 round x 20k
    .venv/bin/python bench/peers/run_peers.py --install-only  # apt-get install the servers if missing

Per round and peer: a fresh server in a scratch directory under bench/.tmp, produce ``--count``
messages in batches of ``--batch``, then consume them all from the beginning.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _report import progress, scratch_dir, settle  # noqa: E402
from peers import PEERS, ensure_installed, versions  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--in-flight", type=int, default=4)
    ap.add_argument("--body-bytes", type=int, default=1024)
    ap.add_argument("--max-seconds", type=float, default=20.0)
    ap.add_argument("--only", default="", help="redis,nats (default: both)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--install-only", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.count = 1, 20_000
    paths = ensure_installed(progress)
    if a.install_only:
        print(json.dumps({"paths": paths, "versions": versions()}, indent=2))
        return
    body = os.urandom(a.body_bytes)
    names = [n for n in PEERS if not a.only or n in a.only.split(",")]
    res: dict[str, dict[str, list[float]]] = {n: {"produce": [], "consume": []} for n in names}
    with scratch_dir("peers") as tmp:
        for r in range(a.rounds):
            for n in names:
                d = os.path.join(tmp, f"{n}-{r}")
                with PEERS[n](d) as peer:
                    settle()
                    p = peer.produce(body, a.count, a.batch, a.max_seconds, a.in_flight)
                    stored = peer.stored()
                    settle()
                    c = peer.consume(stored, a.batch, a.max_seconds)
                pr, cr = p["messages"] / p["seconds"], c["messages"] / c["seconds"]
                res[n]["produce"].append(pr)
                res[n]["consume"].append(cr)
                progress(f"round {r + 1}/{a.rounds} {n}: produce {pr:,.0f} msgs/s ({p['messages']} in "
                         f"{p['seconds']:.2f}s), consume {cr:,.0f} msgs/s ({c['messages']} of {stored} in "
                         f"{c['seconds']:.2f}s)")
    print("| peer | produce msgs/s (median) | consume msgs/s (median) | rounds |")
    print("|---|---|---|---|")
    for n in names:
        print(f"| {PEERS[n].label} | {statistics.median(res[n]['produce']):,.0f} | "
              f"{statistics.median(res[n]['consume']):,.0f} | {a.rounds} |")
    print(json.dumps(versions()))


if __name__ == "__main__":
    main()
