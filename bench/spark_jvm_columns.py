"""What the JVM side of a Python data source costs per column kind (information, no goal).

    .venv/bin/python bench/spark_jvm_columns.py            # 1 M messages of 100 bytes

The rows of bench/spark_read.py are decoded once into Arrow IPC files (all columns, then
without properties, without properties and keys, without the string columns too), and
handed to Spark unchanged by spark_read's passthrough source, so what is measured is the
JVM side alone (Arrow batches from the Python worker to rows, ``write.format("noop")``),
against Spark's own Parquet read of all the columns. Median of 3, ``local[2]``; core time
per row = 2 x wall / rows.
"""

from __future__ import annotations

import argparse
import os

import pyarrow as pa
from _report import scratch_dir

import spark_read as b
from tidemq.spark import session
from tidemq.spark.decode import SPARK_SCHEMA

DROPS = ([], ["properties"], ["properties", "keys"], ["properties", "keys", "msg_id", "tags", "topic"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1_000_000)
    args = ap.parse_args()
    with scratch_dir("spark_jvm_columns") as d:
        root = os.path.join(d, "store")
        b.fill(root, args.count)
        decoded, _ = b.decode_only(root)
        with pa.memory_map(decoded) as src:
            table = pa.ipc.open_file(src).read_all()
        spark = session("local[2]", "tidemq-bench")
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(b.PassthroughSource)

        def median_s(df) -> float:
            b.timed(df)
            return sorted(b.timed(df) for _ in range(3))[1]

        for drop in DROPS:
            path = os.path.join(d, f"cols{len(drop)}.arrow")
            t = table.drop_columns(drop)
            with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, t.schema) as w:
                for batch in t.to_batches(65536):
                    w.write_batch(batch)
            schema = ", ".join(c for c in SPARK_SCHEMA.split(", ") if c.split()[0] not in drop)
            df = spark.read.format("tidemq_bench_passthrough").schema(schema).option("path", path) \
                .option("parts", str(b.QUEUES)).load()
            s = median_s(df)
            print(f"| JVM side, without {', '.join(drop) or 'nothing'} | {2 * s / args.count * 1e6:.2f} us/row |",
                  flush=True)
        pq = os.path.join(d, "parquet")
        spark.read.format("tidemq").option("path", root).option("topic", b.TOPIC).load().write.parquet(pq)
        s = median_s(spark.read.parquet(pq))
        print(f"| Spark's Parquet read, all columns | {2 * s / args.count * 1e6:.2f} us/row |")
        spark.stop()


if __name__ == "__main__":
    main()
