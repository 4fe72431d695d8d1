#!/usr/bin/env python3
"""The partition figures: a broker group of three on a real ZooKeeper (Debian's package, installed
when missing; tickTime 100 ms, 1.5 s sessions), links cut by TCP proxies, the official Python client
producing without pause through the group's leader ports; the leader cut from ZooKeeper only, from
its followers only, from both, stopped (SIGSTOP) past its session, each held ``--hold`` seconds
(tests/support/partition.py does the work; the test suite runs it with SYNC).

    .venv/bin/python scripts/partitions.py --mode SYNC [--hold 4.5] [--json]
    .venv/bin/python scripts/partitions.py --mode ASYNC

Prints per scenario: acknowledged, lost (acknowledged, not stored), stored twice, served to a
consumer (one on every member) and later cut, the time from the fault to the first write accepted
that began after it, and the longest time between two acknowledged writes while it lasted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tests.support.brokers  # noqa: E402,F401  (points HOME at a scratch directory before the client loads)
from tests.support import partition  # noqa: E402
from tests.support.zookeeper import ZooKeeperServer, ensure_installed  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("SYNC", "ASYNC"), default="SYNC")
    ap.add_argument("--hold", type=float, default=4.5, help="seconds each fault lasts")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    import logging
    for name in ("asyncio", "concurrent.futures"):        # the client's futures of stopped brokers
        logging.getLogger(name).setLevel(logging.CRITICAL)
    why = ensure_installed()
    if why is not None:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    zk = ZooKeeperServer()
    try:
        with tempfile.TemporaryDirectory(prefix="tidemq-partitions-") as d:
            report = partition.run(d, zk.endpoint, a.mode, a.hold, log=lambda s: None)
    finally:
        zk.stop()
    if a.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"{a.mode} replication, 3 brokers, each fault held {a.hold} s (ZooKeeper session 1.5 s)")
        print(f"{'scenario':34} {'acked':>6} {'lost':>5} {'twice':>6} {'served, cut':>12} {'first write s':>14} "
              f"{'longest gap s':>14}")
        for r in report["scenarios"]:
            print(f"{r['scenario']:34} {r['acked']:6} {r['lost']:5} {r['twice']:6} {r['served_then_cut']:12} "
                  f"{r['to_first_write_s']!s:>14} {r['longest_gap_s']!s:>14}")
        print(f"in all: acknowledged {report['acked']}, lost {report['lost']}, stored twice {report['twice']}, "
              f"served to consumers {report['served']} (then cut: {report['served_then_cut']}), "
              f"failed sends {report['failed_sends']} {report['send_errors']}, every log equal: {report['logs_equal']}")
    return 0 if report["lost"] == 0 or a.mode == "ASYNC" else 1


if __name__ == "__main__":
    sys.exit(main())
