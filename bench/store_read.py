"""Read throughput of MessageStore.get against a raw scan of the same segment files.

    .venv/bin/python bench/store_read.py                   # 1 M messages, 5 rounds
    .venv/bin/python bench/store_read.py --quick           # 100k messages, 2 rounds

Set-up (timed for information only): 1 M messages of 1 KiB into topic "Bench"
with 8 queues (put_batch of 1024, round-robin), ASYNC_FLUSH, 1 GiB segments.
The data stays in the page cache (the store counts it "in memory": well within
access_message_in_memory_percent_max of RAM).

Reference ("raw scan"), measured right before every store sample: a Python loop
over read-only mmaps of the store's commit-log segment files (mapped and touched
once before timing), per record one ``struct.unpack_from`` of the 88-byte header
(TOTALSIZE, MAGIC, ..., BODYLEN) and a slice of the body (a bytes copy, as get
copies bodies out), then on to pos + TOTALSIZE. Log order, no consume queue.

Variants: every message of every queue read back by ``get`` (queue by queue,
offset 0 to the end, following next_offset) with max_count=32 (RocketMQ's
default pull size) and max_count=256 (pull_in_memory_count_max raised to 256,
pull_in_memory_bytes_max and max_bytes to 1 MiB).

A third variant reads every queue with ``get_raw`` (max_count=4096, 16 MiB: the records as
stored bytes, what PullRecords and the Spark source read); no goal, for information.

Goal (DESIGN.md section 7): >= 0.5 x the raw scan.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from typing import NamedTuple

from _common import Options, Sample, only, paired_rounds
from _report import Report, progress, scratch_dir, settle
from _store import BODY_SIZE, QUEUES, TOPIC, fill, get_all, make_bodies, store_config

from tidemq.config import MIB
from tidemq.store import MessageStore

HEADER = struct.Struct(">iiiiiqqiq8sq8siqi")   # TOTALSIZE .. BODYLEN (RocketMQ v1)
assert HEADER.size == 88
MAGIC = 0xDAA320A7 - (1 << 32)


def map_segments(commitlog_dir: str) -> list[mmap.mmap]:
    maps = []
    for name in sorted(os.listdir(commitlog_dir)):
        path = os.path.join(commitlog_dir, name)
        if not name.isdigit() or os.path.getsize(path) == 0:
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            maps.append(mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ))
        finally:
            os.close(fd)
    return maps


def raw_scan(maps: list[mmap.mmap]) -> tuple[int, int]:
    """(records, body bytes) of every record, in log order."""
    unpack = HEADER.unpack_from
    n = 0
    nbytes = 0
    for mm in maps:
        pos = 0
        limit = len(mm) - 88
        while pos <= limit:
            h = unpack(mm, pos)
            if h[1] != MAGIC:          # BLANK (end of segment) or zeroes (end of log)
                break
            blen = h[14]
            body = mm[pos + 88:pos + 88 + blen]
            nbytes += len(body)
            n += 1
            pos += h[0]
    return n, nbytes


class Variant(NamedTuple):
    name: str
    max_count: int
    max_bytes: int
    goal: float | None
    raw: bool = False            # get_raw (records as stored bytes, PullRecords / Spark) instead of get


VARIANTS = [
    Variant("get(max_count=32)", 32, 256 * 1024, 0.5),
    Variant("get(max_count=256)", 256, 1 * MIB, 0.5),
    Variant("get_raw(max_count=4096)", 4096, 16 * MIB, None, raw=True),
]


def get_raw_all(store: MessageStore, max_count: int, max_bytes: int, max_s: float) -> tuple[int, int, int]:
    """(records, record bytes, get_raw calls) reading every queue from offset 0 to its end."""
    n = nbytes = calls = 0
    end = time.perf_counter() + max_s
    for q in range(QUEUES):
        off = 0
        while True:
            g = store.get_raw(TOPIC, q, off, max_count=max_count, max_bytes=max_bytes)
            calls += 1
            if g.records is None:
                break
            n += len(g.records[0])
            nbytes += len(g.records[1])
            off = g.next_offset
            if time.perf_counter() >= end:
                return n, nbytes, calls
    return n, nbytes, calls


def main() -> None:
    ap = Options(__doc__, rounds=5, count=1_000_000, count_help="messages written, then read back", max_seconds=30.0,
                 quick={"count": 100_000, "rounds": 2}, quick_help="100k messages, 2 rounds").store_options()
    a = ap.parse_args()
    seg = a.segment_mib * MIB
    variants = only(VARIANTS, a.only)
    bodies = make_bodies()
    rep = Report("store_read", unit="msgs/s", reference="raw scan",
                 reference_doc="Python loop over read-only mmaps of the same commit-log segment files: per record "
                               "HEADER.unpack_from (88 bytes, TOTALSIZE..BODYLEN) and a bytes slice of the body, "
                               "in log order",
                 params={"messages": a.count, "body_bytes": BODY_SIZE, "queues": QUEUES, "rounds": a.rounds,
                         "segment_size_bytes": seg, "index_enabled": False, "pull_in_memory_count_max": 256,
                         "pull_in_memory_bytes_max": 1 * MIB, "max_seconds_per_sample": a.max_seconds})
    for v in variants:
        rep.ratio(v.name, v.goal)
    with scratch_dir("store_read") as tmp:
        cfg = store_config(os.path.join(tmp, "store"), seg, pull_in_memory_count_max=256,
                           pull_in_memory_bytes_max=1 * MIB)
        store = MessageStore(cfg).start()
        maps: list[mmap.mmap] = []

        def scan() -> Sample:
            c0 = time.thread_time()
            t0 = time.perf_counter()
            n, _nb = raw_scan(maps)
            dt = time.perf_counter() - t0
            return Sample(n / dt, {"cpu_share": (time.thread_time() - c0) / dt}, f"raw scan {n / dt:,.0f} msgs/s")

        def get(v: Variant) -> tuple[int, int, float, float]:
            c0 = time.thread_time()
            t0 = time.perf_counter()
            n, _nb, calls = (get_raw_all if v.raw else get_all)(store, v.max_count, v.max_bytes, a.max_seconds)
            dt = time.perf_counter() - t0
            return n, calls, dt, (time.thread_time() - c0) / dt

        def row(v: Variant, ref: Sample, res: tuple[int, int, float, float]) -> Sample:
            n, calls, dt, cpu = res
            if n != a.count and dt < a.max_seconds:
                raise RuntimeError(f"get returned {n} messages, {a.count} were written")
            return Sample(n / dt, {"messages": n, "get_calls": calls, "msgs_per_call": n / calls, "cpu_share": cpu},
                          f"{v.name} {n / dt:,.0f} msgs/s ({calls:,} calls): {n / dt / ref.value:.3f} x")

        try:
            store.create_topic(TOPIC, QUEUES)
            dt = fill(store, bodies, a.count)
            progress(f"wrote {a.count:,} messages in {dt:.1f}s ({a.count / dt:,.0f} msgs/s), "
                     f"{store.commitlog_max_offset / 2**20:,.0f} MiB of log in {len(store.segments)} segment(s)")
            rep.params["fill_msgs_per_s"] = round(a.count / dt)
            rep.params["log_bytes"] = store.commitlog_max_offset
            rep.params["segments"] = len(store.segments)
            maps = map_segments(cfg.commitlog_paths[0])
            n, _ = raw_scan(maps)                       # warm-up: fault the reference's mappings in
            if n != a.count:
                raise RuntimeError(f"raw scan found {n} records, {a.count} were written")
            get_all(store, 32, 256 * 1024, 10.0)      # warm-up: consume-queue files and code paths
            settle(1.0)                                # the fill's dirty pages written back before timing
            paired_rounds(rep, a.rounds, variants, scan, get, row)
        finally:
            for mm in maps:
                mm.close()
            store.shutdown()
        rep.note("One store, written once; the raw scan is measured right before every get sample; "
                 "ratio = median over rounds of get / the raw scan next to it.")
        rep.note("cpu_share: CPU time of the reading thread / wall time; below 1 means it was kept off a CPU "
                 "(other processes on this 2-CPU machine, the store's background threads).")
        rep.note("Both sides copy each body out (get: bytes(...) in decode_record; scan: an mmap slice). get also "
                 "reads consume-queue units (pread), decodes topic / properties and builds a StoredMessage.")
        rep.write(tmp)


if __name__ == "__main__":
    main()
