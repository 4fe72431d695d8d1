"""Where the leader's (or the follower's) CPU goes per message: one sample of bench/replication.py's
systems (``none``: one broker; ``SYNC`` / ``ASYNC``: a leader and one follower), its producer
(``Producer.send_batches``, 256 x 1 KiB, 4 in flight) on a thread, and during ``--seconds``: each
thread's user + system CPU of both brokers and of the client (this process) from /proc (us per message), the frames the leader sent
(a second, KiB each), and optionally ``py-spy record --nonblocking`` of one process (``--pyspy OUT``:
raw collapsed stacks, one line a stack, for grep or a flame graph).

    .venv/bin/python bench/replication_cpu.py --mode SYNC
    .venv/bin/python bench/replication_cpu.py --mode none --pyspy bench/.tmp/none.txt
    .venv/bin/python bench/replication_cpu.py --mode SYNC --pyspy bench/.tmp/f.txt --follower
    .venv/bin/python bench/replication_cpu.py --mode SYNC --member-loop     # the stream on a loop of its own
    TIDEMQ_BENCH_SRC=$(python bench/_report.py snapshot --rev X) .venv/bin/python bench/replication_cpu.py

A tool, not a benchmark (no reference, no goal; py-spy costs the sampled process ~a third of its
rate): compare versions interleaved and say the load (bench/README.md, 32.3 wave 7).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

from _report import scratch_dir
from replication import WARMUP, Group, Single, member_module, produce

from tidemq.client.admin import call

TCK = os.sysconf("SC_CLK_TCK")


def threads(pid: int) -> dict[tuple[str, str], tuple[float, float]]:
    """(thread id, name) -> (user, system) CPU seconds of each thread of ``pid``."""
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/stat") as fh:
                s = fh.read()
        except OSError:
            continue
        name = s.split("(", 1)[1].rsplit(")", 1)[0]
        p = s.rsplit(")", 1)[1].split()
        out[(t, name)] = (int(p[11]) / TCK, int(p[12]) / TCK)
    return out


def report(who: str, before: dict, after: dict, seconds: float, rate: float) -> None:
    user = sum(after[k][0] - before.get(k, (0, 0))[0] for k in after)
    system = sum(after[k][1] - before.get(k, (0, 0))[1] for k in after)
    per = 1e6 / seconds / rate
    print(f"  {who}: {(user + system) / seconds:.2f} cores, {(user + system) * per:.2f} us/msg "
          f"(system {system * per:.2f})")
    for k in sorted(after, key=lambda k: -sum(after[k]) + sum(before.get(k, (0, 0)))):
        d = sum(after[k]) - sum(before.get(k, (0, 0)))
        if d / seconds >= 0.02:
            print(f"    {k[1]:20s} {d / seconds:.2f} cores  {d * per:.2f} us/msg")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("none", "SYNC", "ASYNC"), default="SYNC")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--pyspy", help="write py-spy's raw stacks of the leader (or --follower) here")
    ap.add_argument("--follower", action="store_true", help="py-spy the follower instead of the leader")
    ap.add_argument("--rate", type=int, default=150, help="py-spy samples a second")
    ap.add_argument("--member-loop", action="store_true",
                    help="the group's members run bench/_member_loop_broker.py (the stream on a loop of its own)")
    a = ap.parse_args()
    body = os.urandom(1024)
    with scratch_dir("replication_cpu") as tmp:
        s = Single(os.path.join(tmp, "s")) if a.mode == "none" else Group(os.path.join(tmp, "s"), a.mode,
                                                                                  module=member_module(a))
        try:
            produce(s, body, WARMUP * 8, 256, 30.0, 4)
            res: dict = {}
            th = threading.Thread(target=lambda: res.update(produce(s, body, 10**9, 256, a.seconds + 1.5, 4)))
            th.start()
            time.sleep(0.5)

            def frames() -> tuple[int, int]:
                if s.follower is None:
                    return 0, 0
                f = call(s.leader.endpoint, "Replication")["replication"]["followers"][0]
                return f["frames_sent"], f["bytes_sent"]
            f0, l0 = frames(), threads(s.pid)
            o0 = threads(s.follower.pid) if s.follower else {}
            c0 = threads(os.getpid())
            w0 = time.monotonic()
            if a.pyspy:
                pid = s.follower.pid if a.follower and s.follower else s.pid
                spy = os.path.join(os.path.dirname(sys.executable), "py-spy")
                subprocess.run([spy, "record", "-r", str(a.rate), "--nonblocking", "--threads", "-d",
                                str(int(a.seconds)), "--pid", str(pid), "--format", "raw", "-o", a.pyspy],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            else:
                time.sleep(a.seconds)
            w = time.monotonic() - w0
            l1, o1, f1 = threads(s.pid), (threads(s.follower.pid) if s.follower else {}), frames()
            c1 = threads(os.getpid())
            th.join()
            rate = res["messages"] / res["seconds"]
            load = os.getloadavg()[0]
            print(f"{a.mode}: {rate:,.0f} msgs/s, load {load:.1f}")
            report("leader" if s.follower else "broker", l0, l1, w, rate)
            if s.follower is not None:
                report("follower", o0, o1, w, rate)
                n = f1[0] - f0[0]
                print(f"  frames: {n / w:.0f} a second, {(f1[1] - f0[1]) / max(n, 1) / 1024:.0f} KiB each")
            report("client (this process)", c0, c1, w, rate)
        finally:
            s.stop()


if __name__ == "__main__":
    main()
