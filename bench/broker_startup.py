"""What a broker costs before it serves: the imports of `tidemq serve`, and the time to "ready".

    .venv/bin/python bench/_report.py snapshot --rev main       # the reference tree: prints its path
    .venv/bin/python bench/broker_startup.py --ref bench/.tmp/src-XXXX [--rounds 7]

Two variants per round, each in fresh processes, alternating which goes first:
* import: ``python -c "import tidemq.cli.serve, tidemq.broker.server"`` (what `tidemq serve` loads
  before it starts the store), wall seconds to the child's exit and CPU seconds to the imports' end
  (the child's process_time: interpreter start included, exit not);
* ready: ``python -m tidemq.cli.main serve --root <empty> --port 0`` (no metrics port, small segments
  as the tests' brokers), wall seconds until its "ready on" line and the CPU seconds it had used by then
  (/proc/<pid>/stat); it is then stopped with SIGTERM.
The reference is the tree given by ``--ref``, the variant this checkout's src/ (or TIDEMQ_BENCH_SRC);
each ratio is this tree's seconds over the reference's measured next to it: below 1 is faster.
CPU seconds hold still on a busy machine better than wall seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

from _broker import BrokerProcess, proc_cpu_seconds
from _report import BENCH_SRC, Report, progress, scratch_dir, settle

IMPORTS = "import tidemq.cli.serve, tidemq.broker.server"
SMALL = {"TIDEMQ_SEGMENT_SIZE_BYTES": str(4 << 20), "TIDEMQ_INDEX_SLOTS": "1000", "TIDEMQ_INDEX_ENTRIES": "4000",
         "TIDEMQ_METRICS_PORT": "0"}


def env_for(src: str, home: str) -> dict:
    return {**os.environ, "PYTHONPATH": src, "PYTHONUNBUFFERED": "1", "HOME": home, **SMALL}


def measure_import(src: str, tmp: str) -> tuple[float, float]:
    """(wall s, CPU s) of a fresh interpreter importing what `tidemq serve` imports, from its start to the
    end of the imports (the CPU seconds: the child's own process_time, its exit not counted)."""
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", f"import time; {IMPORTS}; print(time.process_time())"],
                         env=env_for(src, tmp), cwd=tmp, check=True, capture_output=True, text=True)
    return time.perf_counter() - t, float(out.stdout.split()[-1])


def measure_ready(src: str, tmp: str) -> tuple[float, float]:
    """(wall s, CPU s) from `tidemq serve` on an empty root to its "ready on" line."""
    root = os.path.join(tmp, "root")
    shutil.rmtree(root, ignore_errors=True)
    t = time.perf_counter()
    b = BrokerProcess(root, tmp, env=SMALL, src=src)
    wall = time.perf_counter() - t
    cpu = proc_cpu_seconds(b.pid)
    b.stop()
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", required=True, help="the reference src/ (a `_report.py snapshot` directory)")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    ref = os.path.abspath(a.ref)
    rep = Report("broker_startup", unit="seconds", reference="reference: import",
                 params={"rounds": a.rounds, "reference_src": ref, "imports": IMPORTS},
                 reference_doc=f"the same measures of the tree at {ref}; ratios: this tree's seconds over the "
                               "reference's, measured next to each other (below 1: faster)")
    for v in ("this: import", "this: import CPU", "this: ready", "this: ready CPU"):
        rep.ratio(v, None)
    with scratch_dir("broker_startup") as tmp:
        for r in range(a.rounds):
            order = [(ref, "reference"), (BENCH_SRC, "this")]
            if r % 2:
                order.reverse()
            got = {}
            for src, who in order:
                settle()
                got[who] = measure_import(src, tmp) + measure_ready(src, tmp)
            (ri, ric, rr, rrc), (ti, tic, tr, trc) = got["reference"], got["this"]
            rep.add("reference: import", ri)
            rep.add("reference: import CPU", ric)
            rep.add("reference: ready", rr)
            rep.add("reference: ready CPU", rrc)
            rep.add("this: import", ti, ref=ri)
            rep.add("this: import CPU", tic, ref=ric)
            rep.add("this: ready", tr, ref=rr)
            rep.add("this: ready CPU", trc, ref=rrc)
            progress(f"round {r}: import {ri:.3f} -> {ti:.3f} s (CPU {ric:.3f} -> {tic:.3f}); "
                     f"ready {rr:.3f} -> {tr:.3f} s (CPU {rrc:.3f} -> {trc:.3f})")
        rep.note(f"load average at the end: {os.getloadavg()}")
        rep.write(tmp)


if __name__ == "__main__":
    main()
