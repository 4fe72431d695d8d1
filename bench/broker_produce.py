"""Produce throughput of the broker: tidemq.client batches against a tidemq broker subprocess,
versus the best durable peer (Redis streams, NATS JetStream) measured in the same run.

    .venv/bin/python bench/broker_produce.py            # 5 rounds, <= 300k msgs or 15 s per sample
    .venv/bin/python bench/broker_produce.py --quick    # 1 round of 20k: a smoke run

Every round measures every system once, in a rotating order, each on a fresh server with a
fresh data directory under bench/.tmp (started and warmed up untimed, stopped afterwards):

* ``tidemq``: ``tidemq serve`` (ASYNC_FLUSH, the defaults) in a subprocess, topic ``Bench``
  with 8 queues, ``Producer.send_batches``: 1 KiB bodies, ``--batch`` (256) per request
  (``/tidemq.Data/SendRecords``: one compact frame per batch), ``--in-flight`` (4) requests
  under way, every result checked OK.
* ``tidemq SendMessage`` (for information, no goal): the same through the protocol's
  SendMessage (``Producer(raw=False)``: one protobuf Message per message), on a broker of its
  own, bounded by ``--info-seconds``.
* ``redis``: redis-server, AOF with appendfsync everysec, XADD pipelined ``--batch`` at a time.
* ``nats``: nats-server -js (file store), publish_async in batches of ``--batch``, every ack
  awaited, ``--in-flight`` batches outstanding.

Reference: **the best peer of each round** (the higher of redis and nats). tidemq's ratio is
paired round by round. Goal (issue 6): tidemq >= 2 x the best durable peer. Also reported:
CPU cores used by the server process and by this (client) process during each sample.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _broker import TidemqSystem, proc_cpu_seconds  # noqa: E402
from _report import Report, progress, scratch_dir, settle  # noqa: E402
from peers import PEERS, ensure_installed, versions  # noqa: E402

GOAL = 2.0
WARMUP = 1024
INFO_VARIANT = "tidemq SendMessage"


def systems(peers: list[str], info: bool) -> dict:
    out = {"tidemq": TidemqSystem}
    if info:
        out[INFO_VARIANT] = TidemqSystem
    out.update({p: PEERS[p] for p in peers})
    return out


def measure(cls, workdir: str, body: bytes, a, info: bool = False) -> dict:
    kw = {"raw": False} if info else {}
    with cls(workdir) as s:
        w = s.produce(body, WARMUP, a.batch, 30.0, a.in_flight, **kw)   # untimed: first segment / file, connections
        if w["messages"] != WARMUP:
            raise RuntimeError(f"{s.name}: warm-up sent {w['messages']}")
        settle()
        srv0, cli0 = proc_cpu_seconds(s.pid), time.process_time()
        r = s.produce(body, a.count, a.batch, a.info_seconds if info else a.max_seconds, a.in_flight, **kw)
        r["server_cores"] = (proc_cpu_seconds(s.pid) - srv0) / r["seconds"]
        r["client_cores"] = (time.process_time() - cli0) / r["seconds"]
        stored = s.stored()
        if stored != WARMUP + r["messages"]:
            raise RuntimeError(f"{s.name}: holds {stored} messages after {WARMUP} + {r['messages']} were acknowledged")
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=300_000, help="messages per sample (upper bound)")
    ap.add_argument("--max-seconds", type=float, default=15.0, help="time bound per sample")
    ap.add_argument("--batch", type=int, default=256, help="messages per request / pipeline / publish batch")
    ap.add_argument("--in-flight", type=int, default=4, help="requests (tidemq) / batches (nats) under way")
    ap.add_argument("--body-bytes", type=int, default=1024)
    ap.add_argument("--peers", default="redis,nats")
    ap.add_argument("--info-seconds", type=float, default=5.0, help=f"time bound of '{INFO_VARIANT}'")
    ap.add_argument("--no-info-variant", dest="info_variant", action="store_false", help=f"skip '{INFO_VARIANT}'")
    ap.add_argument("--quick", action="store_true", help="1 round of 20k: a smoke run")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.count = 1, 20_000
    peers = [p for p in a.peers.split(",") if p]
    ensure_installed(progress)
    body = os.urandom(a.body_bytes)
    rep = Report("broker_produce", unit="msgs/s", reference="best peer",
                 reference_doc="the higher produce rate of the durable peers in the same round: "
                               + "; ".join(PEERS[p].label for p in peers),
                 params={"body_bytes": a.body_bytes, "batch": a.batch, "in_flight": a.in_flight,
                         "rounds": a.rounds, "count_per_sample_max": a.count, "max_seconds_per_sample": a.max_seconds,
                         "tidemq": "tidemq serve, defaults (ASYNC_FLUSH, 1 GiB segments, index on), topic of 8 queues; "
                                   "tidemq.client SendRecords",
                         "info_seconds": a.info_seconds,
                         "peers": versions()})
    rep.ratio("tidemq", GOAL)
    if a.info_variant:
        rep.ratio(INFO_VARIANT, None)
    syst = systems(peers, a.info_variant)
    names = list(syst)
    with scratch_dir("broker_produce") as tmp:
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            got = {}
            for n in order:
                res = measure(syst[n], os.path.join(tmp, f"{n.replace(' ', '_')}-{r}"), body, a,
                              info=n == INFO_VARIANT)
                got[n] = res
                progress(f"round {r + 1}/{a.rounds} {n}: {res['messages'] / res['seconds']:,.0f} msgs/s "
                         f"({res['messages']} in {res['seconds']:.2f}s; server {res['server_cores']:.2f} cores, "
                         f"client {res['client_cores']:.2f})")
            rates = {n: got[n]["messages"] / got[n]["seconds"] for n in names}
            best = max(rates[p] for p in peers)
            rep.add("best peer", best)
            for n in names:
                rep.add(n, rates[n], ref=best, messages=got[n]["messages"], server_cores=got[n]["server_cores"],
                        client_cores=got[n]["client_cores"])
            progress(f"round {r + 1}/{a.rounds}: tidemq / best peer = {rates['tidemq'] / best:.2f}")
        rep.note("server_cores / client_cores: CPU seconds of the server process / of this benchmark process "
                 "(the client, with gRPC's threads) per second of the sample; the machine has "
                 f"{os.cpu_count()} CPUs.")
        rep.write(tmp)


if __name__ == "__main__":
    main()
