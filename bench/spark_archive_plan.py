"""What the archive job's driver no longer does per GiB: walk and checksum every segment.

    .venv/bin/python bench/spark_archive_plan.py            # 512 MiB of 1 KiB messages, 3 rounds

Before, ``tidemq.spark.archive.plan`` walked every sealed segment (CRC of every record) and took
the crc32 of its bytes on the driver, then the executors walked it again to write it. Now the
executors' walk is the only one (they report rows and checksum) and the driver only looks at
segment heads (at most the last segment is walked). Measured here, pages cached (the driver's
walk read the segment from disk as well, when it was not): "before" is that per-segment work
(walk_segment + zlib.crc32, what plan did), "after" is plan() as it is now.
"""

from __future__ import annotations

import argparse
import os
import time
import zlib

from _report import progress, scratch_dir

from tidemq.config import StoreConfig
from tidemq.spark import archive
from tidemq.store import Message, MessageStore


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with scratch_dir("spark_archive_plan") as d:
        s = MessageStore(StoreConfig(root_dir=d, index_enabled=False, segment_size_bytes=64 << 20,
                                     preallocate_next_segment=False)).start()
        s.create_topic("T", 8)
        body = b"x" * 1024
        for _ in range(args.mib * 1024 // 2048 + 1):
            s.put_batch([Message(topic="T", body=body, tags="a") for _ in range(2048)])
        s.shutdown()
        todo, _ = archive.plan(d)
        gib = sum(os.path.getsize(t["path"]) for t in todo) / (1 << 30)
        progress(f"{len(todo)} sealed segments, {gib:.2f} GiB")
        before, after = [], []
        for r in range(args.rounds):
            t0 = time.perf_counter()
            for t in todo:
                data = archive._map(t["path"])
                _p, _s, end, _b, _c = archive.walk_segment(data, t["limit"])
                zlib.crc32(memoryview(data)[:end])
                del data
            before.append((time.perf_counter() - t0) / gib)
            t0 = time.perf_counter()
            archive.plan(d)
            after.append((time.perf_counter() - t0) / gib)
            progress(f"round {r + 1}: before {before[-1]:.2f} s/GiB, after {after[-1]:.3f} s/GiB")
        b, a = sorted(before)[len(before) // 2], sorted(after)[len(after) // 2]
        print(f"| driver work per GiB | before {b:.2f} s | after {a:.3f} s | saved {b - a:.2f} s per GiB (median "
              f"of {args.rounds}) |")


if __name__ == "__main__":
    main()
