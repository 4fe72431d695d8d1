"""The JVM reader's own parts (src/tidemq/spark/jvm/): its schema is the Python reader's, the
partitions the planner describes are read with both CRCs checked (a damaged record is never a
row: a data loss, or skipped), broker frames are checked (a wrong frame CRC, sizes that do not
fit) and the reader option is checked. The rows of both readers are compared by the tests of
tidemq.spark.source, .stream and .tiered, which run with each (tests/spark/conftest.py)."""

import itertools
import json
import os
import re

import pytest

from tidemq.spark import jar, planner
from tidemq.spark.decode import SPARK_SCHEMA
from tidemq.store import Message, MessageStore, StoreConfig

from ..support.fake_pull import fake_pull_server
from ..support.records import record, varied

pytestmark = pytest.mark.timeout(600)


def read_one(jvm, part: dict) -> list[int]:
    return list(jvm.queueOffsets(json.dumps(part)))


def test_the_schema_is_the_python_readers():
    with open(os.path.join(jar.SOURCES_DIR, "TidemqProvider.java")) as f:
        java = f.read()
    ddl = "".join(re.findall(r'"([^"]*)"', java[java.index("SCHEMA_DDL ="):java.index(";", java.index("SCHEMA_DDL ="))]))
    assert ddl == SPARK_SCHEMA


def damaged_store(root, where):
    """Topic D, one queue of 50 records; records 3 and 30 with one byte flipped ``where`` bytes
    before their end (11: the record CRC's digits; 25: the properties; 30: the topic)."""
    s = MessageStore(StoreConfig(root_dir=str(root), segment_size_bytes=64 * 1024, index_enabled=False)).start()
    s.create_topic("D", 1)
    rs = s.put_batch([Message(topic="D", body=b"b%03d" % i, tags="t", properties={"p": "v" * 3}) for i in range(50)])
    s.shutdown()
    for i in (3, 30):
        with open(root / "commitlog" / ("%020d" % 0), "r+b") as f:
            f.seek(rs[i].commitlog_offset)
            size = int.from_bytes(f.read(4), "big")
            f.seek(rs[i].commitlog_offset + size - where)
            b = f.read(1)
            f.seek(rs[i].commitlog_offset + size - where)
            f.write(bytes([b[0] ^ 0x01]))
    return str(root)


@pytest.mark.parametrize("where", [11, 25, 30])
def test_file_mode_never_serves_a_record_whose_record_crc_fails(jvm, tmp_path, where):
    root = damaged_store(tmp_path / "store", where)
    part = planner.handle(json.dumps({"op": "batch", "options": {"path": root, "topic": "D"}}).encode())["partitions"][0]
    with pytest.raises(Exception, match="DataLossError: 2 offsets of D queue 0 in \\[0, 50\\)"):
        read_one(jvm, part)
    assert read_one(jvm, {**part, "failOnDataLoss": False}) == [i for i in range(50) if i not in (3, 30)]


def broker_part(endpoint, n, fail=True):
    return {"topic": "Orders", "queue": 0, "start": 0, "end": n, "failOnDataLoss": fail,
            "source": {"mode": "broker", "endpoint": endpoint, "timeoutMs": 30000}}


def test_broker_mode_reads_checked_frames(jvm):
    recs = varied(40)
    with fake_pull_server(recs) as ep:
        assert read_one(jvm, broker_part(ep, 40)) == list(range(40))
        with pytest.raises(Exception, match="DataLossError: 5 offsets"):
            read_one(jvm, broker_part(ep, 45))                       # the queue ends at 40
        assert read_one(jvm, broker_part(ep, 45, fail=False)) == list(range(40))


