"""Rows/s of the Spark data source against Spark's own Parquet read of the same rows.

    .venv/bin/python bench/spark_read.py                  # 2 M messages of 100 bytes, 3 rounds
    .venv/bin/python bench/spark_read.py --count 500000 --rounds 2

Set-up (untimed): ``--count`` messages of 100-byte bodies with a tag, a key and a
34-character UNIQ_KEY (what the official clients send) into topic "Bench" of 8 queues
with MessageStore.put_batch; then the same rows written to Parquet through the source.

Every round, each measured once, in this order: the reference **Parquet** (Spark's
own reader, ``spark.read.parquet``), the source in **file mode** (``path``: the store's
files), the source in **broker mode** (``endpoints``: a ``tidemq serve`` on the same
store, raw pulls), both with the reader ``format("tidemq")`` picks (the JVM reader where
javac built it: the rows that count), then both again with ``reader=python`` (the Python
data source, for information; ``--no-python`` leaves them out); plain broker mode and the signed + TLS
read (a second broker with authentication and TLS on) take turns going first, round by round. The action is ``write.format("noop")``: every column of every row is
produced and handed to Spark (a ``count()`` would let Parquet skip the data). Spark runs
``local[2]`` (this machine's two cores), one warm-up read of each before timing.

Goal (issue 5): >= 0.5 x Parquet; issue 16: with margin, p10 of the rounds' ratios >= 0.5 (the
verdict in the notes is on p10). Every round also measures, per row in CPU time (user + system
read from /proc: robust to other work on the machine, unlike 2 x wall): each Spark read (the
JVM and its Python workers), the broker during the broker-mode read, what the JVM side of a
Python data source costs alone (a source handing over already-decoded Arrow batches from a
mapped IPC file, ``tidemq_bench_passthrough``) and what our side costs alone, one thread, no
Spark: file mode's decode (every record's CRCs), broker mode's pulls + frame CRC + decode in
this process and get_raw (every record's CRCs) in the broker; for the signed + TLS read, the CPU
of Spark's JVM and of the broker that served it against plain broker mode's, round by round (what
TLS and signing cost, robust to load), and the same without the CPU of the JVM's JIT compiler
threads (still compiling after the warm-up reads: their CPU lands in whichever read runs while they
work). The load average at the end is in the notes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import statistics
import time

from _broker import BrokerProcess, proc_cpu_seconds
from _report import Report, progress, scratch_dir

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from tidemq.config import StoreConfig
from tidemq.store import Message, MessageStore

TOPIC = "Bench"
QUEUES = 8


class _Passthrough(DataSourceReader):
    """Already-decoded batches from an Arrow IPC file (mapped): what the JVM side costs alone."""

    def __init__(self, options) -> None:
        self.path, self.parts = options["path"], int(options["parts"])

    def partitions(self):
        return [InputPartition(i) for i in range(self.parts)]

    def read(self, partition):
        import pyarrow as pa
        with pa.memory_map(self.path) as src:
            f = pa.ipc.open_file(src)
            for i in range(partition.value, f.num_record_batches, self.parts):
                yield f.get_batch(i)


class PassthroughSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "tidemq_bench_passthrough"

    def schema(self):
        from tidemq.spark.decode import SPARK_SCHEMA
        return SPARK_SCHEMA

    def reader(self, schema):
        return _Passthrough(self.options)


def decode_only(root: str) -> tuple[str, float]:
    """Our decode alone, one thread, file mode (its CPU seconds), and the batches written to an IPC file."""
    import pyarrow as pa

    from tidemq.spark.backend import FileBackend
    from tidemq.spark.decode import SCHEMA
    fb = FileBackend(root)
    path = os.path.join(os.path.dirname(root), "decoded.arrow")
    dt = 0.0
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as w:
        for q in range(QUEUES):
            lo, hi = fb.queue_range(TOPIC, q)
            it = fb.read(TOPIC, q, lo, hi, 65536)
            while True:
                t0 = time.process_time()
                got = next(it, None)
                dt += time.process_time() - t0
                if got is None:
                    break
                if got[0].num_rows:
                    w.write_batch(got[0])
    fb.close()
    return path, dt


def broker_decode_only(endpoint: str, broker_pid: int) -> tuple[float, float]:
    """Broker mode without Spark, one thread: the CPU seconds of this process (pulls, the frame's CRC,
    decode; gRPC's threads included) and of the broker (get_raw with every record's CRCs, the frame)."""
    from tidemq.spark.backend import BrokerBackend
    bb = BrokerBackend(endpoint)
    b0, t0 = proc_cpu_seconds(broker_pid), time.process_time()
    for q in range(QUEUES):
        lo, hi = bb.queue_range(TOPIC, q)
        for _batch, _lost in bb.read(TOPIC, q, lo, hi, 65536):
            pass
    here, there = time.process_time() - t0, proc_cpu_seconds(broker_pid) - b0
    bb.close()
    return here, there


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its descendants (Spark's JVM and its Python
    workers), from /proc: of the living ones, their own and that of their children they reaped (a
    worker that ended counts in its parent's)."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    parts = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(name)] = int(parts[1])
            cpu[int(name)] = sum(int(x) for x in parts[11:15]) / os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += cpu.get(p, 0.0)
        todo += [c for c, pp in parents.items() if pp == p]
    return total


def jit_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the JIT's compiler threads of a JVM (C1/C2 CompilerThread), from
    /proc: in a JVM that has run only a few queries they are still compiling Spark's, Netty's and our
    code, and their CPU lands in whichever read runs while they work."""
    total = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as fh:
                if "CompilerThre" not in fh.read():
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                parts = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
    return total


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


