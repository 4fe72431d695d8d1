"""Append throughput of MessageStore (ASYNC_FLUSH) against the raw-mmap floor.

    .venv/bin/python bench/store_append.py                 # 7 rounds, 300k messages per variant per round
    .venv/bin/python bench/store_append.py --quick         # 2 rounds, 50k

Reference ("floor"), measured in every round next to the store: one Python loop
appending into an mmap of a posix_fallocate'd file of the segment's size; per
message a 60-byte header packed with ``struct.pack_into``, the 1 KiB body copied
in by slice assignment, ``zlib.crc32`` of the body. That is the least any
Python append path has to do.

Variants (1 KiB bodies, topic "Bench" with 8 queues, no tags / keys / properties):
``put`` one message at a time, ``put_batch`` of 128 and of 1024 with queue_id=None
(round-robin over the 8 queues), and ``put_batch`` of 1024 with explicit queue ids
(i % 8). Every variant of every round gets a fresh store; Message objects come from
a pre-built pool (building them is the producer's cost, not the store's).

Goal (DESIGN.md section 7): put_batch >= 0.7 x floor.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
import zlib
from typing import NamedTuple

from _common import Options, Sample, only, paired_rounds
from _report import Report, progress, scratch_dir, settle
from _store import BODY_SIZE, POOL, QUEUES, TOPIC, make_bodies, message_pool, store_config

from tidemq.config import MIB
from tidemq.store import Message, MessageStore
from tidemq.store.types import PutStatus

FLOOR_HEADER = struct.Struct(">iiiiiqqqqii")      # size, magic, crc, qid, flag, qoff, phys, born, store, sysflag, bodylen
assert FLOOR_HEADER.size == 60


# Reference ---------------------------------------------------------------------------
def floor_round(path: str, file_size: int, bodies: list[bytes], count: int, max_s: float,
                populated_bytes: int = 0) -> tuple[int, float, float]:
    """Append ``count`` records (or until max_s) into a fallocated mmap; returns (records, seconds,
    share of the time the thread was on a CPU). ``populated_bytes``: that much of the mapping is
    populated (madvise MADV_POPULATE_WRITE) before timing, untimed: the floor without page faults."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, file_size)
        mm = mmap.mmap(fd, file_size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    if populated_bytes:
        mm.madvise(23, 0, min(file_size, populated_bytes))       # MADV_POPULATE_WRITE (Linux 5.14+)
    pool = [bodies[i % len(bodies)] for i in range(POOL)]
    pack_into = FLOOR_HEADER.pack_into
    crc32 = zlib.crc32
    magic = 0xDAA320A7 - (1 << 32)
    now = time.time_ns() // 1_000_000
    pos = 0
    i = 0
    full = False
    settle()
    c0 = time.thread_time()
    t0 = time.perf_counter()
    end = t0 + max_s
    while i < count and not full:
        for body in pool:
            bl = len(body)
            n = 60 + bl
            if pos + n > file_size:
                full = True
                break
            crc = crc32(body) & 0x7FFFFFFF
            pack_into(mm, pos, n, magic, crc, i & 7, 0, i >> 3, pos, now, now, 0, bl)
            mm[pos + 60:pos + n] = body
            pos += n
            i += 1
        if time.perf_counter() >= end:
            break
    dt = time.perf_counter() - t0
    cpu = (time.thread_time() - c0) / dt
    mm.close()
    os.unlink(path)
    return i, dt, cpu


# Store -------------------------------------------------------------------------------
def store_round(root: str, segment_bytes: int, bodies: list[bytes], batch: int, explicit_qid: bool,
                count: int, max_s: float, **overrides) -> dict:
    """messages, seconds, async fsyncs during the run, record bytes, CPU share of the putting thread."""
    store = MessageStore(store_config(root, segment_bytes, **overrides)).start()
    try:
        store.create_topic(TOPIC, QUEUES)
        pool = message_pool(bodies, explicit_qid)
        assert store.put(Message(topic=TOPIC, body=bodies[0], queue_id=0)).ok   # creates the first segment
        settle()
        fsyncs0 = store.async_flush.fsyncs
        log0 = store.commitlog_max_offset
        done = 0
        ok = PutStatus.PUT_OK
        c0 = time.thread_time()
        t0 = time.perf_counter()
        end = t0 + max_s
        if batch == 1:
            put = store.put
            while done < count:
                for m in pool:
                    if put(m).status is not ok:
                        raise RuntimeError("put failed")
                done += POOL
                if time.perf_counter() >= end:
                    break
        else:
            put_batch = store.put_batch
            chunks = [pool[j:j + batch] for j in range(0, POOL, batch)]
            while done < count:
                for c in chunks:
                    if put_batch(c)[-1].status is not ok:
                        raise RuntimeError("put_batch failed")
                done += POOL
                if time.perf_counter() >= end:
                    break
        dt = time.perf_counter() - t0
        cpu = (time.thread_time() - c0) / dt
        fsyncs = store.async_flush.fsyncs - fsyncs0
        stored = sum(store.max_offset(TOPIC, q) for q in range(QUEUES)) - 1
        if stored != done:
            raise RuntimeError(f"store holds {stored} messages, {done} were put")
        warm = store.stats().get("warm", {})
        return {"messages": done, "seconds": dt, "fsyncs": fsyncs, "cpu_share": cpu,
                "record_bytes": (store.commitlog_max_offset - log0) / done,
                "warm_overtaken_bytes": warm.get("overtaken_bytes_total", 0)}
    finally:
        store.shutdown()


class Variant(NamedTuple):
    name: str
    batch: int                   # 1: put, else put_batch of that many
    explicit_qid: bool           # queue i % 8 (else None: round-robin)
    goal: float | None
    overrides: dict              # store config


VARIANTS = [
    Variant("put", 1, False, None, {}),
    Variant("put_batch(128)", 128, False, 0.7, {}),
    Variant("put_batch(1024)", 1024, False, 0.7, {}),
    Variant("put_batch(1024) queue_id=i%8", 1024, True, 0.7, {}),
    # information: the same with the segment warmer (off by default), against the same floor
    Variant("put_batch(1024) warm on", 1024, False, None, {"commitlog_warm_enabled": True}),
]
# information: the floor itself with its pages populated before timing (the reference is unchanged)
FLOOR_POPULATED = "floor, pages populated before timing"


def main() -> None:
    ap = Options(__doc__, rounds=7, count=300_000, count_help="messages per variant per round (upper bound)",
                 max_seconds=8.0, max_seconds_help="time bound per variant per round",
                 quick={"rounds": 2, "count": 50_000}, quick_help="2 rounds of 50k: a smoke run").store_options()
    ap.add_argument("--no-floor-populated", dest="floor_populated", action="store_false",
                    help=f"skip the information row {FLOOR_POPULATED!r}")
    a = ap.parse_args()
    seg = a.segment_mib * MIB
    variants = only(VARIANTS, a.only)
    bodies = make_bodies()
    rep = Report("store_append", unit="msgs/s", reference="floor",
                 reference_doc="Python loop over an mmap of a posix_fallocate'd file: per 1 KiB message "
                               "a 60-byte header by struct.pack_into, the body copied in, zlib.crc32 of the body",
                 params={"body_bytes": BODY_SIZE, "queues": QUEUES, "rounds": a.rounds,
                         "count_per_round_max": a.count, "max_seconds_per_round": a.max_seconds,
                         "segment_size_bytes": seg, "flush_disk_type": "ASYNC_FLUSH", "index_enabled": False,
                         "floor_record_bytes": 60 + BODY_SIZE})
    for v in variants:
        rep.ratio(v.name, v.goal)
    if a.floor_populated:
        rep.ratio(FLOOR_POPULATED, None)
    record_bytes = 0.0
    with scratch_dir("store_append") as tmp:
        floor_path = os.path.join(tmp, "floor")

        def floor_populated(r: int) -> None:
            if not a.floor_populated:
                return
            n, dt, cpu = floor_round(floor_path, seg, bodies, a.count, a.max_seconds)
            floor = n / dt
            n2, dt2, cpu2 = floor_round(floor_path, seg, bodies, a.count, a.max_seconds,
                                        populated_bytes=(a.count + POOL) * (60 + BODY_SIZE))
            rep.add(FLOOR_POPULATED, n2 / dt2, ref=floor, messages=n2, cpu_share=cpu2)
            progress(f"round {r + 1}/{a.rounds}: floor {floor:,.0f}, {FLOOR_POPULATED} {n2 / dt2:,.0f} "
                     f"msgs/s: {n2 / dt2 / floor:.3f} x")

        def floor() -> Sample:
            n, dt, cpu = floor_round(floor_path, seg, bodies, a.count, a.max_seconds)
            return Sample(n / dt, {"messages": n, "cpu_share": cpu}, f"floor {n / dt:,.0f} (cpu {cpu:.2f})")

        def store(v: Variant) -> dict:
            return store_round(os.path.join(tmp, "store"), seg, bodies, v.batch, v.explicit_qid, a.count,
                               a.max_seconds, **v.overrides)

        def row(v: Variant, ref: Sample, res: dict) -> Sample:
            nonlocal record_bytes
            n, dt, fs = res["messages"], res["seconds"], res["fsyncs"]
            record_bytes = res["record_bytes"]
            return Sample(n / dt, {"messages": n, "async_fsyncs": fs, "cpu_share": res["cpu_share"],
                                   "warm_overtaken_bytes": res["warm_overtaken_bytes"]},
                          f"{v.name} {n / dt:,.0f} msgs/s ({n} in {dt:.2f}s, cpu {res['cpu_share']:.2f}, "
                          f"{fs} background fsyncs): {n / dt / ref.value:.3f} x")

        floor_round(floor_path, seg, bodies, 20_000, 2.0)          # warm-up, not reported
        paired_rounds(rep, a.rounds, variants, floor, store, row, scratch=tmp, round_start=floor_populated)
        rep.params["store_record_bytes"] = round(record_bytes, 1)
        rep.note("The floor is measured right before every variant sample (a fresh file each time), the variant "
                 "on a fresh store; ratio = median over rounds of variant / the floor measured next to it.")
        rep.note(f"Store records are {record_bytes:.0f} bytes (measured: 91-byte RocketMQ v1 header, topic, "
                 f"properties incl. the record-CRC tail), the floor's {60 + BODY_SIZE}.")
        rep.note("cpu_share: CPU time of the timing thread / wall time of the sample; well below 1 means it "
                 "waited (page faults on I/O, the GIL, or other processes on this machine's CPUs).")
        rep.note("Before every timed sample: os.sync() and a 0.3 s pause (untimed), so no sample pays for "
                 "the previous one's writeback.")
        rep.note("The store's ASYNC_FLUSH thread fdatasyncs every 500 ms during the run (async_fsyncs); "
                 "the floor never flushes.")
        rep.note("Page faults: the floor writes into fresh pages of a fallocated file and takes the first-write "
                 "fault of every page on its timed thread. The store writes a batch with one pwrite "
                 "(commit_log.append): no fault, and no zeroing of the pages it fills whole (a single put goes "
                 "into the mapping and takes the faults as the floor does), so for batches the floor is no "
                 "longer the least a Python append path must do. The reference is unchanged; "
                 f"'{FLOOR_POPULATED}' (information) is the floor with its pages populated untimed, and "
                 "'put_batch(1024) warm on' the store with its segment warmer (commitlog_warm_enabled, off by "
                 "default: madvise MADV_POPULATE_WRITE ahead of the writer on another thread), both against the "
                 "same floor: store / populated floor = the store's ratio / that row's ratio. "
                 "warm_overtaken_bytes: bytes the writer put into pages the warmer had not reached.")
        rep.write(tmp)


if __name__ == "__main__":
    main()