def test_broker_mode_pulls_what_one_answer_holds(jvm):
    """A broker's answer stops at its byte bound (its gRPC message limit): the reader sizes each pull's
    count to fit it, from the records' size in the answer before, so the pull under way after an answer,
    asked from where it ends, is the one read next: the server sends every record once, no answer is
    made for nothing (a pull of more than one answer holds came back short and the one after it was
    dropped)."""
    recs = [record(i, {"UNIQ_KEY": f"01{i:032X}"}, body=b"%01000d" % i) for i in range(12_000)]   # ~1 KiB each
    assert len({len(r) for r in recs}) == 1
    served = []
    with fake_pull_server(recs, bytes_max=(4 << 20) + (512 << 10), served=served) as ep:     # the broker's default
        assert read_one(jvm, broker_part(ep, len(recs))) == list(range(len(recs)))
    served.sort()
    assert [at for at, _ in served] == [0] + list(itertools.accumulate(n for _, n in served[:-1])), served
    assert sum(n for _, n in served) == len(recs), served


@pytest.mark.parametrize("says_bound", [True, False])
def test_broker_mode_sizes_its_pulls_to_a_brokers_smaller_bound(jvm, says_bound):
    """A broker configured to bound its answers below what the reader asks for (a small
    grpc_message_bytes_max or pull_records_bytes_max) says its bound in each answer (bytes_max): the
    pulls after the first are sized to it, so each answer again ends where its count says and the pull
    under way after it is the one read next (every record sent once). A broker that does not say it
    still has every record read once (its short answers make the pulls ahead of them useless)."""
    recs = [record(i, {"UNIQ_KEY": f"01{i:032X}"}, body=b"%01000d" % i) for i in range(8_000)]   # ~1 KiB each
    served = []
    with fake_pull_server(recs, bytes_max=(128 << 10) + 4096, served=served, says_bound=says_bound) as ep:
        assert read_one(jvm, broker_part(ep, len(recs))) == list(range(len(recs)))
    served.sort()
    if says_bound:
        assert [at for at, _ in served] == [0] + list(itertools.accumulate(n for _, n in served[:-1])), served
        assert sum(n for _, n in served) == len(recs), served
    assert max(n for _, n in served) * len(recs[0]) <= 128 << 10


def test_every_field_of_a_row_is_the_codecs(jvm):
    """Rows as the codec decodes their records: tags absent (null), keys absent ([]) or several, no
    UNIQ_KEY (the offset message id), non-ASCII property values, an empty body."""
    from tidemq.record import codec
    recs = varied(40)
    with fake_pull_server(recs) as ep:
        rows = jvm.rows(json.dumps(broker_part(ep, 40)))
    assert len(rows) == 40
    for rec, v in zip(recs, rows):
        m = codec.decode_record(rec, 0)
        kv = list(v[8])
        got = dict(topic=v[0], queue_id=v[1], queue_offset=v[2], commitlog_offset=v[3], msg_id=v[4], tags=v[5],
                   keys=list(v[6]), body=bytes(v[7]), properties=sorted(zip(kv[::2], kv[1::2])),
                   born=v[9] // 1000, stored=v[10] // 1000)
        assert got == dict(topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset,
                           commitlog_offset=m.commitlog_offset, msg_id=m.msg_id, tags=m.tags, keys=m.keys, body=m.body,
                           properties=sorted(m.properties.items()), born=m.born_timestamp_ms,
                           stored=m.store_timestamp_ms)


def flip(at):
    def mangle(header, sizes, body):
        body[at] ^= 0x01
        return header, sizes, body
    return mangle


def test_a_frame_failing_its_crc_is_refused(jvm):
    with fake_pull_server(varied(10), flip(200)) as ep:
        with pytest.raises(Exception, match="fails its frame CRC"):
            read_one(jvm, broker_part(ep, 10, fail=False))


def test_without_a_frame_crc_every_records_crcs_are_checked(jvm):
    recs = varied(10)
    second = len(recs[0])

    def mangle(header, sizes, body):
        header.pop("crc32")
        body[second + 95] ^= 0x01                                    # record 1's body (or its tail)
        return header, sizes, body
    with fake_pull_server(recs, mangle) as ep:
        with pytest.raises(Exception, match="DataLossError: 1 offsets"):
            read_one(jvm, broker_part(ep, 10))
        assert read_one(jvm, broker_part(ep, 10, fail=False)) == [0] + list(range(2, 10))


def test_a_frame_whose_sizes_do_not_fit_is_refused(jvm):
    def mangle(header, sizes, body):
        header["count"] = 10_000
        return header, sizes, body
    with fake_pull_server(varied(10), mangle) as ep:
        with pytest.raises(Exception, match="sizes do not fit"):
            read_one(jvm, broker_part(ep, 10))


def test_the_reader_option_is_checked(spark, jvm, tmp_path):
    root = damaged_store(tmp_path / "store", 11)
    r = spark.read.format("tidemq").option("path", root).option("topic", "D").option("failOnDataLoss", "false")
    with pytest.raises(Exception, match="option reader must be auto, jvm or python, not 'rust'"):
        r.option("reader", "rust").load().count()
    assert r.option("reader", "jvm").load().count() == 48 == r.option("reader", "python").load().count()


def test_a_stream_checkpointed_by_one_reader_goes_on_with_the_other(spark, jvm, broker, tmp_path):
    """Both readers checkpoint offsets as {"topic": {"queue id": offset}}: a query restarted with the
    other reader reads only what came after, each message once."""
    from ..support.spark import fill_through_broker
    b = broker()
    fill_through_broker(b.endpoint, topic="S", batches=1, per=200)
    out, ck = tmp_path / "out", tmp_path / "checkpoint"

    def run(reader):
        q = (spark.readStream.format("tidemq").option("endpoints", b.endpoint).option("topic", "S")
             .option("startingOffsets", "earliest").option("reader", reader).load()
             .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ck))
             .trigger(availableNow=True).start())
        assert q.awaitTermination(600) and q.exception() is None
        return sum(p["numInputRows"] for p in q.recentProgress)
    assert run("python") == 200
    fill_through_broker(b.endpoint, topic="S", batches=1, per=120)
    assert run("jvm") == 120
    fill_through_broker(b.endpoint, topic="S", batches=1, per=80)
    assert run("python") == 80
    got = spark.read.parquet(str(out))
    assert got.count() == 400 and got.select("topic", "queue_id", "queue_offset").distinct().count() == 400


