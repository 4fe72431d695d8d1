"""The broker's own CPU per send, in process: the handlers of SendMessage (the compiled lane, from
the request's bytes, and the general path, from a decoded request) and of SendRecords, called in a
loop on an event loop with a context stand-in, against a fresh store under bench/.tmp (ASYNC_FLUSH,
topic of 8 queues, 1 KiB bodies). No gRPC, no client, no network: what is left is what the
broker's code costs per request, which a loaded machine disturbs far less than a throughput.

    .venv/bin/python bench/profile_send.py                      # CPU us per request, per variant
    .venv/bin/python bench/profile_send.py --profile one        # + cProfile of one variant (top 25)
    TIDEMQ_BENCH_SRC=$(python bench/_report.py snapshot --rev X) .venv/bin/python bench/profile_send.py

A tool, not a benchmark (no reference, no goal): compare two versions by running it on each with
TIDEMQ_BENCH_SRC, interleaved. Prints one JSON line per variant: CPU microseconds per request and
per message (the median of ``--repeats`` timed loops of ``--requests`` requests each).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import itertools
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time

import _report  # noqa: F401 - puts TIDEMQ_BENCH_SRC first on sys.path
from _report import TMP_PARENT


class Context:
    """What the handlers ask of a grpc.aio context."""

    def peer(self) -> str:
        return "ipv4:127.0.0.1:40000"

    def invocation_metadata(self):
        return (("x-mq-client-id", "bench-client"),)

    def time_remaining(self):
        return 10.0

    def set_trailing_metadata(self, md) -> None:
        pass


BATCH = 256                       # messages per request of the batch kinds
_next_id = itertools.count()      # every message of every request has an id of its own (no resends)


def requests(kind: str, n: int):
    from tidemq.protocol.send_frame import encode_request
    from tidemq.protocol.stubs import pb, spb
    body = b"x" * 1024
    if kind == "records":
        return [encode_request("Bench", [body] * 256, [b"%012d" % next(_next_id) for _ in range(256)])
                for _ in range(n)]
    if kind == "batch":              # SendMessage with BATCH messages, as Producer(raw=False) builds them
        res = pb.Resource(name="Bench")
        return [spb.SendMessageRequest(messages=[pb.Message(topic=res, body=body, system_properties=pb.SystemProperties(
            message_id=f"01BENCH{next(_next_id):020d}", body_encoding=pb.Encoding.IDENTITY,
            message_type=pb.MessageType.NORMAL)) for _ in range(BATCH)]).SerializeToString() for _ in range(n)]
    out = []
    for _ in range(n):
        sp = pb.SystemProperties(message_id=f"01BENCH{next(_next_id):020d}", message_type=pb.MessageType.NORMAL, tag="TagA",
                                 born_host="127.0.0.1")
        sp.born_timestamp.seconds = 1_700_000_000
        m = pb.Message(topic=pb.Resource(name="Bench"), body=body, system_properties=sp)
        if kind == "general":
            m.user_properties["color"] = "red"            # not the common request: the general path
        out.append(spb.SendMessageRequest(messages=[m]).SerializeToString())
    return out


async def run(kind: str, reqs, svc, records, drain_every: int = 0) -> None:
    """``reqs`` sent one after the other; with ``drain_every``, the store's deferred dispatch run after
    every that many requests, as the broker's timer runs it (StorePuts.dispatch_later), so that its
    cost is counted; 0: it runs once, after the timed requests, uncounted."""
    ctx = Context()
    from tidemq.protocol.stubs import spb
    drain = svc.store.drain_dispatch
    every = drain_every or len(reqs) + 1
    if kind == "records":
        for raw in reqs:
            await records.send(raw, ctx)
    elif kind in ("one", "batch"):            # as the server's lane: from the request's bytes
        for i, raw in enumerate(reqs, 1):
            await svc.SendMessageBytes(raw, ctx)
            if i % every == 0:
                drain()
    else:
        for i, raw in enumerate(reqs, 1):
            await svc.SendMessage(spb.SendMessageRequest.FromString(raw), ctx)
            if i % every == 0:
                drain()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--kinds", default="one,general,batch,records",
                    help="one: the common SendMessage (the compiled lane); general: one message the lane does not "
                         "take; batch: SendMessage of 256 messages (Producer(raw=False)); records: SendRecords of 256")
    ap.add_argument("--drain-every", type=int, default=10,
                    help="the deferred dispatch run after every N requests of the one-message kinds, timed with "
                         "them (the broker's timer runs it every dispatch_delay_ms = 5: ~10 sends at ~2k sends/s); "
                         "0: once after the timed loop, not counted (this tool before)")
    ap.add_argument("--profile", default="", help="a kind to profile with cProfile after the timing")
    args = ap.parse_args()
    import uvloop

    from tidemq.broker.produce.send_records import RecordSends
    from tidemq.broker.service import MessagingService
    from tidemq.config import BrokerConfig, StoreConfig
    from tidemq.store import MessageStore
    os.makedirs(TMP_PARENT, exist_ok=True)
    root = tempfile.mkdtemp(prefix="profile-send-", dir=TMP_PARENT)
    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        store = MessageStore(StoreConfig(root_dir=root, segment_size_bytes=256 << 20)).start()
        store.create_topic("Bench", 8)
        svc = loop.run_until_complete(_service(MessagingService, store, BrokerConfig()))
        records = RecordSends(svc.sends)
        for kind in args.kinds.split(","):
            per = BATCH if kind in ("records", "batch") else 1
            n = args.requests // (64 if per > 1 else 1)
            loop.run_until_complete(run(kind, requests(kind, max(1, n // 4)), svc, records))      # warm up
            samples = []
            for r in range(args.repeats):
                reqs = requests(kind, n)
                before = stored(store)
                began = time.process_time()
                loop.run_until_complete(run(kind, reqs, svc, records, args.drain_every))
                samples.append((time.process_time() - began) / n * 1e6)
                want = n * per
                if stored(store) - before != want:     # every request must have stored its messages
                    raise SystemExit(f"{kind}: {stored(store) - before} messages stored, {want} sent")
            per_req = statistics.median(samples)
            per_msg = per_req / per
            print(json.dumps({"kind": kind, "requests": n, "cpu_us_per_request": round(per_req, 2),
                              "cpu_us_per_message": round(per_msg, 3), "samples": [round(s, 2) for s in samples],
                              "drain_every": args.drain_every if per == 1 else 0,
                              "src": os.environ.get("TIDEMQ_BENCH_SRC", "checkout")}), flush=True)
            if kind == args.profile:
                prof = cProfile.Profile()
                reqs = requests(kind, n)
                prof.enable()
                loop.run_until_complete(run(kind, reqs, svc, records, args.drain_every))
                prof.disable()
                pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
        svc.close()
        store.shutdown()
    finally:
        loop.close()
        shutil.rmtree(root, ignore_errors=True)


def stored(store) -> int:
    store.drain_dispatch()
    return sum(store.max_offset("Bench", q) for q in range(store.queue_count("Bench")))


async def _service(cls, store, config):
    return cls(store, config)


if __name__ == "__main__":
    main()