def self_signed(d: str) -> tuple[str, str]:
    """(cert.pem, key.pem) of a self-signed certificate for 127.0.0.1 (the openssl command)."""
    key, cert = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True)
    return cert, key


def timed(df) -> float:
    t0 = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-python", action="store_true", help="leave out the Python reader's rows")
    ap.add_argument("--no-tls", action="store_true", help="leave out the signed + TLS broker's row")
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
        reader = spark.conf.get("spark.tidemq.reader", "auto")
        jvm = spark.sparkContext._jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            "tidemq", spark._jsparkSession.sessionState().conf()).getName()
        rep.note(f"format('tidemq') is {jvm} here (reader {reader}); the '(python)' rows are reader=python")
        files = spark.read.format("tidemq").option("path", root).option("topic", TOPIC).load()
        files.write.parquet(pq)
        decoded, _ = decode_only(root)                             # warm
        spark.dataSource.register(PassthroughSource)
        passthrough = spark.read.format("tidemq_bench_passthrough").option("path", decoded) \
            .option("parts", str(QUEUES)).load()
        timed(passthrough)
        java = spark.sparkContext._gateway.proc.pid
        cpu: dict[str, list[float]] = {}                          # CPU seconds per read, by what
        # no HTTP port: on a shared machine another broker may hold the default one
        secure, tls_broker = None, contextlib.nullcontext()
        if not args.no_tls:
            # the same rows on a second broker with authentication and TLS on (a copy of the store)
            root2 = os.path.join(d, "store-tls")
            shutil.copytree(root, root2)
            cert, key = self_signed(d)
            tls_broker = BrokerProcess(root2, os.path.join(d, "home2"), env={
                "TIDEMQ_METRICS_PORT": "0", "TIDEMQ_ACCESS_KEY": "bench-ak", "TIDEMQ_SECRET_KEY": "bench-sk",
                "TIDEMQ_TLS_CERT_FILE": cert, "TIDEMQ_TLS_KEY_FILE": key}, start_timeout_s=900)
        with BrokerProcess(root, os.path.join(d, "home"), env={"TIDEMQ_METRICS_PORT": "0"},
                           start_timeout_s=900) as broker, \
                tls_broker as secured:
            if secured is not None:
                secure = spark.read.format("tidemq").options(
                    endpoints=secured.endpoint, topic=TOPIC, accessKey="bench-ak", secretKey="bench-sk",
                    rootCertificates=cert).load()
            via_broker = spark.read.format("tidemq").option("endpoints", broker.endpoint).option("topic", TOPIC).load()
            parquet = spark.read.parquet(pq)
            variants = [("parquet", parquet), ("file mode", files), ("broker mode", via_broker)]
            if secure is not None:
                variants.append(("broker mode, signed + TLS", secure))
            if not args.no_python:
                py = lambda **o: spark.read.format("tidemq").options(topic=TOPIC, reader="python", **o).load()  # noqa: E731
                variants += [("file mode (python)", py(path=root)), ("broker mode (python)", py(endpoints=broker.endpoint))]
            for _name, df in variants:
                timed(df)                                          # warm-up: JVM, workers, page cache
            serving = {"broker mode": broker, "broker mode (python)": broker, "broker mode, signed + TLS": secured}
            for r in range(args.rounds):
                ref = None
                order = list(variants)
                if r % 2 and secure is not None:       # plain and signed + TLS: each first in every other round
                    i, j = 2, 3
                    order[i], order[j] = order[j], order[i]
                for name, df in order:
                    serves = serving.get(name)
                    c0, j0 = tree_cpu_seconds(java), jit_cpu_seconds(java)
                    b0 = proc_cpu_seconds(serves.pid) if serves is not None else 0.0
                    dt = timed(df)
                    cpu.setdefault(f"spark: {name}", []).append(tree_cpu_seconds(java) - c0)
                    cpu.setdefault(f"jit: {name}", []).append(jit_cpu_seconds(java) - j0)
                    if serves is not None:                 # the broker that served this read
                        cpu.setdefault(f"broker, during the {name} read", []).append(
                            proc_cpu_seconds(serves.pid) - b0)
                    rate = args.count / dt
                    progress(f"round {r + 1}: {name}: {rate:,.0f} rows/s ({dt:.2f} s)")
                    if name == "parquet":
                        ref = rate
                        rep.add(name, rate)
                    else:
                        rep.add(name, rate, ref=ref)
                c0 = tree_cpu_seconds(java)
                timed(passthrough)
                cpu.setdefault("spark: passthrough", []).append(tree_cpu_seconds(java) - c0)
                cpu.setdefault("decode, file mode", []).append(decode_only(root)[1])
                here, there = broker_decode_only(broker.endpoint, broker.pid)
                cpu.setdefault("decode, broker mode (pull, frame CRC, decode)", []).append(here)
                cpu.setdefault("broker alone (get_raw, CRCs, frame)", []).append(there)
        spark.stop()
        rep.ratio("file mode", 0.8, on="p10")                        # the goal with margin: p10 of the rounds
        rep.ratio("broker mode", 0.8, on="p10")
        if secure is not None:
            pairs = [x / p for x, p in zip(rep.samples["broker mode, signed + TLS"], rep.samples["broker mode"]) if p]
            med = statistics.median(pairs)
            rep.note(f"signed + TLS against plain broker mode (the same rounds, interleaved): median of the round "
                     f"ratios {med:.3f} (rounds {', '.join(f'{x:.3f}' for x in pairs)}): the goal (within 10 %: "
                     f">= 0.9) is {'met' if med >= 0.9 else 'NOT met'}")
        us = {k: statistics.median(v) / args.count * 1e6 for k, v in cpu.items()}       # CPU us per row
        if secure is not None:
            # what TLS and signing cost in CPU (robust to other work on the machine, unlike the rates):
            # the whole read's CPU (Spark's JVM and the broker that served it), round by round
            both = [(s + b, ts + tb) for s, b, ts, tb in zip(
                cpu["spark: broker mode"], cpu["broker, during the broker mode read"],
                cpu["spark: broker mode, signed + TLS"], cpu["broker, during the broker mode, signed + TLS read"])]
            per = [(t - p) / args.count * 1e6 for p, t in both]
            rep.note(f"signed + TLS, CPU per row (median of rounds): Spark's JVM {us['spark: broker mode, signed + TLS']:.2f}"
                     f" us (plain {us['spark: broker mode']:.2f}), its broker "
                     f"{us['broker, during the broker mode, signed + TLS read']:.2f} us (plain "
                     f"{us['broker, during the broker mode read']:.2f}); the whole read's CPU against plain's, round by "
                     f"round: {', '.join(f'{p / t:.3f}' for p, t in both)} (median "
                     f"{statistics.median(p / t for p, t in both):.3f}; TLS + signing +{statistics.median(per):.2f} us "
                     f"per row)")
            jit = [(s - js + b, ts - tjs + tb) for s, js, b, ts, tjs, tb in zip(
                cpu["spark: broker mode"], cpu["jit: broker mode"], cpu["broker, during the broker mode read"],
                cpu["spark: broker mode, signed + TLS"], cpu["jit: broker mode, signed + TLS"],
                cpu["broker, during the broker mode, signed + TLS read"])]
            rep.note(f"signed + TLS, the same without the JIT's compiler threads (their CPU goes to whichever read "
                     f"runs while they compile): the whole read's CPU against plain's, round by round: "
                     f"{', '.join(f'{p / t:.3f}' for p, t in jit)} (median {statistics.median(p / t for p, t in jit):.3f}; "
                     f"TLS + signing +{statistics.median((t - p) / args.count * 1e6 for p, t in jit):.2f} us per row); "
                     f"the compiler threads per row: plain {us['jit: broker mode']:.2f} us, signed + TLS "
                     f"{us['jit: broker mode, signed + TLS']:.2f} us (Parquet's read {us['jit: parquet']:.2f} us)")
        rep.note(f"CPU per row (median of rounds, user + system of Spark's JVM and its Python workers): Spark's "
                 f"Parquet read {us['spark: parquet']:.2f} us; the JVM reader {us['spark: file mode']:.2f} us in file "
                 f"mode, {us['spark: broker mode']:.2f} us in broker mode (+ {us['broker, during the broker mode read']:.2f}"
                 f" us in the broker)")
        rep.note(f"set-up: put_batch of {args.count} messages took {fill_s:.1f} s (untimed)")
        jvm = us["spark: passthrough"]
        rep.note(f"the Python reader (reader=python), CPU per row: the JVM "
                 f"side of a Python data source ({PassthroughSource.name()}: already-decoded Arrow batches handed "
                 f"over) {jvm:.2f} us")
        rep.note(f"file mode: our decode {us['decode, file mode']:.2f} us (one thread, no Spark: the store's files, "
                 f"every record's CRCs) against the JVM side's {jvm:.2f} us; the whole read in Spark "
                 f"{us.get('spark: file mode (python)', float('nan')):.2f} us")
        rep.note(f"broker mode: our side {us['decode, broker mode (pull, frame CRC, decode)']:.2f} us on the executor "
                 f"(pull, frame CRC, decode: one thread, no Spark) + {us['broker alone (get_raw, CRCs, frame)']:.2f} us "
                 f"in the broker (get_raw, every record's CRCs, the frame) against the JVM side's {jvm:.2f} us; the "
                 f"whole read in Spark {us.get('spark: broker mode (python)', float('nan')):.2f} us + the broker's "
                 f"{us.get('broker, during the broker mode (python) read', float('nan')):.2f} us")
        for v in [n for n, _ in variants if n != "parquet"]:
            p10 = rep._ratios(v)["ratio_p10"]
            rep.note(f"{v}: p10 of the round ratios {p10:.3f}: the goal with margin (p10 >= 0.8) is "
                     f"{'met' if p10 >= 0.8 else 'NOT met'}")
        load = os.getloadavg()
        rep.note(f"load average at the end: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min) on "
                 f"{os.cpu_count()} CPUs: other work on the machine shares them")
        rep.write(d)


if __name__ == "__main__":
    main()
