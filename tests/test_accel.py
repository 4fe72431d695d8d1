"""The compiled record loops (tidemq._accel, src/tidemq/accel_c/) and their pure-Python twins give
the same bytes and the same outcomes: random batches, random frames, damaged records. The rest
of the suite runs against whichever tidemq.accel selected (.ci/run runs it both ways)."""

from __future__ import annotations

import copy
import os
import random
import zlib
from array import array

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq import accel
from tidemq.broker.produce import send_records
from tidemq.protocol.send_frame import ID_MAX_BYTES, FrameError, encode_request
from tidemq.store import codec, index_file, integrity, record_loop, writer
from tidemq.store.topics import TopicState

try:
    from tidemq import _accel
except ImportError:                     # not built: nothing to compare (the Python twins run everywhere)
    _accel = None

pytestmark = pytest.mark.skipif(_accel is None, reason="tidemq._accel is not built (no C compiler at install)")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_selection_follows_the_switch():
    assert accel.VERSION == _accel.VERSION
    if os.environ.get("TIDEMQ_ACCEL", "1") == "0":
        assert accel.ACCEL is None and record_loop.append is record_loop.py_append
    else:
        assert accel.ACCEL is _accel and record_loop.append is _accel.append


@SETTINGS
@given(st.binary(max_size=3000), st.integers(0, 2**32 - 1))
def test_crc32_is_zlibs(data, value):
    assert _accel.crc32(data, value) == zlib.crc32(data, value)
    assert _accel.crc32(data) == zlib.crc32(data)


# append ------------------------------------------------------------------------------------------
def _topic(name: str, queues: int, rnd: random.Random) -> TopicState:
    t = TopicState(name, queues)
    t.queues = [f"{name}/{q}" for q in range(queues)]     # any hashable stands for a consume queue
    t.next_offsets = [rnd.randrange(0, 1 << 40) for _ in range(queues)]
    t.rr = rnd.randrange(0, 1000)
    pick = rnd.randrange(4)           # the queues puts without a queue id go to (a topic spread over groups)
    if pick == 1:
        t.write_ids = tuple(sorted(rnd.sample(range(queues), rnd.randrange(1, queues + 1))))
    elif pick == 2:
        t.write_ids = range(queues - 1, -1, -2) if queues > 1 else range(1)
    elif pick == 3 and rnd.random() < 0.3:
        t.write_ids = rnd.choice([(), (queues,), (-1,)])    # refused: no queue, or not one of the topic's
    return t


@st.composite
def batches(draw):
    rnd = draw(st.randoms(use_true_random=False))
    topics = [_topic(draw(st.sampled_from(["T", "Orders", "x" * 100])) + str(k), draw(st.integers(1, 5)), rnd)
              for k in range(draw(st.integers(1, 3)))]
    items = []
    for i in range(draw(st.integers(1, 25))):
        t = draw(st.sampled_from(topics))
        body = draw(st.binary(max_size=2000))
        props = draw(st.binary(max_size=60)) + codec.RECORD_CRC_TAIL
        known = draw(st.booleans())
        items.append((i, body, t, props, draw(st.one_of(st.none(), st.integers(0, t.queue_count - 1))),
                      draw(st.integers(-(1 << 63), (1 << 63) - 1)), draw(st.binary(min_size=8, max_size=8)),
                      draw(st.integers(-(1 << 31), (1 << 31) - 1)), draw(st.integers(0, 7)),
                      draw(st.integers(0, 16)), draw(st.integers(0, 1 << 40)),
                      codec.body_crc(body) if known else None, draw(st.integers(-(1 << 63), (1 << 63) - 1)),
                      draw(st.one_of(st.none(), st.just([f"{t.name}#k{i}"]))),
                      draw(st.one_of(st.none(), st.just(f"U{i}"))),
                      codec.tail_crc(t.name_bytes, props) if known else None))
    return topics, items


