"""SYNC_FLUSH throughput of MessageStore with 8 producer threads, against batched fdatasync.

    .venv/bin/python bench/store_sync_flush.py             # 5 rounds, 5 s per sample
    .venv/bin/python bench/store_sync_flush.py --quick     # 2 rounds, 2 s per sample

Reference ("write+fdatasync/1000"), measured right before every store sample: one
thread appending to a posix_fallocate'd file with ``os.write`` of a prebuilt
1000 x 1 KiB (~1 MiB) buffer followed by ``os.fdatasync``: one fsync per 1,000
messages, the throughput a durable log gets from batching alone.

Variants (SYNC_FLUSH: a put returns once its bytes are fsynced; group commit
shares one fsync among everything appended while the previous one ran):
8 threads each calling ``put`` one message at a time; 8 threads each calling
``put_batch`` of 16; and, for information, 8 threads with ``put_batch`` of 128.
Reported: messages/s, fsyncs per message (``store.group_commit.fsyncs``), the
duration of the store's commit-log fsyncs (timed through the store's FileIO
seam), the per-call latency p50 / p99, and the group-commit ceiling: the
reference loop with one fsync per threads x batch messages, i.e. what a perfect
group commit of these producers could reach on this disk.

Issue 32's goal: ``8 threads x put_batch(16)`` under SYNC_FLUSH >= 0.7 x the same 8 threads under
ASYNC_FLUSH (``8 threads x put_batch(16) ASYNC_FLUSH``, measured right before it in each round): the
row ``SYNC / ASYNC, 8 threads x put_batch(16)``.

For information, ``1 thread x put_batch(16) ASYNC_FLUSH``: the same calls with no fsync
waited for, from one thread: the writers' own bound.

Goal (DESIGN.md section 7): >= 0.5 x the reference.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from typing import NamedTuple

from _common import Options, Sample, only, paired_rounds
from _report import Report, percentile, scratch_dir, settle
from _store import BODY_SIZE, QUEUES, TOPIC, make_bodies, store_config

from tidemq.config import MIB
from tidemq.io import OsFileIO
from tidemq.store import Message, MessageStore
from tidemq.store.types import PutStatus

REF_BATCH = 1000


class TimedFileIO(OsFileIO):
    """The real file system, timing every fsync of a commit-log segment (the store's own seam:
    MessageStore(config, fio=...); nothing in src/ changes)."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: dict[int, str] = {}
        self.log_fsync_s: list[float] = []
        self.other_fsyncs = 0
        self.recording = False

    def open(self, path: str, create: bool = False) -> int:
        fd = super().open(path, create)
        self.paths[fd] = path
        return fd

    def fsync(self, handle: int) -> None:
        t = time.perf_counter()
        super().fsync(handle)
        if self.recording:
            if f"{os.sep}commitlog{os.sep}" in self.paths.get(handle, ""):
                self.log_fsync_s.append(time.perf_counter() - t)
            else:
                self.other_fsyncs += 1


def reference_round(path: str, file_size: int, bodies: list[bytes], count: int, max_s: float,
                    batch: int = REF_BATCH) -> tuple[int, float, int]:
    """(messages, seconds, fsyncs): os.write of ``batch`` bodies at once, then os.fdatasync."""
    buf = b"".join(bodies[i % len(bodies)] for i in range(batch))
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, file_size)
        done = fsyncs = 0
        pos = 0
        settle()
        t0 = time.perf_counter()
        end = t0 + max_s
        while done < count and pos + len(buf) <= file_size:
            n = os.write(fd, buf)
            if n != len(buf):
                raise OSError("short write")
            os.fdatasync(fd)
            pos += n
            done += batch
            fsyncs += 1
            if time.perf_counter() >= end:
                break
        dt = time.perf_counter() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    return done, dt, fsyncs