def test_planner_processes_end_with_their_query(spark, jvm, tmp_path):
    """A batch read hands its planner back once planned, a stream holds one until it stops; with
    spark.tidemq.plannerIdleSeconds=0 none is kept for the next query: none is left alive."""
    from ..support.wait import wait_until
    root = str(tmp_path / "store")
    s = MessageStore(StoreConfig(root_dir=root, segment_size_bytes=64 * 1024, index_enabled=False)).start()
    s.create_topic("P", 2)
    s.put_batch([Message(topic="P", body=b"p%d" % i) for i in range(20)])
    s.shutdown()
    spark.conf.set("spark.tidemq.plannerIdleSeconds", "0")
    try:
        wait_until(lambda: jvm.plannersAlive() == 0, "idle planners of earlier tests ended", 120)
        assert spark.read.format("tidemq").option("path", root).option("topic", "P").load().count() == 20
        assert jvm.plannersAlive() == 0
        q = (spark.readStream.format("tidemq").option("path", root).option("topic", "P")
             .option("startingOffsets", "earliest").load()
             .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "chk")).start())
        try:
            q.processAllAvailable()
            assert jvm.plannersAlive() == 1
        finally:
            q.stop()
        assert jvm.plannersAlive() == 0
    finally:
        spark.conf.unset("spark.tidemq.plannerIdleSeconds")


def test_the_jvm_reader_signs_as_the_python_client(jvm):
    """Connection.java's authorization header is tidemq.protocol.signing's, byte for byte."""
    from tidemq.protocol.signing import AUTH_HEADER, signed_metadata
    for ak, sk, dt in (("tidemq-ak", "s3cret-sk", "20250101T120000Z"), ("u", "ünï ✓ secret", "20261127T235959Z")):
        assert jvm.authorization(ak, sk, dt) == dict(signed_metadata(ak, sk, dt))[AUTH_HEADER]


