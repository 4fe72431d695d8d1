"""Spark tests: a topic filled through a broker with the fast client, its segments archived, an
archive file rewritten as Spark would read it, and DataFrame rows in an order that compares (the
SparkSession and broker fixtures are in tests/spark/conftest.py)."""

import fcntl
import os


def fill_through_broker(endpoint, topic="Orders", batches=4, per=250):
    """Send ``batches`` x ``per`` messages (bodies, tags, keys, properties varied by position);
    the number sent."""
    from tidemq.client import Producer
    with Producer(endpoint) as p:
        for b in range(batches):
            n0 = b * per
            p.send_batch(topic, [b"order-%d" % (n0 + i) * (1 + i % 5) for i in range(per)],
                         tags=[f"t{i % 3}" if i % 4 else None for i in range(per)],
                         keys=[[f"k{n0 + i}", "x"] if i % 2 else [] for i in range(per)],
                         properties=[{"n": str(n0 + i), "note": "ünï ✓"} if i % 3 else {} for i in range(per)])
    return batches * per


def rows_by_position(df):
    """Rows as comparable dicts ordered by (topic, queue, offset); maps as sorted item lists."""
    out = []
    for r in df.collect():
        d = r.asDict()
        d["properties"] = sorted((d["properties"] or {}).items())
        out.append(d)
    return sorted(out, key=lambda d: (d["topic"], d["queue_id"], d["queue_offset"]))


def filled_and_archived(spark, broker, dest: str, env: dict):
    """A broker (``broker``: the fixture's factory, with ``env``) whose topic Orders is filled
    (fill_through_broker), stopped, its sealed segments archived to ``dest`` (tidemq.spark.archive: two
    or more); (the stopped broker, messages sent, the archive's report). The segments stay in the log."""
    from tidemq.spark import archive
    b = broker(env=env)
    n = fill_through_broker(b.endpoint, topic="Orders", batches=4, per=250)
    assert b.stop() == 0
    report = archive.run(spark, b.root, dest)
    assert len(report["archived"]) >= 2
    return b, n, report


def rewrite_archive_file(path: str, table) -> None:
    """Write ``table`` over the archive's Parquet file ``path`` as Spark wrote it (int96 timestamps), and
    drop Hadoop's checksum of the old file (Spark's reader checks a file against its ``.crc``)."""
    import pyarrow.parquet as pq
    pq.write_table(table, path, use_deprecated_int96_timestamps=True)
    crc = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.crc")
    if os.path.exists(crc):
        os.remove(crc)


def archived_store(spark, tmp_path):
    """A store (``tmp_path``/root, small segments, no index) of topic T, one queue, 600 messages of ~500
    bytes, shut down, its sealed segments archived to ``tmp_path``/archive; (the root, the archive's
    report). The segments stay in the log."""
    from tidemq.spark import archive
    from tidemq.store import Message, MessageStore, StoreConfig
    root, dest = str(tmp_path / "root"), str(tmp_path / "archive")
    s = MessageStore(StoreConfig(root_dir=root, segment_size_bytes=64 * 1024, index_enabled=False)).start()
    s.create_topic("T", 1)
    s.put_batch([Message(topic="T", body=b"%05d" % i + b"." * 500) for i in range(600)])
    s.shutdown()
    return root, archive.run(spark, root, dest)


def checkout_jar() -> str | None:
    """The JVM reader's jar in the default cache (tidemq.spark.jar: $XDG_CACHE_HOME/tidemq, which
    tests/spark/conftest.py points under build/ for every worker and run), built or found under a lock:
    another worker waits for it instead of running javac at the same time. None without javac."""
    from tidemq.spark.jar import default_cache_dir, jar_path
    d = default_cache_dir()
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, ".build-lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return jar_path()


def stranger_units(cfg) -> None:
    """A store at ``cfg`` (a StoreConfig) whose queue A/0 holds records a3 only as its own: its units 0, 1
    and 2 damaged to point at intact records of another topic (B/0 offset 0), another queue (A/1 offset
    1) and another queue offset (A/0 offset 0): what a Spark reader must never make rows of."""
    from tidemq.io import OsFileIO
    from tidemq.layout import list_segments, queue_dir
    from tidemq.store import Message, MessageStore
    from tidemq.store.consume_queue import UNIT
    s = MessageStore(cfg).start()
    try:
        s.create_topic("A", 2)
        s.create_topic("B", 1)
        a = s.put_batch([Message("A", b"a%d" % i, queue_id=0) for i in range(4)])
        b = s.put_batch([Message("B", b"b%d" % i, queue_id=0) for i in range(3)])
        c = s.put_batch([Message("A", b"c%d" % i, queue_id=1) for i in range(3)])
    finally:
        s.shutdown()
    [(_, path)] = list_segments(OsFileIO(), queue_dir(os.path.join(cfg.root_dir, "consumequeue"), "A", 0))
    fd = os.open(path, os.O_WRONLY)
    try:
        for unit, r in ((0, b[0]), (1, c[1]), (2, a[0])):      # B/0 offset 0, A/1 offset 1, A/0 offset 0
            os.pwrite(fd, UNIT.pack(r.commitlog_offset, r.size, 0), unit * UNIT.size)
    finally:
        os.close(fd)