def store_round(root: str, segment_bytes: int, bodies: list[bytes], threads: int, batch: int,
                count_per_thread: int, max_s: float, flush_disk_type: str = "SYNC_FLUSH") -> dict:
    fio = TimedFileIO()
    store = MessageStore(store_config(root, segment_bytes, flush_disk_type=flush_disk_type), fio=fio).start()
    try:
        store.create_topic(TOPIC, QUEUES)
        assert store.put(Message(topic=TOPIC, body=bodies[0], queue_id=0)).ok   # first segment, first fsync
        gc = store.group_commit or _NoGroupCommit()
        barrier = threading.Barrier(threads + 1)
        counts = [0] * threads
        bad = [0] * threads
        lats: list[list[float]] = [[] for _ in range(threads)]
        stop_at = [0.0]
        ok = PutStatus.PUT_OK

        def producer(k: int) -> None:
            pool = [Message(topic=TOPIC, body=bodies[(k + i) % len(bodies)]) for i in range(max(batch, 64))]
            chunks = [pool[j:j + batch] for j in range(0, len(pool) - batch + 1, batch)]
            lat = lats[k]
            pc = time.perf_counter
            barrier.wait()
            end = stop_at[0]
            n = 0
            if batch == 1:
                put = store.put
                while n < count_per_thread:
                    for m in pool:
                        t = pc()
                        if put(m).status is not ok:
                            bad[k] += 1
                        t2 = pc()
                        lat.append(t2 - t)
                        n += 1
                    if t2 >= end:
                        break
            else:
                put_batch = store.put_batch
                while n < count_per_thread:
                    for c in chunks:
                        t = pc()
                        rs = put_batch(c)
                        t2 = pc()
                        if rs[-1].status is not ok:
                            bad[k] += len(rs)
                        lat.append(t2 - t)
                        n += len(c)
                    if t2 >= end:
                        break
            counts[k] = n

        ts = [threading.Thread(target=producer, args=(k,), daemon=True) for k in range(threads)]
        for t in ts:
            t.start()
        settle()
        f0 = gc.fsyncs
        stop_at[0] = time.perf_counter() + max_s
        fio.recording = True
        barrier.wait()
        t0 = time.perf_counter()
        for t in ts:
            t.join(timeout=max_s + 60)
        dt = time.perf_counter() - t0
        fio.recording = False
        fsyncs = gc.fsyncs - f0
        fs_times = fio.log_fsync_s
        total = sum(counts)
        all_lat = [x for ls in lats for x in ls]
        stored = sum(store.max_offset(TOPIC, q) for q in range(QUEUES)) - 1
        if stored != total:
            raise RuntimeError(f"store holds {stored} messages, {total} were put")
        return {"messages": total, "seconds": dt, "fsyncs": fsyncs, "not_ok": sum(bad),
                "log_fsync_ms": statistics.mean(fs_times) * 1e3 if fs_times else float("nan"),
                "log_fsync_busy": sum(fs_times) / dt, "other_fsyncs": fio.other_fsyncs,
                "lat_p50_ms": statistics.median(all_lat) * 1e3 if all_lat else float("nan"),
                "lat_p99_ms": percentile(all_lat, 99) * 1e3 if all_lat else float("nan")}
    finally:
        store.shutdown()


class _NoGroupCommit:
    fsyncs = 0                   # ASYNC_FLUSH: no put waits for an fsync


class Variant(NamedTuple):
    name: str
    batch: int                   # 1: put, else put_batch of that many
    goal: float | None
    threads: int | None = None   # None: --threads
    flush_disk_type: str = "SYNC_FLUSH"


ASYNC_16 = "8 threads x put_batch(16) ASYNC_FLUSH"
SYNC_16 = "8 threads x put_batch(16)"
SYNC_VS_ASYNC = "SYNC / ASYNC, 8 threads x put_batch(16)"    # issue 32's goal, paired in the same round

VARIANTS = [
    Variant("8 threads x put", 1, 0.5),
    # the same calls with no fsync waited for, measured right before the SYNC row: the pair is issue 32's goal
    Variant(ASYNC_16, 16, None, None, "ASYNC_FLUSH"),
    Variant(SYNC_16, 16, 0.5),
    Variant("8 threads x put_batch(128)", 128, None),     # for information: how far group commit + batching go
    # for information: the writers' own bound, no fsync waited for at all (what put_batch(16) costs)
    Variant("1 thread x put_batch(16) ASYNC_FLUSH", 16, None, 1, "ASYNC_FLUSH"),
]


