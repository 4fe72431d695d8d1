"""spark.read.format("tidemq"): through the broker and from the store's files, with offsets options."""

import json
import os
import time

import pytest

from tidemq.config import StoreConfig
from tidemq.store import Message, MessageStore

from ..support.spark import fill_through_broker, rows_by_position

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("reader")]


def load(spark, **options):
    r = spark.read.format("tidemq")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_the_broker_and_the_files_give_the_same_rows(spark, broker, tmp_path):
    b = broker()
    n = fill_through_broker(b.endpoint)
    through_broker = rows_by_position(load(spark, endpoints=b.endpoint, topic="Orders"))
    assert len(through_broker) == n
    assert b.stop() == 0                                  # files read with no broker running
    from_files = rows_by_position(load(spark, path=b.root, topic="Orders"))
    assert from_files == through_broker
    bodies = sorted(r["body"] for r in from_files)
    assert bodies == sorted(b"order-%d" % i * (1 + i % 250 % 5) for i in range(n))
    one = next(r for r in from_files if r["body"] == b"order-7" * 3)
    assert one["tags"] == "t1" and one["keys"] == ["k7", "x"] and ("n", "7") in one["properties"]
    assert ("note", "ünï ✓") in one["properties"] and len(one["msg_id"]) == 34


def test_offsets_options_and_partitioning(spark, broker):
    b = broker()
    fill_through_broker(b.endpoint, topic="Sized", batches=2, per=400)     # 100 per queue
    start = json.dumps({"Sized": {"0": 10, "1": -2}})
    end = json.dumps({"Sized": {"0": 20, "1": 5, "2": -1}})
    df = load(spark, endpoints=b.endpoint, topic="Sized", startingOffsets=start, endingOffsets=end)
    got = {(r.queue_id, r.queue_offset) for r in df.select("queue_id", "queue_offset").collect()}
    # queues 3..7 are left out of endingOffsets: "latest" by default; their start is "earliest"
    want = {(0, o) for o in range(10, 20)} | {(1, o) for o in range(5)} | \
        {(q, o) for q in range(2, 8) for o in range(100)}
    assert got == want
    split = load(spark, endpoints=b.endpoint, topic="Sized", maxRecordsPerPartition="30")
    assert split.rdd.getNumPartitions() == 8 * 4                          # 100 offsets per queue in 30s
    assert split.count() == 800
    fill_through_broker(b.endpoint, topic="Other", batches=1, per=30)
    both = load(spark, endpoints=b.endpoint, topics="Sized, Other")
    assert {(r.topic, r["count"]) for r in both.groupBy("topic").count().collect()} == {("Sized", 800), ("Other", 30)}


def test_timestamps_pick_offsets(spark, broker):
    b = broker()
    fill_through_broker(b.endpoint, topic="Timed", batches=1, per=80)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    fill_through_broker(b.endpoint, topic="Timed", batches=1, per=40)
    for mode in ({"endpoints": b.endpoint}, {"path": b.root}):
        later = load(spark, topic="Timed", startingTimestamp=str(cut), **mode)
        earlier = load(spark, topic="Timed", endingTimestamp=str(cut), **mode)
        assert (later.count(), earlier.count()) == (40, 80)


def small_store(root, **kw):
    return MessageStore(StoreConfig(root_dir=str(root), segment_size_bytes=64 * 1024, flush_interval_ms=10,
                                    index_enabled=False, file_reserved_time_hours=0, delete_when="", **kw)).start()


def test_cleaned_offsets_fail_clearly_or_are_skipped(spark, tmp_path):
    root = tmp_path / "store"
    s = small_store(root)
    s.create_topic("Old", 1)
    s.put_batch([Message(topic="Old", body=b"m%05d" % i + b"." * 500) for i in range(600)])
    s.shutdown()
    segs = sorted(os.listdir(root / "commitlog"))
    assert len(segs) >= 4
    for name in segs[:2]:                       # what cleanup would have deleted
        os.remove(root / "commitlog" / name)
    everything = json.dumps({"Old": {"0": 0}})
    with pytest.raises(Exception, match="no longer in the store.*failOnDataLoss"):
        load(spark, path=str(root), topic="Old", startingOffsets=everything).count()
    kept = load(spark, path=str(root), topic="Old", startingOffsets=everything, failOnDataLoss="false")
    offsets = sorted(r.queue_offset for r in kept.select("queue_offset").collect())
    assert offsets == list(range(offsets[0], 600)) and offsets[0] > 0
    assert load(spark, path=str(root), topic="Old").count() == len(offsets)          # earliest: what is left