def _run_append(fn, topics, items, size, limit_cut):
    topics = copy.deepcopy(topics)
    by_name = {t.name: t for t in topics}
    batch = [(it[0], it[1], by_name[it[2].name], *it[3:]) for it in items]
    buf = bytearray(size)
    n = len(batch)
    res = (array("q", bytes(8 * n)), array("i", bytes(4 * n)), array("i", bytes(4 * n)), array("q", bytes(8 * n)),
           [None] * n)
    units: dict = {}
    index_items: list = []
    out = []
    k, pos = 0, 0
    while k < n:
        k2, pos, err = fn(batch, k, buf, pos, size - limit_cut, 1 << 30, 1234567, b"\x7f\0\0\x01\0\0\x27\x10",
                          units, index_items, *res)
        out.append((k2, pos, type(err)))
        if err is not None or k2 == k:
            break
        k = k2
        pos = 0 if k < n else pos        # as a roll would: the rest into a fresh "segment" (same buffer)
    return (bytes(buf), out, {cq: (u[0], bytes(u[1])) for cq, u in units.items()}, index_items,
            [r.tolist() if isinstance(r, array) else r for r in res],
            [(t.rr, t.next_offsets) for t in topics])


@SETTINGS
@given(batches(), st.integers(0, 3000))
def test_append_writes_the_same_bytes_and_outcomes(b, cut):
    topics, items = b
    size = 20_000
    assert _run_append(_accel.append, topics, items, size, cut) == \
        _run_append(record_loop.py_append, topics, items, size, cut)


def test_appended_records_verify_and_decode():
    topics, items = [_topic("T", 3, random.Random(1))], []
    t = topics[0]
    for i in range(50):
        body = os.urandom(i * 13)
        props = codec.encode_properties({"TAGS": "a", "UNIQ_KEY": f"u{i}"}) + codec.RECORD_CRC_TAIL
        items.append((i, body, t, props, None, 5, b"\0" * 8, 0, 0, 0, 0, None, 0, None, None, None))
    buf, out, *_ = _run_append(_accel.append, topics, items, 100_000, 8)
    pos, n, _ = codec.py_scan_run(buf, 0, out[-1][1])
    assert n == 50 and pos == out[-1][1]


# the read side --------------------------------------------------------------------------------------
def _records(n: int, damage: bool):
    rnd = random.Random(n)
    recs = [codec.encode_record(body=rnd.randbytes(rnd.randrange(0, 500)), topic=b"T", properties=b"a\x01b\x02",
                                queue_id=1, queue_offset=i, physical_offset=0, born_timestamp_ms=1,
                                born_host=b"\0" * 8, store_timestamp_ms=2, store_host=b"\0" * 8) for i in range(n)]
    data = bytearray(b"".join(recs))
    if damage and data:
        for _ in range(3):
            data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
    return bytes(data), [len(r) for r in recs]


@pytest.mark.parametrize("seed", range(40))
def test_scan_damaged_and_decode_agree(seed):
    data, sizes = _records(seed % 20, damage=seed >= 20)
    starts = np.cumsum([0] + sizes).astype(np.int64)[:-1]
    pa, pb = [], []
    assert _accel.scan_run(data, 0, len(data), pa) == codec.py_scan_run(data, 0, len(data), pb) and pa == pb
    assert _accel.damaged(data, starts, np.asarray(sizes, np.int64)) == \
        integrity.py_damaged_records(data, starts, sizes)
    if seed < 20:
        a = _accel.decode_run(codec.StoredMessage, data, array("i", sizes))
        b = codec.py_decode_records(data, sizes)
        assert [(m._head, m.body, m._tail, m.queue_offset, m.properties) for m in a] == \
            [(m._head, m.body, m._tail, m.queue_offset, m.properties) for m in b]


