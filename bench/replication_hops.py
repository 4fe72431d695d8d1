"""Where a SYNC put's time goes on its way through replication: one sample of bench/replication.py's
SYNC group (a leader and one follower on this machine, ``Producer.send_batches``, 1 KiB bodies) run
by bench/_traced_broker.py, which timestamps each hop in both processes (CLOCK_MONOTONIC); prints the
medians and p90s of the hops, frames matched by their offsets.

    .venv/bin/python bench/replication_hops.py                       # 7 s, 4 requests of 256 in flight
    .venv/bin/python bench/replication_hops.py --in-flight 16 --seconds 10
    .venv/bin/python bench/replication_hops.py --member-loop         # the stream on a loop of its own (wave 9)
    TIDEMQ_BENCH_SRC=$(python bench/_report.py snapshot --rev X) .venv/bin/python bench/replication_hops.py

A tool, not a benchmark (no reference, no goal; the wrappers cost a little on every hop): compare two
versions by running it on each, interleaved, and say the load (bench/README.md, 32.3).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import statistics
import time

from _report import scratch_dir
from replication import WARMUP, Group, produce


def _ms(xs: list[float]) -> str:
    if not xs:
        return "-"
    xs = sorted(xs)
    return f"{statistics.median(xs) * 1e3:.2f} ms (p90 {xs[int(len(xs) * 0.9)] * 1e3:.2f})"


def _first_at_or_after(times: list[float], t: float) -> int | None:
    i = bisect.bisect_left(times, t)
    return i if i < len(times) else None


def hops(lead: list, fol: list, skip_s: float) -> list[tuple[str, str]]:
    """The table's rows from the two members' events (bench/_traced_broker.py), the first ``skip_s``
    seconds of puts left out (warm-up)."""
    puts = sorted((e for e in lead if e[0] == "put"), key=lambda e: e[1])
    t0 = puts[0][1] + skip_s if puts else 0.0
    puts = [e for e in puts if e[1] >= t0]
    sends = sorted((e for e in lead if e[0] == "send" and e[1] >= t0 and e[5] > 0), key=lambda e: e[1])
    sent_at = {e[4]: e for e in sends}                                 # frame offset -> its send
    got = {e[3]: e for e in fol if e[0] == "received" and e[4] > 0}   # frame offset -> received
    passes = sorted((e for e in fol if e[0] == "pass" and e[1] >= t0), key=lambda e: e[1])
    acks = sorted((e for e in fol if e[0] == "ack" and e[1] >= t0), key=lambda e: e[1])
    confirms = sorted((e for e in lead if e[0] == "confirm" and e[1] >= t0), key=lambda e: e[1])
    requests = [e for e in lead if e[0] == "request" and e[1] >= t0]
    frame_offs = sorted(sent_at)
    rows: list[tuple[str, str]] = []
    span = max(e[2] for e in requests) - min(e[1] for e in requests) if requests else 0.0
    rows.append(("requests (SendRecords) in the sample / a second",
                 f"{len(requests)} / {len(requests) / span:.0f}" if span else "-"))
    if requests and span:
        inside = sum(e[2] - e[1] for e in requests) / span
        rows.append(("requests in the leader at once, on average", f"{inside:.2f}"))
    rows.append(("a request's whole time in the leader", _ms([e[2] - e[1] for e in requests])))
    rows.append(("a SYNC put's wait for its follower", _ms([e[2] - e[1] for e in puts])))
    rows.append(("frames (DATA, RAW) / mean KiB", f"{len(sends)} / {statistics.mean(e[5] for e in sends) / 1024:.0f}"
                 if sends else "-"))
    rows.append(("a frame's write, begun -> its completion seen", _ms([e[2] - e[1] for e in sends])))
    rows.append(("between two frames' writes", _ms([b[1] - a[2] for a, b in itertools.pairwise(sends)])))
    # a put's frame: the one that carries its end (the last byte before it)
    appended_to_send, send_to_got = [], []
    for p in puts:
        i = bisect.bisect_right(frame_offs, p[3] - 1) - 1
        if i < 0:
            continue
        s = sent_at[frame_offs[i]]
        if s[4] + s[5] >= p[3] and s[1] >= p[1]:
            appended_to_send.append(s[1] - p[1])
    rows.append(("put appended -> the write of its frame begins", _ms(appended_to_send)))
    for off, s in sent_at.items():
        r = got.get(off)
        if r is not None:
            send_to_got.append(r[1] - s[1])
    rows.append(("frame write begins -> the follower has it (decoded)", _ms(send_to_got)))
    rows.append(("the follower had it -> the leader sees the write complete",
                 _ms([s[2] - got[off][1] for off, s in sent_at.items() if off in got])))
    pass_starts = [e[1] for e in passes]
    rows.append(("follower: frame received -> its pass begins",
                 _ms([pass_starts[i] - r[1] for r in got.values() if r[1] >= t0
                      and (i := _first_at_or_after(pass_starts, r[1])) is not None])))
    rows.append(("follower: the pass (check, write, units) / frames a pass",
                 f"{_ms([e[2] - e[1] for e in passes])} / {statistics.mean(e[5] for e in passes):.2f}"
                 if passes else "-"))
    ack_starts = [e[1] for e in acks]
    rows.append(("follower: pass done -> its ACK's write begins",
                 _ms([ack_starts[i] - e[2] for e in passes if (i := _first_at_or_after(ack_starts, e[2])) is not None])))
    rows.append(("follower: an ACK's write, begun -> completion seen", _ms([e[2] - e[1] for e in acks])))
    conf_by_off: dict[int, float] = {}
    for e in confirms:
        conf_by_off.setdefault(e[2], e[1])
    rows.append(("ACK write begins -> the leader's confirm",
                 _ms([conf_by_off[e[3]] - e[1] for e in acks if e[3] in conf_by_off])))
    conf_offs = sorted(conf_by_off)
    resume = []
    for p in puts:
        i = bisect.bisect_left(conf_offs, p[3])
        if i < len(conf_offs):
            at = min(conf_by_off[o] for o in conf_offs[i:i + 4])
            if at <= p[2]:
                resume.append(p[2] - at)
    rows.append(("the confirm that covers a put -> the put resumes", _ms(resume)))
    ack_offs = [e[3] for e in acks]                    # (in time order: a stream's ACKs never go back)
    ack_to_resume = []
    for p in puts:
        i = bisect.bisect_left(ack_offs, p[3])
        if i < len(acks) and acks[i][1] <= p[2]:
            ack_to_resume.append(p[2] - acks[i][1])
    rows.append(("the ACK that covers a put, its write begins -> the put resumes (the two rows above, per put)",
                 _ms(ack_to_resume)))
    rows.append(("ACKs / frames", f"{len(acks)} / {len(sends)}"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=7.0)
    ap.add_argument("--in-flight", type=int, default=4)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--skip-seconds", type=float, default=1.0, help="the first puts left out (warm-up)")
    ap.add_argument("--member-loop", action="store_true",
                    help="the members run bench/_member_loop_broker.py (the stream on a loop of its own), traced")
    a = ap.parse_args()
    body = os.urandom(1024)
    with scratch_dir("replication_hops") as tmp:
        work = os.path.join(tmp, "g")
        g = Group(work, "SYNC", module="_member_loop_broker" if a.member_loop else "_traced_broker", trace=True)
        try:
            produce(g, body, WARMUP, a.batch, 30.0, a.in_flight)
            r = produce(g, body, 10 ** 12, a.batch, a.seconds, a.in_flight)
            time.sleep(1.2)                                # the members' last events written
        finally:
            g.stop()
        events = {}
        for m in ("leader", "follower"):
            with open(os.path.join(work, f"trace-{m}.json")) as f:
                events[m] = json.load(f)
    print(f"SYNC, 1 follower: {r['messages'] / r['seconds']:,.0f} msgs/s, {a.in_flight} x {a.batch} in flight, "
          f"load {os.getloadavg()[0]:.1f}\n")
    print("| hop | median (p90) |\n|---|---|")
    for name, v in hops(events["leader"], events["follower"], a.skip_seconds):
        print(f"| {name} | {v} |")


if __name__ == "__main__":
    main()
