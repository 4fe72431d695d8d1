"""Rows/s of the Spark data source against Spark's own Parquet read of the same rows.

    .venv/bin/python bench/spark_read.py                  # 2 M messages of 100 bytes, 3 rounds
    .venv/bin/python bench/spark_read.py --count 500000 --rounds 2

Set-up (untimed): ``--count`` messages of 100-byte bodies with a tag, a key and a
34-character UNIQ_KEY (what the official clients send) into topic "Bench" of 8 queues
with MessageStore.put_batch; then the same rows written to Parquet through the source.

Every round, each measured once, in this order: the reference **Parquet** (Spark's
own reader, ``spark.read.parquet``), the source in **file mode** (``path``: the store's
files), the source in **broker mode** (``endpoints``: a ``tidemq serve`` on the same
store, raw pulls). The action is ``write.format("noop")``: every column of every row is
produced and handed to Spark (a ``count()`` would let Parquet skip the data). Spark runs
``local[2]`` (this machine's two cores), one warm-up read of each before timing.

Goal (issue 5): >= 0.5 x Parquet.
"""

from __future__ import annotations

import argparse
import os
import time

from _broker import BrokerProcess
from _report import Report, progress, scratch_dir

from tidemq.config import StoreConfig
from tidemq.store import Message, MessageStore

TOPIC = "Bench"
QUEUES = 8


def fill(root: str, count: int) -> float:
    s = MessageStore(StoreConfig(root_dir=root, index_enabled=False)).start()
    s.create_topic(TOPIC, QUEUES)
    t0 = time.perf_counter()
    for lo in range(0, count, 2048):
        n = min(2048, count - lo)
        rs = s.put_batch([Message(topic=TOPIC, body=b"%099d" % (lo + i) + b"\n", tags="TagA", keys=[f"k{lo + i}"],
                                  properties={"UNIQ_KEY": "01%032X" % (lo + i)}) for i in range(n)])
        if not rs[-1].ok:
            raise RuntimeError(rs[-1])
    dt = time.perf_counter() - t0
    s.shutdown()
    return dt


def timed(df) -> float:
    t0 = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from tidemq.spark import session
    rep = Report("spark_read", {"count": args.count, "body_bytes": 100, "queues": QUEUES, "master": "local[2]",
                                "rounds": args.rounds}, "rows/s", "parquet",
                 "Spark's Parquet reader over the same rows (written through the source), write.format('noop')")
    with scratch_dir("spark_read") as d:
        root, pq = os.path.join(d, "store"), os.path.join(d, "parquet")
        progress(f"filling {args.count} messages")
        fill_s = fill(root, args.count)
        spark = session("local[2]", "tidemq-bench")
        spark.sparkContext.setLogLevel("ERROR")
        files = spark.read.format("tidemq").option("path", root).option("topic", TOPIC).load()
        files.write.parquet(pq)
        with BrokerProcess(root, os.path.join(d, "home")) as broker:
            via_broker = spark.read.format("tidemq").option("endpoints", broker.endpoint).option("topic", TOPIC).load()
            parquet = spark.read.parquet(pq)
            variants = [("parquet", parquet), ("file mode", files), ("broker mode", via_broker)]
            for _name, df in variants:
                timed(df)                                          # warm-up: JVM, workers, page cache
            for r in range(args.rounds):
                ref = None
                for name, df in variants:
                    dt = timed(df)
                    rate = args.count / dt
                    progress(f"round {r + 1}: {name}: {rate:,.0f} rows/s ({dt:.2f} s)")
                    if name == "parquet":
                        ref = rate
                        rep.add(name, rate)
                    else:
                        rep.add(name, rate, ref=ref)
        spark.stop()
        rep.ratio("file mode", 0.5)
        rep.ratio("broker mode", 0.5)
        rep.note(f"set-up: put_batch of {args.count} messages took {fill_s:.1f} s (untimed)")
        rep.write(d)


if __name__ == "__main__":
    main()