def test_decode_run_refuses_what_decode_record_refuses():
    data, sizes = _records(3, damage=False)
    bad = bytearray(data)
    bad[4] ^= 0xFF                                     # the magic of the first record
    with pytest.raises(ValueError):
        _accel.decode_run(codec.StoredMessage, bytes(bad), array("i", sizes))
    with pytest.raises(codec.CodecError):
        codec.py_decode_records(bytes(bad), sizes)
    with pytest.raises(ValueError):
        _accel.decode_run(codec.StoredMessage, data, array("i", [sizes[0] + 1, *sizes[1:]]))


# the index -------------------------------------------------------------------------------------------
class _File:
    def __init__(self, slots: int, entries: int) -> None:
        self.slots, self.entries = slots, entries
        self.entries_at = index_file.HEADER.size + slots * 4
        self.buf = memoryview(bytearray(index_file.index_file_size(slots, entries)))
        self.count = 1


@SETTINGS
@given(st.lists(st.tuples(st.text(max_size=12), st.integers(0, 1 << 50)), max_size=80), st.integers(1, 17))
def test_index_entries_are_the_same(items, slots):
    a, b = _File(slots, 100), _File(slots, 100)
    count, last = _accel.index_put(a.buf, slots, a.entries_at, 1, items, 0, len(items), 7)
    phy = index_file.IndexFile._put_each(b, items, 0, len(items), 7)
    assert bytes(a.buf) == bytes(b.buf) and count == b.count and (not items or last == phy)


# SendRecords frames -------------------------------------------------------------------------------------
TEXTS = [b"", b"a", b"tag", b"x\x01y", b"\x02", b"\xff", "é€😀".encode(), b"a b", b"a  b", b" a", b"k1 k2"]
PROPS = [b"", b"p\x01v\x02", b"p\x01v", b"\x01v\x02", b"p\x01v\x01w\x02", b"TAGS\x01x\x02", b"__CRC32#\x01x\x02",
         b"\xfe\x01v\x02", b"a\x01\x02b\x01c\x02", "ü\x01ä\x02".encode()]


@st.composite
def frames(draw):
    n = draw(st.integers(1, 12))
    ids = [draw(st.sampled_from([b"", b"id", b"x" * ID_MAX_BYTES, b"x" * (ID_MAX_BYTES + 1), b"a\x01", b"\xc3",
                                 b"ID-%d" % i])) for i in range(n)]
    bodies = [draw(st.sampled_from([b"", b"b", b"body" * 40])) for _ in range(n)]
    pick = lambda options: [draw(st.sampled_from(options)) for _ in range(n)]  # noqa: E731
    return encode_request(draw(st.sampled_from(["T", "Topic_1"])), bodies, ids, pick(TEXTS), pick(TEXTS),
                          pick(PROPS))


@SETTINGS
@given(frames())
def test_frames_become_the_same_columns(raw):
    assert _accel.send_frame(raw, send_records.RESERVED, ID_MAX_BYTES) == send_records.py_frame_columns(raw)


@pytest.mark.parametrize("raw", [b"", b"TQB1", b"XXXX" + bytes(6), encode_request("T", [b"b"], [b"i"])[:-1],
                                 encode_request("T", [b"b"], [b"i"]) + b"!", b"TQB1\0\0\0\0\1\0T",
                                 b"TQB1\1\0\0\0\1\0\xff" + bytes(20)])
def test_bad_frames_are_refused_in_the_same_words(raw):
    with pytest.raises(FrameError) as py:
        send_records.py_frame_columns(raw)
    with pytest.raises(ValueError) as c:
        _accel.send_frame(raw, send_records.RESERVED, ID_MAX_BYTES)
    assert str(c.value) == str(py.value)


@SETTINGS
@given(frames(), st.booleans(), st.integers(0, 400))
def test_columns_become_the_same_prepared_messages(raw, index, max_body):
    topic, ids, bodies, props, ths, keys, refused = send_records.py_frame_columns(raw)
    t = TopicState(topic, 4)
    args = (t, bodies, props, ths, ids, keys, set(refused) or None, 99, b"\0" * 8, max_body, 150, 300,
            f"{topic}#" if index else None)
    assert _accel.prepare_columns(*args) == writer.py_prepare_columns(*args)