def main() -> None:
    ap = Options(__doc__, rounds=5, count=400_000,
                 count_help="messages per sample at most (reference; store: split over threads)", max_seconds=5.0,
                 quick={"rounds": 2, "max_seconds": 2.0}, quick_help="2 rounds of 2 s").store_options()
    ap.add_argument("--threads", type=int, default=8)
    a = ap.parse_args()
    seg = a.segment_mib * MIB
    variants = only(VARIANTS, a.only)
    bodies = make_bodies()
    rep = Report("store_sync_flush", unit="msgs/s", reference="write+fdatasync/1000",
                 reference_doc="one thread, os.write of 1000 x 1 KiB (~1 MiB) then os.fdatasync, "
                               "into a posix_fallocate'd file",
                 params={"body_bytes": BODY_SIZE, "queues": QUEUES, "threads": a.threads, "rounds": a.rounds,
                         "max_seconds_per_sample": a.max_seconds, "count_per_sample_max": a.count,
                         "segment_size_bytes": seg, "flush_disk_type": "SYNC_FLUSH", "index_enabled": False})
    for v in variants:
        rep.ratio(v.name, v.goal)
    if {ASYNC_16, SYNC_16} <= {v.name for v in variants}:
        rep.ratio(SYNC_VS_ASYNC, 0.7)
    last_async: list[float] = []        # the ASYNC_16 rate of this round, paired with the SYNC_16 one after it
    with scratch_dir("store_sync_flush") as tmp:
        ref_path = os.path.join(tmp, "ref")

        def reference() -> Sample:
            n, dt, fs = reference_round(ref_path, seg, bodies, a.count, a.max_seconds)
            return Sample(n / dt, {"fsyncs_per_msg": fs / n, "ms_per_fsync_round": dt / fs * 1e3},
                          f"reference {n / dt:,.0f} msgs/s ({dt / fs * 1e3:.2f} ms per write+fsync)")

        def store(v: Variant) -> dict:
            threads = v.threads or a.threads
            return store_round(os.path.join(tmp, "store"), seg, bodies, threads, v.batch,
                               max(a.count // threads, v.batch), a.max_seconds, v.flush_disk_type)

        def row(v: Variant, ref: Sample, res: dict) -> Sample:
            rate = res["messages"] / res["seconds"]
            if v.name == ASYNC_16:
                last_async[:] = [rate]
            elif v.name == SYNC_16 and last_async:
                rep.add(SYNC_VS_ASYNC, rate, ref=last_async.pop(), msgs_per_fsync=res["messages"] / max(res["fsyncs"], 1))
            if v.flush_disk_type != "SYNC_FLUSH":
                return Sample(rate, {"lat_p50_ms": res["lat_p50_ms"], "lat_p99_ms": res["lat_p99_ms"],
                                     "not_ok": res["not_ok"]},
                              f"{v.name} {rate:,.0f} msgs/s: {rate / ref.value:.3f} x (no fsync waited for)")
            # the group-commit ceiling: every producer's put in one fsync (threads x batch per fsync)
            cn, cdt, _cfs = reference_round(ref_path, seg, bodies, a.count, min(a.max_seconds, 2.0),
                                            batch=a.threads * v.batch)
            ceiling = cn / cdt
            return Sample(rate, {"fsyncs_per_msg": res["fsyncs"] / res["messages"],
                                 "msgs_per_fsync": res["messages"] / max(res["fsyncs"], 1),
                                 "ms_per_fsync_round": res["seconds"] / max(res["fsyncs"], 1) * 1e3,
                                 "log_fsync_ms": res["log_fsync_ms"], "log_fsync_busy": res["log_fsync_busy"],
                                 "lat_p50_ms": res["lat_p50_ms"], "lat_p99_ms": res["lat_p99_ms"],
                                 "not_ok": res["not_ok"], "ceiling_msgs_per_s": ceiling, "vs_ceiling": rate / ceiling},
                          f"{v.name} {rate:,.0f} msgs/s, {res['messages'] / max(res['fsyncs'], 1):.1f} "
                          f"msgs/fsync, log fsync {res['log_fsync_ms']:.2f} ms (busy {res['log_fsync_busy']:.0%}), "
                          f"p50 {res['lat_p50_ms']:.2f} ms p99 {res['lat_p99_ms']:.2f} ms: {rate / ref.value:.3f} x; "
                          f"ceiling (write+fdatasync per {a.threads * v.batch}) {ceiling:,.0f}: {rate / ceiling:.3f} x")

        reference_round(ref_path, seg, bodies, 20_000, 1.0)       # warm-up
        paired_rounds(rep, a.rounds, variants, reference, store, row, scratch=tmp)
        rep.note("The reference is measured right before every store sample (fresh file); each store sample "
                 "uses a fresh store. ratio = median over rounds of store / the reference next to it.")
        rep.note("ms_per_fsync_round: sample time / fsyncs (reference: one write of ~1 MiB + fdatasync; store: "
                 "one group-commit round, fsync plus the wait for the next request). log_fsync_ms: mean duration of "
                 "the store's commit-log fdatasync calls alone; log_fsync_busy: share of the sample the disk was "
                 "busy with them. lat_*: latency of one put / put_batch call.")
        rep.note("Before every timed sample: os.sync() and a 0.3 s pause (untimed).")
        rep.note("ceiling_msgs_per_s: the same reference loop with one fsync per threads x batch messages (what a "
                 "perfect group commit of these producers could reach on this disk), measured right after each "
                 "store sample; vs_ceiling = store / that ceiling.")
        rep.note("'1 thread x put_batch(16) ASYNC_FLUSH': the same calls with no fsync waited for, one "
                 "thread (no GIL hand-offs): what the writers themselves can reach, the bound of any group "
                 "commit of put_batch(16) calls.")
        rep.note(f"'{SYNC_VS_ASYNC}' (issue 32's goal, >= 0.7): the SYNC_FLUSH row's rate over the "
                 f"'{ASYNC_16}' rate measured right before it in the same round (same threads, same calls, "
                 "no fsync waited for); its median is the median of the rounds' ratios.")
        rep.note("The store also fsyncs consume queues and the checkpoint once a second (QueueFlushService); "
                 "those fsyncs are not counted in fsyncs_per_msg.")
        rep.write(tmp)


if __name__ == "__main__":
    main()
