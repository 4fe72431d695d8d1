"""Read throughput of MessageStore.get against a raw scan of the same segment files.

    .venv/bin/python bench/store_read.py                   # 1 M messages, 5 rounds
    .venv/bin/python bench/store_read.py --quick           # 100k messages, 2 rounds

Set-up (timed for information only): 1 M messages of 1 KiB into topic "Bench"
with 8 queues (put_batch of 1024, round-robin), ASYNC_FLUSH, 1 GiB segments.
The data stays in the page cache (the store counts it "in memory": well within
access_message_in_memory_ratio_max_percent of RAM).

Reference ("raw scan"), measured right before every store sample: a Python loop
over read-only mmaps of the store's commit-log segment files (mapped and touched
once before timing), per record one ``struct.unpack_from`` of the 88-byte header
(TOTALSIZE, MAGIC, ..., BODYLEN) and a slice of the body (a bytes copy, as get
copies bodies out), then on to pos + TOTALSIZE. Log order, no consume queue.

Variants: every message of every queue read back by ``get`` (queue by queue,
offset 0 to the end, following next_offset) with max_count=32 (RocketMQ's
default pull size) and max_count=256 (pull_max_count_in_memory raised to 256,
pull_max_bytes_in_memory and max_bytes to 1 MiB).

Goal (DESIGN.md section 7): >= 0.5 x the raw scan.
"""

from __future__ import annotations

import argparse
import mmap
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import Report, progress, scratch_dir, settle  # noqa: E402
from store_append import BODY_SIZE, QUEUES, TOPIC, make_bodies  # noqa: E402

from tidemq.config import MIB, StoreConfig  # noqa: E402
from tidemq.store import Message, MessageStore  # noqa: E402
from tidemq.store.types import GetStatus  # noqa: E402

HEADER = struct.Struct(">iiiiiqqiq8sq8siqi")   # TOTALSIZE .. BODYLEN (RocketMQ v1)
assert HEADER.size == 88
MAGIC = 0xDAA320A7 - (1 << 32)


def fill(store: MessageStore, bodies: list[bytes], count: int) -> float:
    pool = [Message(topic=TOPIC, body=bodies[i % len(bodies)]) for i in range(1024)]
    t0 = time.perf_counter()
    done = 0
    while done < count:
        k = min(1024, count - done)
        rs = store.put_batch(pool[:k])
        if not rs[-1].ok:
            raise RuntimeError(f"put_batch failed: {rs[-1]}")
        done += k
    return time.perf_counter() - t0


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


def get_all(store: MessageStore, max_count: int, max_bytes: int, max_s: float) -> tuple[int, int, int]:
    """(messages, body bytes, get calls) reading every queue from offset 0 to its end."""
    get = store.get
    found = GetStatus.FOUND
    n = nbytes = calls = 0
    end = time.perf_counter() + max_s
    for q in range(QUEUES):
        off = 0
        while True:
            g = get("BenchGroup", TOPIC, q, off, max_count=max_count, max_bytes=max_bytes)
            calls += 1
            if g.status is not found:
                break
            ms = g.messages
            n += len(ms)
            for m in ms:
                nbytes += len(m.body)
            off = g.next_offset
            if time.perf_counter() >= end:
                return n, nbytes, calls
    return n, nbytes, calls


VARIANTS = [
    # name, max_count, max_bytes, goal
    ("get(max_count=32)", 32, 256 * 1024, 0.5),
    ("get(max_count=256)", 256, 1 * MIB, 0.5),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1_000_000, help="messages written, then read back")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=30.0, help="time bound per sample")
    ap.add_argument("--segment-mib", type=int, default=1024, choices=(256, 1024))
    ap.add_argument("--quick", action="store_true", help="100k messages, 2 rounds")
    a = ap.parse_args()
    if a.quick:
        a.count, a.rounds = 100_000, 2
    seg = a.segment_mib * MIB
    bodies = make_bodies()
    rep = Report("store_read", unit="msgs/s", reference="raw scan",
                 reference_doc="Python loop over read-only mmaps of the same commit-log segment files: per record "
                               "HEADER.unpack_from (88 bytes, TOTALSIZE..BODYLEN) and a bytes slice of the body, "
                               "in log order",
                 params={"messages": a.count, "body_bytes": BODY_SIZE, "queues": QUEUES, "rounds": a.rounds,
                         "segment_size_bytes": seg, "index_enabled": False, "pull_max_count_in_memory": 256,
                         "pull_max_bytes_in_memory": 1 * MIB, "max_seconds_per_sample": a.max_seconds})
    for name, _c, _b, goal in VARIANTS:
        rep.ratio(name, goal)
    with scratch_dir("store_read") as tmp:
        cfg = StoreConfig(root_dir=os.path.join(tmp, "store"), segment_size_bytes=seg, index_enabled=False,
                          flush_disk_type="ASYNC_FLUSH", default_queue_count=QUEUES,
                          pull_max_count_in_memory=256, pull_max_bytes_in_memory=1 * MIB)
        store = MessageStore(cfg).start()
        maps: list[mmap.mmap] = []
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
            for r in range(a.rounds):
                for name, mc, mb, _goal in VARIANTS:
                    c0 = time.thread_time()
                    t0 = time.perf_counter()
                    n, nb = raw_scan(maps)
                    dt = time.perf_counter() - t0
                    ref = n / dt
                    rep.add("raw scan", ref, cpu_share=(time.thread_time() - c0) / dt)
                    c0 = time.thread_time()
                    t0 = time.perf_counter()
                    n, nb2, calls = get_all(store, mc, mb, a.max_seconds)
                    dt = time.perf_counter() - t0
                    cpu = (time.thread_time() - c0) / dt
                    if n != a.count and dt < a.max_seconds:
                        raise RuntimeError(f"get returned {n} messages, {a.count} were written")
                    rep.add(name, n / dt, ref=ref, messages=n, get_calls=calls, msgs_per_call=n / calls,
                            cpu_share=cpu)
                    progress(f"round {r + 1}/{a.rounds}: raw scan {ref:,.0f} msgs/s, {name} {n / dt:,.0f} msgs/s "
                             f"({calls:,} calls): {n / dt / ref:.3f} x")
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