def test_file_mode_never_makes_a_row_of_a_record_its_unit_does_not_stand_for(jvm, tmp_path):
    """Consume-queue units carry no CRC: one damaged to point at an intact record of another topic,
    queue or queue offset is never a row of the queue read. The record it stood for is intact in the
    log: found again there (FileRangeReader.find, as the Python reader and the broker's read path find
    it: tests/spark/test_backend.py) and read; a damaged unit whose record is damaged too is an offset
    not served (a data loss)."""
    import os

    from tidemq.io import OsFileIO
    from tidemq.layout import list_segments

    from ..support.spark import stranger_units
    root = tmp_path / "store"
    stranger_units(StoreConfig(root_dir=str(root), segment_size_bytes=64 * 1024, index_enabled=False))
    part = planner.handle(json.dumps({"op": "batch", "options": {"path": str(root), "topic": "A"}}).encode())
    part = next(p for p in part["partitions"] if p["queue"] == 0)
    assert read_one(jvm, part) == [0, 1, 2, 3], "each found again in the log, no stranger"
    [(start, seg)] = list_segments(OsFileIO(), os.path.join(str(root), "commitlog"))
    from tidemq.spark.backend import FileBackend
    fb = FileBackend(str(root))                   # where a1's record is (the Python reader finds it again)
    try:
        [a1] = [r["commitlog_offset"] for batch, _ in fb.read("A", 0, 0, 4) for r in batch.to_pylist()
                if r["body"] == b"a1"]
    finally:
        fb.close()
    with open(seg, "r+b") as f:                   # a1's record damaged too: not in the log any more
        f.seek(a1 - start + 88)
        b = f.read(1)
        f.seek(a1 - start + 88)
        f.write(bytes([b[0] ^ 1]))
    with pytest.raises(Exception, match="DataLossError: 1 offsets of A queue 0 in \\[0, 4\\)"):
        read_one(jvm, part)
    assert read_one(jvm, {**part, "failOnDataLoss": False}) == [0, 2, 3]


def test_a_damaged_unit_past_the_last_segment_is_found_again_and_a_missing_segment_is_an_incomplete_store(jvm, tmp_path):
    """The JVM reader as the Python one (tests/spark/test_backend.py): a unit damaged to point past the
    last segment is a damaged unit (its record found again in the log), not 'is commitlogDirs complete?';
    a segment missing from the directories read (a gap in the listing) is an IncompleteStoreError."""
    from tidemq.io import OsFileIO
    from tidemq.layout import list_segments, queue_dir
    from tidemq.store.consume_queue import UNIT

    from ..support.spark import stranger_units
    root = tmp_path / "store"
    stranger_units(StoreConfig(root_dir=str(root), segment_size_bytes=64 * 1024, index_enabled=False))
    [(_, cq)] = list_segments(OsFileIO(), queue_dir(os.path.join(str(root), "consumequeue"), "A", 0))
    fd = os.open(cq, os.O_WRONLY)
    try:
        os.pwrite(fd, UNIT.pack(1 << 40, 120, 0), 1 * UNIT.size)     # a1's unit: far past the log's end
    finally:
        os.close(fd)
    part = planner.handle(json.dumps({"op": "batch", "options": {"path": str(root), "topic": "A"}}).encode())
    part = next(p for p in part["partitions"] if p["queue"] == 0)
    assert read_one(jvm, part) == [0, 1, 2, 3], "found again in the log"

    root = tmp_path / "gap"
    s = MessageStore(StoreConfig(root_dir=str(root), segment_size_bytes=4096, index_enabled=False)).start()
    s.create_topic("D", 1)
    for i in range(120):
        assert s.put(Message(topic="D", body=b"x" * 100)).ok
    s.shutdown()
    segs = list_segments(OsFileIO(), os.path.join(str(root), "commitlog"))
    os.makedirs(tmp_path / "away")
    os.rename(segs[1][1], tmp_path / "away" / os.path.basename(segs[1][1]))
    part = planner.handle(json.dumps({"op": "batch", "options": {"path": str(root), "topic": "D"}}).encode())
    [part] = part["partitions"]
    with pytest.raises(Exception) as e:
        read_one(jvm, part)
    from py4j.java_gateway import get_field
    err = e.value.java_exception
    assert err.getClass().getName() == "org.tidemq.spark.IncompleteStoreError" and get_field(err, "why") == "gap"