def test_damaged_records_in_file_mode_are_never_rows(spark, tmp_path):
    """Issue 12: records failing their CRC (bytes flipped in the files by hand) are never decoded
    as rows: a data loss (failOnDataLoss), or skipped with every other record read."""
    root = tmp_path / "store"
    s = small_store(root)
    s.create_topic("Dmg", 1)
    rs = s.put_batch([Message(topic="Dmg", body=b"m%05d" % i + b"." * 500) for i in range(600)])
    s.shutdown()
    for i in (5, 300, 301):
        seg_start = rs[i].commitlog_offset // s.config.segment_size_bytes * s.config.segment_size_bytes
        with open(root / "commitlog" / ("%020d" % seg_start), "r+b") as f:
            f.seek(rs[i].commitlog_offset - seg_start + 100)
            old = f.read(4)
            f.seek(rs[i].commitlog_offset - seg_start + 100)
            f.write(bytes(b ^ 0xFF for b in old))
    with pytest.raises(Exception, match="DataLossError"):
        load(spark, path=str(root), topic="Dmg").count()
    rows = load(spark, path=str(root), topic="Dmg", failOnDataLoss="false").select("queue_offset", "body").collect()
    assert sorted(r.queue_offset for r in rows) == [i for i in range(600) if i not in (5, 300, 301)]
    assert all(r.body == b"m%05d" % r.queue_offset + b"." * 500 for r in rows)


def test_bad_options_are_clear_errors(spark, broker, tmp_path):
    b = broker(args=())                         # topics are not created on first use
    with pytest.raises(Exception, match="exactly one of the options 'endpoints'"):
        load(spark, topic="T").count()
    with pytest.raises(Exception, match="'topic'"):
        load(spark, endpoints=b.endpoint).count()
    with pytest.raises(Exception, match="TOPIC_NOT_FOUND|does not exist|no queue"):
        load(spark, endpoints=b.endpoint, topic="Nope").count()
    with pytest.raises(Exception, match="no store at"):
        load(spark, path=str(tmp_path / "missing"), topic="T").count()
    with pytest.raises(Exception, match="unknown topic 'Nope'"):
        load(spark, path=b.root, topic="Nope").count()
    b2 = broker(root=str(tmp_path / "other"))
    fill_through_broker(b2.endpoint, topic="T", batches=1, per=16)
    with pytest.raises(Exception, match="startingOffsets='latest' is for streams"):
        load(spark, endpoints=b2.endpoint, topic="T", startingOffsets="latest").count()
    with pytest.raises(Exception, match="endingOffsets='earliest' reads nothing"):
        load(spark, endpoints=b2.endpoint, topic="T", endingOffsets="earliest").count()
    with pytest.raises(Exception, match="past its end 2"):
        load(spark, endpoints=b2.endpoint, topic="T", endingOffsets='{"T": {"0": 99}}').count()
    with pytest.raises(Exception, match="offsets must be"):
        load(spark, endpoints=b.endpoint, topic="T", startingOffsets="{oops").count()


def test_the_python_reader_asked_for_the_jvm_one_says_it_is_not_loaded(tmp_path):
    from tidemq.spark.source import TidemqReader, TidemqStreamReader
    root = tmp_path / "store"
    s = small_store(root)
    s.create_topic("J", 1)
    s.shutdown()
    opts = {"path": str(root), "topic": "J", "reader": "jvm"}
    with pytest.raises(ValueError, match="reader=jvm, but the JVM reader is not loaded"):
        TidemqReader(opts).partitions()
    with pytest.raises(ValueError, match="reader=jvm, but the JVM reader is not loaded"):
        TidemqStreamReader(opts).initialOffset()
