#!/usr/bin/env python3
"""The failover figures: a broker group of three on a real ZooKeeper (Debian's package, installed
when missing), the official Python client producing without pause through the group's leader
ports, the leader killed with SIGKILL ``--kills`` times (a follower takes over each time, the old
leader comes back and follows); then everything read back from the leader at the end.

    .venv/bin/python scripts/failover.py --kills 10 --mode SYNC [--json]
    .venv/bin/python scripts/failover.py --kills 10 --mode ASYNC

Prints per kill the time to the election and to the first write accepted after the kill, the lag
the leader reported for the follower that took over just before the kill, and the totals:
acknowledged, lost, stored twice (tests/support/failover.py does the work; the test suite runs it
with 3 kills).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tests.support.brokers  # noqa: E402,F401  (points HOME at a scratch directory before the client loads)
from tests.support import failover  # noqa: E402
from tests.support.zookeeper import ZooKeeperServer, ensure_installed  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--mode", choices=("SYNC", "ASYNC"), default="SYNC")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    import logging
    for name in ("asyncio", "concurrent.futures"):        # the client's futures of killed brokers
        logging.getLogger(name).setLevel(logging.CRITICAL)
    why = ensure_installed()
    if why is not None:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    zk = ZooKeeperServer()
    try:
        with tempfile.TemporaryDirectory(prefix="tidemq-failover-") as d:
            report = failover.run(d, zk.endpoint, a.kills, a.mode, log=lambda s: None if a.json else print(s))
    finally:
        zk.stop()
    if a.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"\n{a.mode} replication, 3 brokers, {a.kills} kills of the leader (SIGKILL)")
        print(f"acknowledged {report['acked']}, failed sends {report['failed_sends']} {report['send_errors']}, "
              f"stored {report['stored']}")
        print(f"lost (acknowledged, not stored) {report['lost']}, stored twice {report['duplicated']}, "
              f"every member's log equal: {report['logs_equal']}")
        if "first_write_s" in report:
            w, e = report["first_write_s"], report["elected_s"]
            print(f"kill -> new leader elected: p50 {e['p50']} s, max {e['max']} s")
            print(f"kill -> first write accepted: p50 {w['p50']} s, max {w['max']} s, min {w['min']} s")
        if a.mode == "ASYNC":
            print("per kill: lag reported for the new leader just before the kill (bytes):",
                  [k["lag_bytes_at_kill"] for k in report["kills"]])
            print("per kill: acknowledged messages lost (bytes, about):",
                  [(k["lost"], k["lost_bytes"]) for k in report["kills"]])
    return 0 if report["lost"] == 0 or a.mode == "ASYNC" else 1


if __name__ == "__main__":
    sys.exit(main())
