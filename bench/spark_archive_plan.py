"""What `tidemq archive` no longer does per GiB: walking and checking every record a second time.

    .venv/bin/python bench/spark_archive_plan.py            # 512 MiB of 1 KiB messages, 3 rounds
    .venv/bin/python bench/spark_archive_plan.py --mib 256 --rounds 5

Two savings, each measured here against the work it replaced (pages cached, one thread, no Spark:
what is left is the CPU the archive spends per GiB of segments, before Parquet is written):

- **driver**: before, ``tidemq.spark.archive.plan`` walked every sealed segment (CRC of every
  record) and took the crc32 of its bytes, then the executors walked it again; now the executors'
  walk is the only one (they report rows and checksum) and the driver looks at segment heads (at
  most the last segment is walked). "before" is that per-segment work, "after" plan() as it is.
- **executors**: per segment, ``_Segments.read`` walks the records (codec.scan_run: body and
  record CRC), decodes them to Arrow and takes the crc32 of the segment for the manifest. Before,
  decode checked both CRCs of every record again (integrity.damaged_records); now the walk is the
  one check ("after": decode(crc_checked=True)). Both variants do the walk, the decode and the
  segment's crc32.

Reported in seconds of CPU per GiB (median of the rounds; lower is better); the ratio column is
after / before of the same round (executors against executors, driver against driver).
"""

from __future__ import annotations

import argparse
import os
import time
import zlib

import numpy as np
from _report import Report, progress, scratch_dir

from tidemq.record.crc import crc32
from tidemq.config import StoreConfig
from tidemq.spark import archive
from tidemq.spark.decode import decode
from tidemq.store import Message, MessageStore


def executors(todo: list[dict], crc_checked: bool) -> None:
    """What _Segments.read does per segment, without writing Parquet."""
    for t in todo:
        data = archive._map(t["path"])
        positions, sizes, end, _blank, _bad = archive.walk_segment(data, t["limit"])
        buf = np.frombuffer(data, np.uint8)
        for lo in range(0, len(positions), archive.BATCH_ROWS):
            decode(buf, np.array(positions[lo:lo + archive.BATCH_ROWS]), sizes[lo:lo + archive.BATCH_ROWS],
                   crc_checked)
        crc32(memoryview(data)[:end])
        del buf, data


def segment_crcs(todo: list[dict]) -> None:
    """The crc32 of each segment's bytes alone (the manifest's checksum): one pass in C."""
    for t in todo:
        data = archive._map(t["path"])
        crc32(memoryview(data)[:t["limit"]])
        del data


def driver_before(todo: list[dict]) -> None:
    for t in todo:
        data = archive._map(t["path"])
        _p, _s, end, _b, _c = archive.walk_segment(data, t["limit"])
        zlib.crc32(memoryview(data)[:end])
        del data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rep = Report("spark_archive_plan", {"mib": args.mib, "body_bytes": 1024, "segment_mib": 64, "rounds": args.rounds},
                 "s/GiB", "executors, before",
                 "per segment: walk (CRCs), decode checking every record's CRCs again, segment crc32")
    with scratch_dir("spark_archive_plan") as d:
        s = MessageStore(StoreConfig(root_dir=d, index_enabled=False, segment_size_bytes=64 << 20,
                                     preallocate_next_segment=False)).start()
        s.create_topic("T", 8)
        body = b"x" * 1024
        for i in range(args.mib * 1024 // 2048 + 1):
            s.put_batch([Message(topic="T", body=body, tags="a", keys=[f"k{i}-{k}"]) for k in range(2048)])
        s.shutdown()
        todo, _ = archive.plan(d)
        gib = sum(os.path.getsize(t["path"]) for t in todo) / (1 << 30)
        progress(f"{len(todo)} sealed segments, {gib:.2f} GiB")
        executors(todo, True)                                          # warm: pages, imports
        for r in range(args.rounds):
            timed = {}
            for name, fn in (("executors, before", lambda: executors(todo, False)),
                             ("executors, after", lambda: executors(todo, True)),
                             ("driver, before", lambda: driver_before(todo)),
                             ("driver, after", lambda: archive.plan(d)),
                             ("segment crc32 alone", lambda: segment_crcs(todo))):
                t0 = time.process_time()
                fn()
                timed[name] = (time.process_time() - t0) / gib
            rep.add("executors, before", timed["executors, before"])
            rep.add("executors, after", timed["executors, after"], ref=timed["executors, before"])
            rep.add("driver, before", timed["driver, before"], ref=timed["driver, before"])
            rep.add("driver, after", timed["driver, after"], ref=timed["driver, before"])
            rep.add("segment crc32 alone", timed["segment crc32 alone"], ref=timed["executors, after"])
            progress(f"round {r + 1}: " + ", ".join(f"{k} {v:.2f} s/GiB" for k, v in timed.items()))
        med = {k: sorted(v)[len(v) // 2] for k, v in rep.samples.items()}
        rep.note(f"executors: {med['executors, before']:.2f} -> {med['executors, after']:.2f} s of CPU per GiB: "
                 f"{med['executors, before'] - med['executors, after']:.2f} s per GiB saved (each record's CRCs "
                 f"checked once, by the walk)")
        rep.note(f"driver: {med['driver, before']:.2f} -> {med['driver, after']:.3f} s of CPU per GiB: "
                 f"{med['driver, before'] - med['driver, after']:.2f} s per GiB saved (the walk moved to the executors)")
        rep.note(f"of the executors' work, the crc32 of each segment's bytes (the manifest's checksum, one pass in "
                 f"C) is {med['segment crc32 alone']:.3f} s per GiB: kept")
        rep.note("CPU time of this process (time.process_time), pages cached; 1 KiB bodies with a tag and a key")
        rep.write(d)


if __name__ == "__main__":
    main()
