"""A follower's one pass over a frame (store/replica_scan.py): what it builds for the dispatch is
what the leader's put path wrote into its consume queues and index (units byte for byte, the
index keys' hashes), both ways (the compiled pass and its twin); records of a deleted topic are
left out; queues that do not go on in order leave the dispatch to the log; what is not a frame
to write is refused before a byte is written."""

import os

import pytest

from tidemq.record import codec
from tidemq.store import Message, MessageStore, replica_scan
from tidemq.store.consume_queue import UNIT
from tidemq.store.index_file import HASHED_ITEM, key_hash
from tidemq.store.replica import ReplicaError

from tests.support.store import small_config

SEG = 64 * 1024
BOTH = [pytest.param(replica_scan.scan, id="selected"), pytest.param(replica_scan.py_scan, id="twin")]


def _cq_bytes(root, topic: str, qid: int) -> bytes:
    d = os.path.join(root, "consumequeue", topic, str(qid))
    return b"".join(open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d)))


@pytest.mark.parametrize("scan", BOTH)
def test_units_and_index_items_are_what_the_put_path_wrote(tmp_path, scan):
    with MessageStore(small_config(tmp_path)).start() as leader:
        msgs = [Message("T", f"m{i}".encode() * 20, tags=["a", "é✓", None, ""][i % 4],
                        keys=[[f"k{i}", f"x{i}"], [], [f"k{i}"], []][i % 4], queue_id=i % 2) for i in range(40)]
        msgs += [Message("U", b"u", tags="t", keys=["uk"], properties={"p": "v"})]
        leader.put_batch(msgs)
        leader.flush_queues()
        off, data = leader.replica.read(0, SEG)
        code, at, last_ts, ends, groups, index = scan(data, off, SEG, {}, True)
        assert (code, at, ends) == (replica_scan.OK, len(data), False) and last_ts > 0
        assert [(t, q, first) for t, q, first, _ in groups] == [("T", 0, 0), ("T", 1, 0), ("U", 0, 0)]
        for t, q, _, units in groups:
            assert bytes(units) == _cq_bytes(str(tmp_path), t, q)[:len(units)]
        want = []
        for m, (phys, props) in zip(msgs, _records(data)):
            uniq = codec.decode_properties(props).get(codec.PROP_UNIQ_KEY)
            want += [(key_hash(f"{m.topic}#{k}"), phys) for k in (*m.keys, uniq) if k]
        assert list(HASHED_ITEM.iter_unpack(bytes(index))) == want
        assert scan(data, off, SEG, {}, False)[5] is None
        # a topic deleted after some of its records: those are left out
        phys = _records(data)
        dead_below = phys[10][0]
        _, _, _, _, groups, index = scan(data, off, SEG, {"T": dead_below}, True)
        assert [(t, q, first, len(u) // 20) for t, q, first, u in groups] == [("T", 0, 5, 15), ("T", 1, 5, 15),
                                                                              ("U", 0, 0, 1)]
        assert all(p >= dead_below for _, p in HASHED_ITEM.iter_unpack(bytes(index)))


def _records(data) -> list[tuple[int, bytes]]:
    """(offset, raw properties) of each record in ``data`` (a frame read from offset 0)."""
    out, pos = [], 0
    while pos < len(data):
        size = codec.I32.unpack_from(data, pos)[0]
        blen = codec.I32.unpack_from(data, pos + codec.OFF_BODYLEN)[0]
        t0 = pos + codec.OFF_BODY + blen + 1
        p0 = t0 + data[t0 - 1] + 2
        out.append((pos, bytes(data[p0:pos + size])))
        pos += size
    return out


def _record(topic: bytes, qid: int, qoff: int, phys: int) -> bytes:
    return codec.encode_record(body=b"b", topic=topic, properties=b"TAGS\x01x\x02", queue_id=qid, queue_offset=qoff,
                               physical_offset=phys, born_timestamp_ms=1, born_host=b"\0" * 8,
                               store_timestamp_ms=2, store_host=b"\0" * 8)


@pytest.mark.parametrize("scan", BOTH)
def test_a_queue_that_does_not_go_on_in_order_leaves_the_dispatch_to_the_log(scan):
    a = _record(b"T", 0, 7, 0)
    b = _record(b"T", 0, 9, len(a))
    data = a + b
    assert scan(data, 0, SEG, {}, True)[:5] == (replica_scan.OK, len(data), 2, False, None)
    c = _record(b"T", 0, 8, len(a))
    units = UNIT.pack(0, len(a), codec.tags_hash("x")) + UNIT.pack(len(a), len(c), codec.tags_hash("x"))
    assert scan(a + c, 0, SEG, {}, True)[4] == [("T", 0, 7, bytearray(units))]


@pytest.mark.parametrize("scan", BOTH)
def test_what_is_not_a_frame_to_write_is_named(scan):
    a = _record(b"T", 0, 0, 100)
    assert scan(a, 100, SEG, {}, True)[0] == replica_scan.OK
    assert scan(a, 101, SEG, {}, True)[:2] == (replica_scan.OTHER_OFFSET, 0)
    assert scan(a, SEG - 50, SEG, {}, True)[:2] == (replica_scan.CROSSES, 0)
    assert scan(a[:-1], 100, SEG, {}, True)[:2] == (replica_scan.NOT_WHOLE, 0)
    assert scan(a + b"\0" * 8, 100, SEG, {}, True)[:2] == (replica_scan.NOT_WHOLE, len(a))
    bad = bytearray(a)
    bad[codec.OFF_BODYLEN + 3] += 1
    assert scan(bytes(bad), 100, SEG, {}, True)[:2] == (replica_scan.DAMAGED, 0)
    assert scan(_record("é".encode(), 0, 0, 100), 100, SEG, {}, True)[:2] == (replica_scan.TOPIC, 0)
    blank = codec.encode_blank(SEG - 100 - len(a))
    assert scan(a + blank, 100, SEG, {}, True)[:4] == (replica_scan.OK, len(a), 2, True)
    assert scan(a + blank[:8], 100, SEG, {}, True)[:4] == (replica_scan.OK, len(a), 2, True)
    assert scan(a + blank[:8] + b"x", 100, SEG, {}, True)[:2] == (replica_scan.BLANK_NOT_END, len(a))


def test_a_record_naming_a_topic_that_is_not_ascii_is_refused_before_a_byte_is_written(tmp_path):
    with MessageStore(small_config(tmp_path)).start() as follower:
        follower.follow("a follower")
        good = _record(b"T", 0, 0, 0)
        bad = _record("é".encode(), 0, 0, len(good))
        with pytest.raises(ReplicaError, match="not ASCII"):
            follower.replica.append(0, good + bad)
        assert follower.replica.end == 0
        assert follower.replica.append(0, good) == len(good)
