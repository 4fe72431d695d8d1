"""Bulk decoding against the record codec, record by record (no Spark needed); what importing the
reader costs a planning process."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tidemq.spark.decode import decode, positions_of
from tidemq.record import codec

from ..support.records import HOST, record, varied

def expected(rec):
    m = codec.decode_record(rec, 0)
    return dict(topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset, commitlog_offset=m.commitlog_offset,
                msg_id=m.msg_id, tags=m.tags, keys=m.keys, body=m.body, properties=sorted(m.properties.items()),
                born=m.born_timestamp_ms, stored=m.store_timestamp_ms)


def actual(row):
    return dict(topic=row["topic"], queue_id=row["queue_id"], queue_offset=row["queue_offset"],
                commitlog_offset=row["commitlog_offset"], msg_id=row["msg_id"], tags=row["tags"], keys=row["keys"],
                body=row["body"], properties=sorted(row["properties"]),
                born=int(row["born_timestamp"].timestamp() * 1000), stored=int(row["store_timestamp"].timestamp() * 1000))


def test_every_field_matches_the_codec():
    recs = varied(200)
    data = b"".join(recs)
    sizes = np.array([len(r) for r in recs])
    batch, skipped = decode(data, positions_of(sizes), sizes)
    assert skipped == 0 and batch.num_rows == 200
    for rec, row in zip(recs, batch.to_pylist()):
        assert actual(row) == expected(rec)


def test_records_at_scattered_positions_of_a_larger_buffer():
    recs = varied(50)
    buf = bytearray(64)
    positions = []
    for r in recs:
        positions.append(len(buf))
        buf += r + b"\x00" * 17            # other queues' records sit in between
    batch, skipped = decode(bytes(buf), np.array(positions), np.array([len(r) for r in recs]))
    assert skipped == 0
    assert [actual(r) for r in batch.to_pylist()] == [expected(r) for r in recs]


def test_malformed_records_are_skipped_and_counted():
    recs = varied(20)
    data = bytearray(b"".join(recs))
    sizes = np.array([len(r) for r in recs])
    pos = positions_of(sizes)
    data[pos[3] + 4:pos[3] + 8] = b"\x00\x00\x00\x00"             # magic of record 3 gone
    data[pos[7] + 84:pos[7] + 88] = (10 ** 6).to_bytes(4, "big")  # body length of record 7 beyond its size
    sizes2 = sizes.copy()
    sizes2[12] += 5                                               # the consume queue's size disagrees
    batch, skipped = decode(bytes(data), pos, sizes2)
    assert skipped == 3
    assert [r["queue_offset"] for r in batch.to_pylist()] == [i for i in range(20) if i not in (3, 7, 12)]


def test_records_failing_their_crc_are_skipped_and_counted():
    """Well-formed but damaged (a body byte, a header field, a property byte flipped): never
    decoded as valid rows (issue 12)."""
    recs = varied(20)
    data = bytearray(b"".join(recs))
    sizes = np.array([len(r) for r in recs])
    pos = positions_of(sizes)
    data[pos[2] + 90] ^= 0x01                                     # a body byte (or TOPICLEN if empty)
    data[pos[9] + 20] ^= 0x01                                     # QUEUEOFFSET
    data[pos[15] + sizes[15] - 15] ^= 0x01                        # inside the record-CRC property's mark
    batch, skipped = decode(bytes(data), pos, sizes)
    assert skipped == 3
    assert [r["queue_offset"] for r in batch.to_pylist()] == [i for i in range(20) if i not in (2, 9, 15)]


def test_records_whose_crcs_were_checked_on_the_way_get_their_layout_checked_only():
    """crc_checked (a broker's pull under a frame CRC, the archive's walk): no CRC again, but a
    record that is not well-formed is still never a row."""
    recs = varied(20)
    data = bytearray(b"".join(recs))
    sizes = np.array([len(r) for r in recs])
    pos = positions_of(sizes)
    data[pos[3] + 4:pos[3] + 8] = b"\x00\x00\x00\x00"             # magic of record 3 gone
    batch, skipped = decode(bytes(data), pos, sizes, crc_checked=True)
    assert skipped == 1 and [actual(r) for r in batch.to_pylist()] == [expected(r) for k, r in enumerate(recs)
                                                                        if k != 3]


def test_positions_past_the_buffer_are_skipped():
    recs = varied(3)
    data = b"".join(recs)
    sizes = np.array([len(r) for r in recs])
    pos = positions_of(sizes)
    pos[2] = len(data) - 10
    batch, skipped = decode(data, pos, sizes)
    assert (batch.num_rows, skipped) == (2, 1)


@pytest.mark.parametrize("n", [0, 1])
def test_tiny_batches(n):
    recs = varied(n)
    sizes = np.array([len(r) for r in recs], np.int64)
    batch, skipped = decode(b"".join(recs), positions_of(sizes), sizes)
    assert (batch.num_rows, skipped) == (n, 0)


def test_records_of_several_topics_of_the_same_length_keep_their_topics():
    recs = [record(i, {}, topic=b"Orders" if i % 2 else b"Refund") for i in range(10)]
    sizes = np.array([len(r) for r in recs])
    batch, _ = decode(b"".join(recs), positions_of(sizes), sizes)
    assert batch.column("topic").to_pylist() == ["Orders" if i % 2 else "Refund" for i in range(10)]


def test_odd_keys_unique_keys_and_non_utf8_properties_read_as_the_codec_reads_them():
    recs = [record(0, {"KEYS": "a  b ", "UNIQ_KEY": ""}), record(1, {"KEYS": ""}), record(2, {}),
            codec.encode_record(body=b"x", topic=b"T", properties=b"bad\x01\xff\xfe\x02", queue_id=0, queue_offset=3,
                                physical_offset=0, born_timestamp_ms=0, born_host=HOST, store_timestamp_ms=0,
                                store_host=HOST)]
    sizes = np.array([len(r) for r in recs])
    batch, skipped = decode(b"".join(recs), positions_of(sizes), sizes)
    assert skipped == 0
    for rec, row in zip(recs, batch.to_pylist()):
        assert actual(row) == expected(rec)


def test_the_reader_imports_no_pandas_until_it_decodes():
    """Spark's planner workers (the streaming source runner, the batch planner) import the reader,
    tidemq.spark.source, to plan; pandas (~1 s of a loaded machine's CPU to import) is needed by
    pyarrow's conversion of Python objects only, which decoding does, planning does not (the
    module-level constants of decode.py and backend.py made with it imported pandas). In a fresh
    interpreter: not imported by the import; a decode reads as before."""
    code = ("import json, sys\n"
            "import tidemq.spark.source\n"
            "planned = 'pandas' in sys.modules\n"
            "import numpy as np\n"
            "from tidemq.spark.decode import decode, positions_of\n"
            "from tests.support.records import varied\n"
            "recs = varied(20)\n"
            "sizes = np.array([len(r) for r in recs])\n"
            "batch, skipped = decode(b''.join(recs), positions_of(sizes), sizes)\n"
            "print(json.dumps([planned, batch.num_rows, skipped]))\n")
    from ..support.brokers import REPO
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [False, 20, 0]
