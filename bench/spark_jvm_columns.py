"""What handing Arrow batches to Spark costs per column kind (information, no goal).

    .venv/bin/python bench/spark_jvm_columns.py                    # 1 M messages of 100 bytes, 3 rounds
    .venv/bin/python bench/spark_jvm_columns.py --count 500000 --rounds 5

The rows of bench/spark_read.py are decoded once (our decoder, untimed) into Arrow IPC files:
all the columns, and each column kind left out in turn; spark_read's passthrough source hands
the batches to Spark unchanged (a mapped IPC file read in the Python worker, no decoding), so
what is measured is the rest of a Python data source's read: the Python worker sending the
batches, the JVM loading them and turning them into rows, ``write.format("noop")``. Against
Spark's own Parquet read of the same rows (all columns) in the same round. Also: all columns in
batches of 8192 rows instead of our 65536. The layout we hand over cannot change the Arrow types:
pyspark compares the first batch's schema with the declared one (``pa_schema.equals``, in
pyspark/sql/worker/plan_data_source_read.py) and fails the read otherwise, so large_binary, a
dictionary-encoded topic or string_view are refused; what is left is batch sizes and buffers,
and what the columns hold: one variant's properties map leaves out TAGS, KEYS and UNIQ_KEY (they
are the columns tags, keys and msg_id already; a change of what the column holds, measured for
a decision, not made).

What a column kind costs per row, in CPU time (user + system of Spark's JVM and its Python
workers, from /proc: less sensitive to other work on the machine than wall time): the time with
every column minus the time without it, median of the rounds (notes of the report). Every
variant is measured once per round, in a rotating order; the table's rates are wall time.
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from _report import RESULTS_DIR, Report, progress, scratch_dir

import spark_read as b
from tidemq.spark import session
from tidemq.spark.decode import SPARK_SCHEMA

ALL = "all columns"
SMALL = "all columns, 8192-row batches"
USER = "all columns, properties without TAGS, KEYS, UNIQ_KEY"
KINDS = {                                   # what is left out: the columns of one kind
    "properties (map<string,string>)": ["properties"],
    "keys (array<string>)": ["keys"],
    "body (binary)": ["body"],
    "msg_id (string, 34 chars)": ["msg_id"],
    "tags (string)": ["tags"],
    "topic (string, one value)": ["topic"],
    "timestamps (2 x timestamp)": ["born_timestamp", "store_timestamp"],
    "ids (int + 2 x long)": ["queue_id", "queue_offset", "commitlog_offset"],
}


def write_ipc(table: pa.Table, path: str, rows: int) -> None:
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        for batch in table.to_batches(rows):
            w.write_batch(batch)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rep = Report("spark_jvm_columns", {"count": args.count, "body_bytes": 100, "queues": b.QUEUES,
                                       "master": "local[2]", "rounds": args.rounds}, "rows/s", "parquet",
                 "Spark's Parquet reader over the same rows (all columns), write.format('noop')")
    with scratch_dir("spark_jvm_columns") as d:
        root = os.path.join(d, "store")
        progress(f"filling {args.count} messages")
        b.fill(root, args.count)
        decoded, _ = b.decode_only(root)
        with pa.memory_map(decoded) as src:
            table = pa.ipc.open_file(src).read_all().combine_chunks()
        spark = session("local[2]", "tidemq-bench")
        spark.sparkContext.setLogLevel("ERROR")
        from pyspark import cloudpickle
        cloudpickle.register_pickle_by_value(b)          # the workers cannot import spark_read
        spark.dataSource.register(b.PassthroughSource)

        def passthrough(name: str, t: pa.Table, rows: int = 65536):
            path = os.path.join(d, f"v{len(variants)}.arrow")
            write_ipc(t, path, rows)
            schema = ", ".join(c for c in SPARK_SCHEMA.split(", ") if c.split()[0] in t.schema.names)
            variants.append((name, spark.read.format("tidemq_bench_passthrough").schema(schema)
                             .option("path", path).option("parts", str(b.QUEUES)).load()))

        pq = os.path.join(d, "parquet")
        spark.read.format("tidemq").option("path", root).option("topic", b.TOPIC).load().write.parquet(pq)
        variants = [("parquet", spark.read.parquet(pq))]
        passthrough(ALL, table)
        passthrough(SMALL, table, 8192)
        props = table.column("properties").combine_chunks()
        keep = pc.invert(pc.is_in(props.keys, pa.array(["TAGS", "KEYS", "UNIQ_KEY"])))
        parents = np.repeat(np.arange(len(props)), np.diff(props.offsets.to_numpy()))[
            keep.to_numpy(zero_copy_only=False)]
        offsets = np.zeros(len(props) + 1, np.int32)
        np.cumsum(np.bincount(parents, minlength=len(props)), out=offsets[1:])
        user_only = pa.MapArray.from_arrays(pa.array(offsets), props.keys.filter(keep), props.items.filter(keep))
        passthrough(USER, table.set_column(table.schema.get_field_index("properties"), "properties", user_only))
        for kind, drop in KINDS.items():
            passthrough(f"without {kind}", table.drop_columns(drop))
        for _name, df in variants:
            b.timed(df)                                                # warm-up
        java = spark.sparkContext._gateway.proc.pid
        secs: dict[str, list[float]] = {}                          # CPU seconds of Spark's processes per read
        for r in range(args.rounds):
            ref = None
            order = variants[1:][r % (len(variants) - 1):] + variants[1:][:r % (len(variants) - 1)]
            for name, df in [variants[0]] + order:
                c0 = b.tree_cpu_seconds(java)
                dt = b.timed(df)
                secs.setdefault(name, []).append(b.tree_cpu_seconds(java) - c0)
                rate = args.count / dt
                progress(f"round {r + 1}: {name}: {rate:,.0f} rows/s, {secs[name][-1] / args.count * 1e6:.2f} "
                         f"CPU us/row")
                if name == "parquet":
                    ref = rate
                    rep.add(name, rate)
                else:
                    rep.add(name, rate, ref=ref)
        spark.stop()
        us = {k: statistics.median(v) / args.count * 1e6 for k, v in secs.items()}
        rep.note(f"CPU per row (user + system of Spark's JVM and its Python workers, median of rounds): Spark's "
                 f"Parquet read {us['parquet']:.2f} "
                 f"us; the JVM side of our source with every column (passthrough of decoded batches) "
                 f"{us[ALL]:.2f} us; in 8192-row batches {us[SMALL]:.2f} us; with the properties map holding "
                 f"only the user's properties (not TAGS, KEYS and UNIQ_KEY, which are the columns tags, keys and "
                 f"msg_id too) {us[USER]:.2f} us")
        rep.note("what each column kind costs: the table below (all columns minus without it, CPU us per row)")
        rep.write(d)
        table = ["", "| column kind | CPU per row, handed to Spark (all columns minus without it) |", "|---|---|"]
        table += [f"| {kind} | {us[ALL] - us[f'without {kind}']:.2f} us |" for kind in KINDS]
        table += [f"| (all columns) | {us[ALL]:.2f} us |", f"| (Spark's Parquet read, all columns) | {us['parquet']:.2f} us |",
                  ""]
        with open(os.path.join(RESULTS_DIR, "spark_jvm_columns.md"), "a") as fh:
            fh.write("\n".join(table))
        print("\n".join(table))


if __name__ == "__main__":
    main()
