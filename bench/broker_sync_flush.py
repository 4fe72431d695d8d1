"""Durable sends against fast ones through the official client: the official RocketMQ 5 Python
client's ``send_async`` against ``tidemq serve`` under SYNC_FLUSH (a send answered once its record
is fsynced; group commit shares one fsync among everything appended while the last one ran)
versus the same under ASYNC_FLUSH (answered once appended), in the same round.

    .venv/bin/python bench/broker_sync_flush.py            # 5 rounds, <= 6000 sends or 15 s per client
    .venv/bin/python bench/broker_sync_flush.py --quick    # 1 round of 1000 sends per client: a smoke run

Per round, every (flush mode, in flight) pair once, the order rotating: a fresh ``tidemq serve``
(topic ``Bench`` of 8 queues, segments of 64 MiB, ``TIDEMQ_FLUSH_DISK_TYPE``) and ``--clients``
client processes at once (bench/_official.py ``client_run``), each keeping at most ``in flight``
sends of a 1 KiB message unanswered (``Producer.send_async``), every answer checked and every
message id distinct.

Goal (issue 32): SYNC_FLUSH >= 0.8 x ASYNC_FLUSH of the same round, with 64 and with 256 in
flight. Reported with it: messages per commit-log fsync (the broker's ``tidemq_flushes_total``
during the sample), the mean time a send is unanswered, the broker's CPU.
"""

from __future__ import annotations

import argparse
import os

from _official import measure
from _report import BENCH_SRC, Report, progress, scratch_dir

GOAL = 0.8
MODES = ("ASYNC_FLUSH", "SYNC_FLUSH")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=6000, help="sends per client process per sample (upper bound)")
    ap.add_argument("--max-seconds", type=float, default=15.0, help="time bound of each client's timed sends")
    ap.add_argument("--body-bytes", type=int, default=1024)
    ap.add_argument("--clients", type=int, default=2, help="client processes sending at once")
    ap.add_argument("--in-flight", default="64,256", help="comma-separated: sends unanswered per client")
    ap.add_argument("--quick", action="store_true", help="1 round of 1000 sends per client: a smoke run")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.count = 1, 1000
    in_flights = [int(x) for x in a.in_flight.split(",") if x]
    rep = Report("broker_sync_flush", unit="msgs/s", reference=f"ASYNC_FLUSH, {in_flights[0]} in flight",
                 reference_doc="the same clients against tidemq serve with ASYNC_FLUSH (answered once appended), "
                               "measured in the same round",
                 params={"body_bytes": a.body_bytes, "rounds": a.rounds, "count_per_client_max": a.count,
                         "max_seconds_per_client": a.max_seconds, "clients": a.clients, "in_flight": in_flights,
                         "send": "rocketmq-python-client Producer.send_async, one 1 KiB message per request",
                         "tidemq": "tidemq serve, topic of 8 queues, segments of 64 MiB"})
    for n in in_flights:
        if n != in_flights[0]:
            rep.ratio(f"ASYNC_FLUSH, {n} in flight", None)
        rep.ratio(f"SYNC_FLUSH, {n} in flight", GOAL)
    pairs = [(m, n) for n in in_flights for m in MODES]
    with scratch_dir("broker_sync_flush") as tmp:
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        base = dict(os.environ, HOME=home, PYTHONUNBUFFERED="1", TIDEMQ_SEGMENT_SIZE_BYTES=str(64 << 20),
                    TIDEMQ_SYNC_FLUSH_TIMEOUT_MS="60000")
        base["PYTHONPATH"] = BENCH_SRC + (os.pathsep + base["PYTHONPATH"] if base.get("PYTHONPATH") else "")
        for r in range(a.rounds):
            order = pairs[r % len(pairs):] + pairs[:r % len(pairs)]
            got: dict[tuple[str, int], dict] = {}
            for mode, n in order:
                env = dict(base, TIDEMQ_FLUSH_DISK_TYPE=mode)
                res = measure("tidemq", os.path.join(tmp, f"{mode}-{n}-{r}"), env, a.count, a.max_seconds,
                              a.body_bytes, in_flight=n, clients=a.clients)
                got[(mode, n)] = res
                rate = res["messages"] / res["seconds"]
                per = res["messages"] / res["fsyncs"] if res["fsyncs"] else float("nan")
                progress(f"round {r + 1}/{a.rounds} {mode} {n} in flight: {rate:,.0f} msgs/s ({res['messages']} in "
                         f"{res['seconds']:.2f}s, {res['send_ms']:.2f} ms unanswered, {per:.1f} msgs per fsync, "
                         f"broker {res['server_cores_avg']:.2f} cores)")
            ref = got[("ASYNC_FLUSH", in_flights[0])]
            ref_rate = ref["messages"] / ref["seconds"]
            rep.add(rep.reference, ref_rate, **_cols(ref))
            line = []
            for n in in_flights:
                asy, syn = got[("ASYNC_FLUSH", n)], got[("SYNC_FLUSH", n)]
                ar, sr = asy["messages"] / asy["seconds"], syn["messages"] / syn["seconds"]
                if n != in_flights[0]:
                    rep.add(f"ASYNC_FLUSH, {n} in flight", ar, ref=ref_rate, **_cols(asy))
                rep.add(f"SYNC_FLUSH, {n} in flight", sr, ref=ar, **_cols(syn))
                line.append(f"{n} in flight SYNC / ASYNC = {sr / ar:.3f}")
            progress(f"round {r + 1}/{a.rounds}: " + ", ".join(line))
        rep.note("Each SYNC_FLUSH row's ratio: its rate over the ASYNC_FLUSH rate with the same sends in flight, "
                 "measured in the same round (the goal, >= 0.8); each ASYNC_FLUSH row's ratio is against the "
                 "reference (ASYNC_FLUSH with the fewest in flight).")
        rep.note("msgs_per_fsync: messages sent during the sample over the broker's commit-log fsyncs meanwhile "
                 "(tidemq_flushes_total; under ASYNC_FLUSH the periodic flush's). send_ms: the mean time a send is "
                 "unanswered (clients x in flight / rate). server_cores: the broker's CPU per second of the "
                 "clients' lives.")
        rep.write(tmp)


def _cols(res: dict) -> dict:
    per = res["messages"] / res["fsyncs"] if res["fsyncs"] else float("nan")
    return {"msgs_per_fsync": per, "send_ms": res["send_ms"], "server_cores": res["server_cores_avg"],
            "server_us_per_msg": res["server_us_per_msg"]}


if __name__ == "__main__":
    main()
