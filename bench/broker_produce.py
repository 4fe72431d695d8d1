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
paired round by round. Goal (issue 14; issue 6 asked for 2 x): tidemq >= 3 x the best durable peer. Also reported:
CPU cores used by the server process and by this (client) process during each sample.
"""

from __future__ import annotations

import os

from _broker import TidemqSystem
from _common import Options, best_peer_doc, broker_rounds, cores_note, install_peers, timed_sample
from _report import Report, scratch_dir
from peers import PEERS, versions

GOAL = 3.0          # issue 14 (issue 6 asked for 2)
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
        r = timed_sample(s, s.produce, body, a.count, a.batch, a.info_seconds if info else a.max_seconds,
                         a.in_flight, **kw)
        stored = s.stored()
        if stored != WARMUP + r["messages"]:
            raise RuntimeError(f"{s.name}: holds {stored} messages after {WARMUP} + {r['messages']} were acknowledged")
    return r


def main() -> None:
    ap = Options(__doc__, rounds=5, count=300_000, count_help="messages per sample (upper bound)", max_seconds=15.0,
                 quick={"rounds": 1, "count": 20_000}, quick_help="1 round of 20k: a smoke run")
    ap.broker_options(batch_help="messages per request / pipeline / publish batch",
                      in_flight_help="requests (tidemq) / batches (nats) under way",
                      info_seconds_help=f"time bound of '{INFO_VARIANT}'")
    ap.add_argument("--no-info-variant", dest="info_variant", action="store_false", help=f"skip '{INFO_VARIANT}'")
    a = ap.parse_args()
    peers = install_peers(a)
    body = os.urandom(a.body_bytes)
    rep = Report("broker_produce", unit="msgs/s", reference="best peer", reference_doc=best_peer_doc("produce", peers),
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
    run = {n: (lambda d, n=n: {n: measure(syst[n], d, body, a, info=n == INFO_VARIANT)}) for n in syst}
    with scratch_dir("broker_produce") as tmp:
        broker_rounds(rep, tmp, a.rounds, run, list(syst), peers)
        rep.note(cores_note("sample"))
        rep.write(tmp)


if __name__ == "__main__":
    main()
