"""Abnormal recovery of a 1 GiB commit log of 1 KiB messages, against a raw scan with CRC.

    .venv/bin/python bench/recovery.py            # 1 GiB log, 3 rounds
    .venv/bin/python bench/recovery.py --quick    # 128 MiB log, 2 rounds

Set-up (untimed): a store with 256 MiB segments filled with ~960k messages of 1 KiB
(8 queues), shut down cleanly, then made to look crashed: the abort file is put back
and the checkpoint removed, so recovery must verify every record from the first
segment (no durable offset to trust) and check every consume-queue unit again.

Reference ("raw scan + CRC"), measured next to every sample: a Python loop over
mmaps of the same segment files, per record the TOTALSIZE / MAGIC / BODYCRC header
fields by one struct.unpack_from, the body length, zlib.crc32 of the body compared
with BODYCRC, on to the next record; BLANK ends a segment.

Variants:
* ``log verification`` — recovery's scan of the commit log alone (find_log_end, with the consume queues' end as its hint, as at a start:
  magic, lengths, body CRC and the record CRC), the part the goal is about;
* ``abnormal start`` — MessageStore.start() as a whole (scan, consume-queue check,
  re-dispatch of every record, idempotent), messages per second of log;
* ``rebuild consume queues`` — start() after ``consumequeue/`` was deleted: every
  queue rebuilt from the log (time reported).

Goal (issue 3): log verification >= 0.5 x the raw scan.
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import struct
import time
import zlib

from _report import Report, progress, scratch_dir, settle

from tidemq.config import MIB, StoreConfig
from tidemq.store import Message, MessageStore
from tidemq.store.recovery import RecoveryReport, dispatched_end, find_log_end

HEAD = struct.Struct(">iii")
MAGIC = 0xDAA320A7 - (1 << 32)
BLANK = 0xCBD43194 - (1 << 32)
BODYLEN = struct.Struct(">i")


def raw_scan(files: list[str]) -> int:
    n = 0
    for path in files:
        with open(path, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
            try:
                pos, limit = 0, len(mm)
                while pos + 12 <= limit:
                    size, magic, crc = HEAD.unpack_from(mm, pos)
                    if magic != MAGIC:
                        break
                    (blen,) = BODYLEN.unpack_from(mm, pos + 84)
                    if zlib.crc32(mm[pos + 88:pos + 88 + blen]) & 0x7FFFFFFF != crc:
                        raise SystemExit(f"bad CRC at {path}:{pos}")
                    pos += size
                    n += 1
            finally:
                mm.close()
    return n


def fill(cfg: StoreConfig, count: int) -> None:
    body = os.urandom(1024)
    s = MessageStore(cfg).start()
    try:
        s.create_topic("Bench", 8)
        pool = [Message(topic="Bench", body=body, tags="t") for _ in range(1024)]
        done = 0
        while done < count:
            k = min(1024, count - done)
            rs = s.put_batch(pool[:k])
            assert rs[-1].ok, rs[-1]
            done += k
    finally:
        s.shutdown()


def make_crashed(cfg: StoreConfig) -> None:
    open(cfg.abort_path, "w").close()
    if os.path.exists(cfg.checkpoint_path):
        os.unlink(cfg.checkpoint_path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    a = ap.parse_args()
    log_bytes = (128 if a.quick else 1024) * MIB
    rounds = a.rounds or (2 if a.quick else 3)
    count = log_bytes // 1120
    rep = Report("recovery", unit="records/s", reference="raw scan + CRC",
                 params={"log_bytes": log_bytes, "messages": count, "body_bytes": 1024, "rounds": rounds,
                         "segment_size_bytes": 256 * MIB, "queues": 8},
                 reference_doc="Python loop over mmaps of the same segments: header fields by one "
                               "struct.unpack_from, zlib.crc32 of every body checked against BODYCRC")
    rep.ratio("log verification", 0.5)
    rep.ratio("abnormal start", None)
    rep.ratio("rebuild consume queues", None)
    with scratch_dir("recovery") as tmp:
        cfg = StoreConfig(root_dir=os.path.join(tmp, "store"), segment_size_bytes=256 * MIB,
                          index_enabled=False, preallocate_next_segment=False)
        progress(f"filling {count} messages ({log_bytes >> 20} MiB)")
        fill(cfg, count)
        files = sorted(os.path.join(cfg.commitlog_paths[0], n) for n in os.listdir(cfg.commitlog_paths[0])
                       if n.isdigit())
        raw_scan(files)                                    # page cache warm for both sides
        for r in range(rounds):
            settle()
            t = time.perf_counter()
            n = raw_scan(files)
            ref = n / (time.perf_counter() - t)
            rep.add("raw scan + CRC", ref)

            make_crashed(cfg)
            s = MessageStore(cfg)
            # the log verification alone, on a store loaded but not yet recovered
            from tidemq.store.segment_queue import SegmentQueue
            from tidemq.store.commit_log import CommitLog
            segs = SegmentQueue(s.fio, cfg.commitlog_paths, cfg.segment_size_bytes, preallocate=False)
            segs.load()
            cl = CommitLog(cfg, s.fio, segs)
            from tidemq.store.consume_queue import ConsumeQueueTable
            queues = ConsumeQueueTable(s.fio, cfg.consumequeue_path, cfg.consume_queue_units_per_segment,
                                       cfg.consume_queue_open_files_max)
            queues.load()
            settle()
            t = time.perf_counter()
            rr = RecoveryReport()
            find_log_end(cl, 0, rr, None, dispatched_end(queues))    # as recover() calls it, no checkpoint
            vdt = time.perf_counter() - t
            queues.close()
            segs.close()
            rep.add("log verification", rr.records_scanned / vdt, ref=ref, seconds=vdt)

            settle()
            t = time.perf_counter()
            s.start()
            dt = time.perf_counter() - t
            rec = s.recovery
            s.shutdown()
            assert rec.abnormal and rec.records_scanned == n, rec.summary()
            rep.add("abnormal start", n / dt, ref=ref, seconds=dt)
            progress(f"round {r}: raw {ref:,.0f}/s, verify {rr.records_scanned / vdt:,.0f}/s; start {dt:.2f}s")

            shutil.rmtree(cfg.consumequeue_path)
            settle()
            t = time.perf_counter()
            s = MessageStore(cfg).start()
            dt = time.perf_counter() - t
            assert s.recovery.consume_queues_rebuilt_all and s.recovery.units_redispatched == n
            s.shutdown()
            rep.add("rebuild consume queues", n / dt, ref=ref, seconds=dt)
            progress(f"round {r}: rebuild of all consume queues {dt:.2f}s")
        rep.note("The store is made to look crashed: abort file present, checkpoint removed, so recovery "
                 "verifies every record from the first segment and re-dispatches all of them (idempotently).")
        rep.note("log verification checks more than the reference per record: lengths, the record CRC over "
                 "header, topic and properties (one more zlib.crc32 of ~100 bytes) besides the body CRC.")
        rep.note("seconds: wall time of the variant; for 'rebuild consume queues' that is the time to "
                 "rebuild every queue from scratch.")
        rep.write(tmp)


if __name__ == "__main__":
    main()
