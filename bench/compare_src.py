"""Compare versions of src/ on one benchmark, interleaved, on this noisy machine.

    .venv/bin/python bench/_report.py snapshot                  # freeze HEAD (repeat at other commits)
    .venv/bin/python bench/compare_src.py bench/.tmp/src-AAAA bench/.tmp/src-BBBB \\
        --bench store_append --args="--only put_batch(1024) --count 200000" --rounds 5

Each round runs the benchmark once per snapshot (``--rounds 1`` plus ``--args``), in a fresh
process with TIDEMQ_BENCH_SRC pointing at the snapshot and its results redirected to a scratch
directory, alternating the order every round; then prints, per variant, the median over rounds
of each snapshot's ratio (store / the reference measured next to it inside the same process)
and the median msgs/s. Writes bench/results/compare_<bench>.{json,md}. Ratios, not absolute
rates, are what compare across processes and minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

from _report import BENCH_DIR, RESULTS_DIR, TMP_PARENT, machine, progress


def label(snap: str) -> str:
    try:
        with open(os.path.join(snap, "REVISION.json")) as fh:
            r = json.load(fh)
        return f"{r.get('head', '?')}{'+wt' if r.get('src_dirty') else ''} ({r.get('tree_sha1', '?')})"
    except OSError:
        return os.path.basename(snap.rstrip("/"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("snapshots", nargs="+", help="directories made by `_report.py snapshot`")
    ap.add_argument("--bench", default="store_append", choices=("store_append", "store_sync_flush", "store_read",
                                                                "broker_sync_flush", "official_client"))
    ap.add_argument("--args", default="", help="extra arguments for the benchmark (one round each run)")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    snaps = [os.path.abspath(s) for s in a.snapshots]
    for s in snaps:
        if not os.path.isdir(os.path.join(s, "tidemq")):
            raise SystemExit(f"{s}: not a snapshot (no tidemq/ inside)")
    ratios: dict[str, dict[str, list[float]]] = {s: {} for s in snaps}
    rates: dict[str, dict[str, list[float]]] = {s: {} for s in snaps}
    os.makedirs(TMP_PARENT, exist_ok=True)
    for r in range(a.rounds):
        order = snaps if r % 2 == 0 else list(reversed(snaps))
        for s in order:
            with tempfile.TemporaryDirectory(prefix="compare-", dir=TMP_PARENT) as out:
                env = dict(os.environ, TIDEMQ_BENCH_SRC=s, TIDEMQ_BENCH_RESULTS=out)
                cmd = [sys.executable, os.path.join(BENCH_DIR, f"{a.bench}.py"), "--rounds", "1",
                       *shlex.split(a.args)]
                subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                with open(os.path.join(out, f"{a.bench}.json")) as fh:
                    d = json.load(fh)
            for v in d["variants"]:
                if v["variant"] == d["reference"]:
                    continue
                ratios[s].setdefault(v["variant"], []).append(v["ratio"])
                rates[s].setdefault(v["variant"], []).append(v["median"])
            progress(f"round {r + 1}/{a.rounds}: {label(s)}: " + ", ".join(
                f"{k} {ratios[s][k][-1]:.3f} x" for k in ratios[s]))
    variants = list(ratios[snaps[0]])
    lines = [f"# compare_{a.bench}", "", f"{machine()['date']} · nproc {machine()['nproc']} · "
             f"`{a.bench}.py --rounds 1 {a.args}` x {a.rounds} rounds per snapshot, interleaved", "",
             "| variant | " + " | ".join(f"{label(s)} ratio | msgs/s" for s in snaps) + " |",
             "|---|" + "---|---|" * len(snaps)]
    out = {"bench": a.bench, "args": a.args, "rounds": a.rounds, "machine": machine(), "snapshots": []}
    for s in snaps:
        out["snapshots"].append({"snapshot": os.path.relpath(s, os.path.dirname(BENCH_DIR)), "label": label(s),
                                 "ratio_median": {k: statistics.median(x) for k, x in ratios[s].items()},
                                 "ratios": ratios[s], "msgs_per_s_median": {k: statistics.median(x)
                                                                            for k, x in rates[s].items()}})
    for v in variants:
        cells = []
        for s in snaps:
            cells.append(f"{statistics.median(ratios[s][v]):.3f}")
            cells.append(f"{statistics.median(rates[s][v]):,.0f}")
        lines.append(f"| `{v}` | " + " | ".join(cells) + " |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    os.makedirs(RESULTS_DIR, exist_ok=True)
    with open(os.path.join(RESULTS_DIR, f"compare_{a.bench}.md"), "w") as fh:
        fh.write(text)
    with open(os.path.join(RESULTS_DIR, f"compare_{a.bench}.json"), "w") as fh:
        json.dump(out, fh, indent=2)
        fh.write("\n")


if __name__ == "__main__":
    main()
