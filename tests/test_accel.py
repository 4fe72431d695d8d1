"""The compiled record loops (tidemq._accel, src/tidemq/accel_c/) and their pure-Python twins give
the same bytes and the same outcomes: random batches, random frames, damaged records. The rest
of the suite runs against whichever tidemq.accel selected (.ci/run runs it both ways)."""

from __future__ import annotations

import copy
import errno
import os
import random
import zlib
from array import array

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq import accel
from tidemq.broker.produce import dedup, send_records
from tidemq.protocol.send_frame import ID_MAX_BYTES, FrameError, decode_request, encode_request
from tidemq.record import codec, framing, integrity
from tidemq.store import dispatch, index_file, record_loop, validate
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
    _put_entries = index_file.IndexFile._put_entries

    def __init__(self, slots: int, entries: int) -> None:
        self.slots, self.entries = slots, entries
        self.entries_at = index_file.HEADER.size + slots * 4
        self.buf = memoryview(bytearray(index_file.index_file_size(slots, entries)))
        self.count = 1


@SETTINGS
@given(st.lists(st.tuples(st.text(max_size=12), st.integers(0, 1 << 50)), max_size=80), st.integers(1, 17))
def test_index_entries_are_the_same(items, slots):
    a, b, c = _File(slots, 100), _File(slots, 100), _File(slots, 100)
    count, last = _accel.index_put(a.buf, slots, a.entries_at, 1, items, 0, len(items), 7)
    phy = index_file.IndexFile._put_each(b, items, 0, len(items), 7)
    assert bytes(a.buf) == bytes(b.buf) and count == b.count and (not items or last == phy)
    # the same entries from items hashed beforehand (append_slices' index items), both ways
    hashed = bytearray(b"".join(index_file.HASHED_ITEM.pack(index_file.key_hash(k), p) for k, p in items))
    count2, last2 = _accel.index_put_hashed(c.buf, slots, c.entries_at, 1, hashed, 0, len(items), 7)
    assert bytes(c.buf) == bytes(a.buf) and (count2, last2) == (count, last)
    d = _File(slots, 100)
    assert index_file.IndexFile._put_hashed_each(d, hashed, 0, len(items), 7) == phy and bytes(d.buf) == bytes(a.buf)


@SETTINGS
@given(st.lists(st.tuples(st.text(max_size=12), st.integers(0, 1 << 50)), max_size=80), st.integers(1, 17))
def test_index_slots_by_pwrite_are_the_mapped_ones(tmp_path_factory, items, slots):
    """index_put_slots (the slots by pwrite to the mapped file) writes what index_put_hashed writes
    through the mapping; a pwrite that fails puts nothing more and says why."""
    import mmap
    hashed = bytearray(b"".join(index_file.HASHED_ITEM.pack(index_file.key_hash(k), p) for k, p in items))
    a = _File(slots, 100)
    want = _accel.index_put_hashed(a.buf, slots, a.entries_at, 1, hashed, 0, len(items), 7)
    path = tmp_path_factory.mktemp("slots") / "ix"
    size = index_file.index_file_size(slots, 100)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    ro = os.open(path, os.O_RDONLY)
    try:
        os.ftruncate(fd, size)
        m = mmap.mmap(fd, size)
        try:
            count, last, err = _accel.index_put_slots(m, fd, slots, a.entries_at, 1, hashed, 0, len(items), 7)
            assert (count, last, err) == (*want, 0) and m[:] == bytes(a.buf)
            if items:
                assert _accel.index_put_slots(m, ro, slots, a.entries_at, count, hashed, 0, 1, 7) == \
                    (count, -1, errno.EBADF)
                with pytest.raises(ValueError):                   # entries past the file's end
                    _accel.index_put_slots(m, fd, slots, a.entries_at, 100, hashed, 0, 1, 7)
        finally:
            m.close()
    finally:
        os.close(fd)
        os.close(ro)


# The deferred dispatch's merge ---------------------------------------------------------------------------
class _Queue:
    """A consume queue as dispatch_merge sees one: a dict key by identity."""


def _dispatch_entries(seed: int, queues: list, index_kinds: str) -> list[tuple]:
    """Deferred dispatch entries as puts leave them (put_lock.py): per entry its queues' [first queue
    offset, units] (a bytearray, or bytes), its index items ((keys, phys) pairs or hashed items, or
    none) and its store time (several per second, seconds skipped)."""
    rng = random.Random(seed)
    now, out, next_q = 1_700_000_000_000 + rng.randrange(1000), [], {}
    for _ in range(rng.randrange(1, 12)):
        units = {}
        for q in rng.sample(queues, rng.randrange(0, len(queues) + 1)):
            n = rng.randrange(1, 4)
            raw = bytes(rng.randrange(256) for _ in range(20 * n))
            units[q] = [next_q.get(q, 0), bytearray(raw) if rng.random() < 0.8 else raw]
            next_q[q] = next_q.get(q, 0) + n
        kind = rng.choice(index_kinds)
        phys = rng.randrange(1 << 40)
        if kind == "p":
            items = [([rng.choice(["k", "a#b", "é€😀", "T#" + str(rng.randrange(99)), ""])
                       for _ in range(rng.randrange(0, 3))], phys + 100 * i) for i in range(rng.randrange(0, 3))]
        elif kind == "h":
            items = bytearray(b"".join(index_file.HASHED_ITEM.pack(rng.randrange(1 << 31), phys + i)
                                       for i in range(rng.randrange(0, 3))))
        else:
            items = []
        now += rng.choice([0, 1, 7, 400, 999, 1000, 2500])
        out.append((units, items, now, phys, phys + 1000))
    return out


@pytest.mark.parametrize("index_kinds", ["p", "h", "phn"])
@pytest.mark.parametrize("index", [True, False])
def test_dispatch_merge_is_its_twin(index_kinds, index):
    queues = [_Queue() for _ in range(4)]
    for seed in range(300):
        a = _dispatch_entries(seed, queues, index_kinds)
        b = _dispatch_entries(seed, queues, index_kinds)
        ua, ra = _accel.dispatch_merge(a, index)
        ub, rb = dispatch.py_dispatch_merge(b, index)
        assert list(ua) == list(ub)                  # the same queues, in the order they came first
        assert [(g[0], bytes(g[1]), type(g[1])) for g in ua.values()] == \
            [(g[0], bytes(g[1]), type(g[1])) for g in ub.values()] and all(type(g[1]) is bytearray for g in ua.values())
        assert [(bytes(x), t) for x, t in ra] == [(bytes(x), t) for x, t in rb]
        # what the merge stands for: each queue's units end to end from its first entry's offset, every
        # key hashed as key_hash hashes it, one run per second of store time
        c = _dispatch_entries(seed, queues, index_kinds)
        for q, g in ua.items():
            mine = [u[q] for u, *_ in c if q in u]
            assert g[0] == mine[0][0] and bytes(g[1]) == b"".join(bytes(x[1]) for x in mine)
        want = b"".join(bytes(items) if type(items) is bytearray else
                        b"".join(index_file.HASHED_ITEM.pack(index_file.key_hash(k), p) for ks, p in items for k in ks)
                        for _u, items, *_ in c) if index else b""
        assert b"".join(bytes(x) for x, _t in ra) == want
        assert len({t // 1000 for _x, t in ra}) == len(ra)


def test_dispatch_merge_checks_what_it_is_given():
    q = _Queue()
    good = ({q: [0, bytearray(20)]}, [(["k"], 5)], 1000, 0, 10)
    for bad in ([good[:4]], [list(good)], [({q: (0, bytearray(20))},) + good[1:]], [([],) + good[1:]],
                [good[:1] + ((["k"], 5),) + good[2:]], [good[:1] + ([("k", 5)],) + good[2:]],
                [good[:1] + ([([1], 5)],) + good[2:]], [good[:1] + ([(["k"], 5.0)],) + good[2:]],
                [good[:2] + (1000.0,) + good[3:]], [good[:1] + (b"items",) + good[2:]]):
        with pytest.raises(TypeError):
            _accel.dispatch_merge(bad, True)
    with pytest.raises(TypeError):
        _accel.dispatch_merge(tuple([good]), True)
    # the same units bytearray twice: never resized while its buffer is read
    u = bytearray(20)
    with pytest.raises(BufferError):
        _accel.dispatch_merge([({q: [0, u]}, [], 1000, 0, 10), ({q: [1, u]}, [], 1000, 10, 20)], True)



class _Meddler:
    """A consume queue whose __eq__ (run by the merge's lookup: the same hash) empties a list."""

    def __init__(self, victim=None, same=False) -> None:
        self.victim, self.same = victim, same

    def __hash__(self) -> int:
        return 1

    def __eq__(self, other) -> bool:
        if self.victim is not None:
            self.victim.clear()
        return self.same


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("same", [False, True])
def test_dispatch_merge_refuses_units_emptied_by_a_keys_eq(compiled, same):
    # the lookup of the second entry's queue runs the first queue's __eq__, which empties the pair the
    # merge goes on to read (the one it found, or the second entry's own): refused, not read past its end
    g1, g2 = [0, bytearray(20)], [1, bytearray(20)]
    first, second = _Meddler(g1 if same else g2, same), _Meddler()
    merge = _accel.dispatch_merge if compiled else dispatch.py_dispatch_merge
    with pytest.raises((TypeError, IndexError)):
        merge([({first: g1}, [], 1000, 0, 10), ({second: g2}, [], 1000, 10, 20)], False)

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
def test_frames_become_the_same_arrays(raw):
    key = os.urandom(16)
    assert _accel.frame_slices(raw, send_records.RESERVED_BYTES, ID_MAX_BYTES, key) == \
        send_records.py_frame_slices(raw, key=key)


@SETTINGS
@given(frames())
def test_frame_arrays_say_what_the_checks_say(raw):
    """Each message's fields and dedup key, against the frame decoded plainly (the verdicts are the
    Python twin's, whose words and checks tests/broker/produce hold)."""
    topic, msgs = decode_request(raw)
    t, fields, why, names, hashes = _accel.frame_slices(raw, send_records.RESERVED_BYTES, ID_MAX_BYTES, dedup.KEY)
    f = np.frombuffer(fields, np.uint32).reshape(-1, 10)
    for i, m in enumerate(msgs):
        assert [raw[f[i, j]:f[i, j] + f[i, 5 + j]] for j in range(5)] == list(m)
        w = why[i]
        usable = w in (0, send_records.BAD_PROPS_RESERVED)
        assert hashes[16 * i:16 * i + 16] == (dedup.py_id_hash(dedup.KEY, t.encode(), m[0]) if usable else bytes(16))
        assert (i in names) == (w == send_records.BAD_PROPS_RESERVED)


# The record validator's byte checks (store/validate.py, accel_c/validate.c) ----------------------------
def _slices_of(raw):
    """A frame's (data, fields) as put_slices takes them."""
    _t, fields, _why, _names, _h = send_records.py_frame_slices(raw)
    return raw, np.frombuffer(fields, np.uint32).reshape(-1, 10)


@SETTINGS
@given(frames(), st.randoms(use_true_random=False), st.sampled_from([validate.SLICE_RESERVED,
                                                                    validate.slice_reserved(b"X\x01Y\x02")]))
def test_slices_get_the_same_verdicts_and_tags_hashes(raw, rnd, reserved):
    data, fields = _slices_of(raw)
    skip = None if rnd.random() < 0.5 else np.array([rnd.random() < 0.3 for _ in range(len(fields))])
    assert _accel.check_slices(data, fields, skip, reserved) == validate.py_check_slices(data, fields, skip, reserved)


@SETTINGS
@given(frames())
def test_slice_verdicts_say_what_the_rules_say(raw):
    """Each verdict against the rules written out plainly on the decoded frame."""
    data, fields = _slices_of(raw)
    why, ths, names = _accel.check_slices(data, fields, None, validate.SLICE_RESERVED)
    ths = np.frombuffer(ths, np.int64)
    for i, (mid, tags, keys, props, _body) in enumerate(decode_request(raw)[1]):
        text = lambda b: b"\x01" not in b and b"\x02" not in b and _decodes(b)  # noqa: E731
        want = (validate.ID_TEXT if mid and not text(mid) else validate.TAGS_TEXT if tags and not text(tags)
                else validate.py_check_keys(keys) if keys else 0)
        if not want and props:
            want, name = validate.py_check_properties(props, validate.SLICE_RESERVED)
            assert names.get(i) == name
        assert why[i] == want
        assert ths[i] == (codec.tags_hash(tags.decode()) if not want and tags else 0)


def _decodes(b) -> bool:
    try:
        bytes(b).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["TAGS", "UNIQ_KEY", "KEYS", "x", "é", "__CRC32#"]),
                          st.sampled_from(["", "a", "t1 t2", "ü€", "😀"])), max_size=6),
       st.sampled_from([b"", b"\x02", b"a\x01b", b"\xff\x01x\x02", b"a\x01b\x01c\x02", b"\x01x\x02"]))
def test_encoded_properties_get_the_same_verdict_and_fields(pairs, junk):
    for raw in (codec.encode_properties(dict(pairs)), b"".join(f"{k}\x01{v}\x02".encode() for k, v in pairs),
                junk, codec.encode_properties(dict(pairs)) + junk):
        for reserved in (validate.ENCODED_RESERVED, validate.SLICE_RESERVED):
            assert _accel.check_encoded(raw, reserved) == validate.py_check_encoded(raw, reserved), raw


def test_the_validator_checks_its_arguments_before_it_reads():
    data, fields = _slices_of(encode_request("T", [b"b"], [b"i"], [b"t"], [b"k"], [b"p\x01v\x02"]))
    bad = fields.copy()
    bad[0, 4] = len(data)                               # the body's slice past the buffer
    with pytest.raises(ValueError):
        _accel.check_slices(data, bad, None, validate.SLICE_RESERVED)
    with pytest.raises(ValueError):
        _accel.check_slices(data, fields, np.zeros(2, bool), validate.SLICE_RESERVED)     # skip of another length
    with pytest.raises(ValueError):
        _accel.check_slices(data, b"\0" * 39, None, validate.SLICE_RESERVED)           # not n x 10 uint32
    with pytest.raises(TypeError):
        _accel.check_slices(data, fields, None, ("TAGS",))                             # names as str
    with pytest.raises(TypeError):
        _accel.check_encoded(b"a\x01b\x02", [b"TAGS"])


@pytest.mark.parametrize("raw", [b"", b"TQB1", b"XXXX" + bytes(6), encode_request("T", [b"b"], [b"i"])[:-1],
                                 encode_request("T", [b"b"], [b"i"]) + b"!", b"TQB1\0\0\0\0\1\0T",
                                 b"TQB1\1\0\0\0\1\0\xff" + bytes(20)])
def test_bad_frames_are_refused_in_the_same_words(raw):
    with pytest.raises(FrameError) as py:
        send_records.py_frame_slices(raw)
    with pytest.raises(ValueError) as c:
        _accel.frame_slices(raw, send_records.RESERVED_BYTES, ID_MAX_BYTES, dedup.KEY)
    assert str(c.value) == str(py.value)


@SETTINGS
@given(st.lists(st.tuples(st.binary(max_size=20), st.binary(min_size=1, max_size=600)), max_size=40),
       st.binary(min_size=16, max_size=16))
def test_dedup_keys_are_the_same(pairs, key):
    for topic, mid in pairs:
        assert _accel.id_hash(key, topic, mid) == dedup.py_id_hash(key, topic, mid)


def test_dedup_keys_are_siphash_2_4_with_128_bits_of_output():
    """Known answers (key 00..0f, messages 00 01 .. of length 0, 1, 15, 63: the reference's
    vectors_sip128 for 0 and 1, `openssl mac -macopt hexkey:000102..0f -macopt size:16 SIPHASH` for all
    four), the compiled and the Python one alike; another key, another hash."""
    key = bytes(range(16))
    want = {0: "a3817f04ba25a8e66df67214c7550293", 1: "da87c1d86b99af44347659119b22fc45",
            15: "5493e99933b0a8117e08ec0f97cfc3d9", 63: "5150d1772f50834a503e069a973fbd7c"}
    for n, hexed in want.items():
        h1, h2 = dedup.siphash128(key, bytes(range(n)))
        assert (h1.to_bytes(8, "little") + h2.to_bytes(8, "little")).hex() == hexed, n
    for n in range(0, 70):
        data = bytes(range(n))
        topic, mid = data[:n // 2], data[n // 2 + 1:] if n else b""
        assert _accel.id_hash(key, topic, mid) == dedup.py_id_hash(key, topic, mid)
    assert _accel.id_hash(os.urandom(16), b"T", b"id") != _accel.id_hash(key, b"T", b"id")
    with pytest.raises(ValueError):
        _accel.id_hash(b"short", b"T", b"id")
    with pytest.raises(ValueError):
        dedup.py_id_hash(b"short", b"T", b"id")


@SETTINGS
@given(st.lists(st.integers(0, 60), max_size=120), st.integers(1, 40), st.randoms(use_true_random=False))
def test_dedup_tables_are_the_same(ids, room, rnd):
    """window_put then window_find through both loops: the same tables, the same answers."""
    keys = b"".join(dedup.py_id_hash(dedup.KEY, b"T", b"%d" % i) if i else bytes(16) for i in ids)
    values = np.arange(len(ids), dtype=np.int64)
    physs = np.arange(len(ids), dtype=np.int64) * 1000 + 7
    select = bytes(rnd.getrandbits(1) for _ in ids) if rnd.random() < 0.5 else None
    tables = []
    for put in (_accel.window_put, dedup.py_window_put):
        k, v, i, out = bytearray(16 * 128), bytearray(16 * 128), 0, []
        while i < len(ids):
            i, added = put(k, v, keys, values, physs, select, i, room)
            out.append((i, added))
        tables.append((bytes(k), bytes(v), out))
    assert tables[0] == tables[1]
    k, v = bytearray(tables[0][0]), bytearray(tables[0][1])
    empty_k, empty_v = bytearray(16 * 16), bytearray(16 * 16)
    assert _accel.window_find(empty_k, empty_v, k, v, keys) == dedup.py_window_find(empty_k, empty_v, k, v, keys)
    assert _accel.window_find(k, v, empty_k, empty_v, keys) == dedup.py_window_find(k, v, empty_k, empty_v, keys)


def _run_slices(fn, raw, prefix, order_seed, limit, born=(99, b"\x7f\0\0\x01\0\0\x27\x10", 0)):
    """append_slices of a frame's usable messages (in a shuffled order) into one buffer, from a
    fresh topic each time: the bytes, where it stopped, units, index items, results, topic state.
    ``born``: every record's born ms, born host and sys flag."""
    topic, fields, why, _names, _h = send_records.py_frame_slices(raw)
    _w, ths, _n = validate.py_check_slices(raw, fields, None)
    order = np.array([i for i in range(len(why)) if why[i] == 0 and _w[i] == 0], np.int64)
    random.Random(order_seed).shuffle(order)
    t = _topic(topic, 3, random.Random(order_seed))
    t.write_ids = range(3)
    n = len(why)
    res = (array("q", bytes(8 * n)), array("i", bytes(4 * n)), array("i", bytes(4 * n)), array("q", bytes(8 * n)))
    buf, units, index_out = bytearray(limit), {}, bytearray()
    k, pos, err = fn(raw, fields, order, 0, ths, buf, 0, limit, 1 << 30, 99, b"\x7f\0\0\x01\0\0\x27\x10", t,
                     b"X\x01Y\x02", units, index_out, prefix, *res, *born)
    return (bytes(buf), k, pos, type(err), {cq: (u[0], bytes(u[1])) for cq, u in units.items()}, bytes(index_out),
            [r.tolist() for r in res], (t.rr, t.next_offsets))


@SETTINGS
@given(frames(), st.sampled_from([-1, 0, 12345]), st.integers(0, 1000), st.integers(0, 6000),
       st.tuples(st.sampled_from([99, 0, -1, 2**63 - 1, -2**63]), st.sampled_from([b"\x7f\0\0\x01\0\0\x27\x10",
                                                                              b"\x0a\0\0\x02\0\0\0\0"]),
                 st.sampled_from([0, 1, 2**31 - 1, -2**31])))
def test_append_slices_writes_the_same_bytes_and_outcomes(raw, prefix, seed, limit, born):
    assert _run_slices(_accel.append_slices, raw, prefix, seed, limit, born) == \
        _run_slices(record_loop.py_append_slices, raw, prefix, seed, limit, born)


def test_append_slices_writes_the_born_fields_it_is_given():
    """Every record's born time, born host and sys flag are the ones given (SendMessage's batches),
    its store time and store host the store's; a born host of other than 8 bytes: ValueError."""
    raw = encode_request("T", [b"a", b"bb"], [b"i0", b"i1"])
    host = codec.encode_host("10.0.0.2:0")
    for fn in (_accel.append_slices, record_loop.py_append_slices):
        buf, k, pos, err, *_ = _run_slices(fn, raw, -1, 0, 10_000, (1_700_000_000_123, host, 1))
        assert k == 2 and err is type(None)
        for x in codec.py_decode_records(buf[:pos], _sizes_in_order(buf, pos)):
            assert x.intact() and (x.born_timestamp_ms, x.born_host_raw, x.sys_flag) == (1_700_000_000_123, host, 1)
            assert x.store_timestamp_ms == 99
        with pytest.raises(ValueError):
            _run_slices(fn, raw, -1, 0, 10_000, (1, b"short", 0))


def test_append_slices_lays_out_records_that_verify_and_decode():
    """Messages put as slices read back as records with intact CRCs, their properties the user's,
    UNIQ_KEY, the extra ones, TAGS and KEYS; their index items the hashes of <topic>#<key> and
    <topic>#<id>."""
    ids, bodies = [b"ID-%d" % i for i in range(5)], [os.urandom(40 * i + 1) for i in range(5)]
    tags, keys = [b"ta", b"", "é".encode(), b"", b"t"], [b"k1 k2", b"", b"", b"k", b""]
    user = [b"", b"p\x01v\x02", b"", b"", b""]
    raw = encode_request("T", bodies, ids, tags, keys, user)
    buf, k, pos, err, units, index_out, res, _ = _run_slices(_accel.append_slices, raw, zlib.crc32(b"T#"), 0,
                                                             10_000)
    assert k == 5 and err is type(None)
    records = {x.properties["UNIQ_KEY"]: x for x in codec.py_decode_records(buf[:pos], _sizes_in_order(buf, pos))}
    for i in range(5):
        x = records[ids[i].decode()]
        want = {"UNIQ_KEY": ids[i].decode(), "X": "Y", **({"p": "v"} if user[i] else {}),
                **({"TAGS": tags[i].decode()} if tags[i] else {}), **({"KEYS": keys[i].decode()} if keys[i] else {})}
        assert x.intact() and x.body == bodies[i] and x.queue_offset == res[3][i]
        assert {n: v for n, v in x.properties.items() if n != codec.RECORD_CRC_NAME} == want
    hashed = [index_file.HASHED_ITEM.unpack_from(index_out, j) for j in range(0, len(index_out), 12)]
    assert sorted(h for h, _p in hashed) == sorted(index_file.key_hash(f"T#{key}") for key in
                                                  ("k1", "k2", "k", *(i.decode() for i in ids)))


def _sizes_in_order(buf: bytes, end: int) -> list[int]:
    out, pos = [], 0
    while pos < end:
        n = int.from_bytes(buf[pos:pos + 4], "big")
        out.append(n)
        pos += n
    return out


@pytest.mark.parametrize("seed", range(30))
def test_frame_records_are_the_same(seed):
    """Records picked out of order from a buffer, laid out after a room: the same bytes, the
    same damaged ones (found on the copy), the same header written into the room, as the Python twin."""
    data, sizes = _records(seed % 15 + 1, damage=seed >= 15)
    starts = np.cumsum([0] + sizes).astype(np.int64)[:-1]
    rnd = random.Random(seed)
    pick = rnd.sample(range(len(sizes)), rnd.randrange(0, len(sizes) + 1))
    st_, sz = starts[pick], np.asarray(sizes, np.int64)[pick]
    room = rnd.choice([0, 7, 256])
    a, bad_a, headed_a = _accel.frame_records(data, st_, sz, room)
    b, bad_b, headed_b = framing.py_frame_records(data, st_, sz, room)
    assert type(a) is bytes and a == bytes(b) and bad_a == bad_b and headed_a is headed_b is False
    assert bad_a == integrity.py_damaged_records(data, st_, sz)
    seen = []

    def head(crc, bad):
        seen.append((crc, bad))
        return bytes(k % 255 + 1 for k in range(room)) if not bad else None
    a, bad_a, headed_a = _accel.frame_records(data, st_, sz, room, head)
    b, bad_b, headed_b = framing.py_frame_records(data, st_, sz, room, head)
    assert a == bytes(b) and headed_a is headed_b is (not bad_a)
    assert seen[0] == seen[1] and seen[0][0] == zlib.crc32(a[room:]), "head gets the CRC of what follows the room"
    if headed_a:
        assert a[:room] == bytes(k % 255 + 1 for k in range(room))


def _strangers_batch(seed: int):
    """Units of queue T/1 at queue offsets 100.. over a buffer that also holds records of other
    topics, queues and queue offsets, some with flipped bits (a BODYLEN, a TOPICLEN, a queue
    offset's byte, a topic's byte among them), and units pointing mid-record or with a wrong size:
    (buffer, starts, sizes, the queue offsets the units stand for)."""
    rnd = random.Random(seed)
    kinds = [(b"T", 1, None), (b"U", 1, None), (b"TT", 1, None), (b"", 1, None), (b"T", 2, None),
             (b"T", 1, -1), (b"T", -(1 << 31), None), (b"t" * 255, 1, None)]
    recs, want = [], []
    for k in range(rnd.randrange(1, 30)):
        topic, qid, qoff = rnd.choice(kinds[:1] * 6 + kinds)
        want.append(100 + k)
        recs.append(codec.encode_record(body=rnd.randbytes(rnd.randrange(0, 300)), topic=topic,
                                        properties=b"a\x01b\x02", queue_id=qid,
                                        queue_offset=100 + k + rnd.choice([1, -1, 1 << 40]) if qoff else 100 + k,
                                        physical_offset=0, born_timestamp_ms=1, born_host=bytes(8),
                                        store_timestamp_ms=2, store_host=bytes(8)))
    data = bytearray(b"".join(recs))
    starts = np.cumsum([0] + [len(r) for r in recs]).astype(np.int64)[:-1]
    sizes = np.asarray([len(r) for r in recs], np.int64)
    for _ in range(rnd.randrange(0, 4)):                # bits flipped where the check reads, or anywhere
        k = rnd.randrange(len(recs))
        at = rnd.choice([12, 15, 20, 27, 84, 86, 87, 88 + len(recs[k]) - 111, rnd.randrange(len(recs[k]))])
        data[int(starts[k]) + max(0, min(at, len(recs[k]) - 1))] ^= 1 << rnd.randrange(8)
    for _ in range(rnd.randrange(0, 3)):                # damaged units: mid-record, or a wrong size
        k = rnd.randrange(len(recs))
        if rnd.random() < 0.5:
            starts[k] = rnd.randrange(0, max(1, len(data) - 400))
        else:
            sizes[k] += rnd.choice([-1, 1, 40])
            sizes[k] = min(sizes[k], len(data) - starts[k])
    return bytes(data), starts, sizes, np.asarray(want, np.int64)


def _stands_for(data: bytes, start: int, size: int, topic: bytes, queue_id: int, queue_offset: int) -> bool:
    """What get() asks of one record: well-formed, intact and the one its unit stands for."""
    try:
        m = codec.decode_record(data, start, size)
    except codec.CodecError:
        return False
    key = codec.topic_key(topic.decode("latin-1"))
    return m.intact() and key is not None and m.stands_for(key, queue_id, queue_offset)


@pytest.mark.parametrize("seed", range(60))
def test_records_not_the_ones_their_units_stand_for_are_found_alike(seed):
    """damaged and frame_records with ``expect`` list the same records as their Python twins, and
    exactly those get() refuses one by one (decode, intact, stands_for): CRC failures and records of
    another topic, queue or queue offset, damaged units and flipped bits included."""
    data, starts, sizes, qoffs = _strangers_batch(seed)
    topic = [b"T", b"T", b"T", b"U", b"", b"t" * 255, b"t" * 256][seed % 7]
    qid = [1, 1, 2, 1, 1, 1, 1 << 40][seed % 7 if seed % 5 else 6]
    expect = (topic, qid, qoffs)
    want = [k for k in range(len(starts)) if not _stands_for(data, int(starts[k]), int(sizes[k]), topic, qid,
                                                             int(qoffs[k]))]
    assert _accel.damaged(data, starts, sizes, expect) == integrity.py_damaged_records(data, starts, sizes,
                                                                                       expect) == want
    assert integrity.damaged_records(np.frombuffer(data, np.uint8), starts, sizes, expect) == want
    assert _accel.damaged(data, starts, sizes) == integrity.py_damaged_records(data, starts, sizes)
    room = seed % 3 * 8
    a, bad_a, _ = _accel.frame_records(data, starts, sizes, room, None, expect)
    b, bad_b, _ = framing.py_frame_records(data, starts, sizes, room, None, expect)
    assert a == bytes(b) and bad_a == bad_b == want


def test_the_expectation_is_checked_before_anything_is_read():
    data, sizes = _records(3, damage=False)
    starts = np.cumsum([0] + sizes).astype(np.int64)[:-1]
    sz = np.asarray(sizes, np.int64)
    for expect, error in (((b"T", 1, np.arange(2)), ValueError), ((b"T", 1), TypeError), (5, TypeError),
                          (("T", 1, np.arange(3)), TypeError), ((b"T", 1 << 70, np.arange(3)), OverflowError)):
        for call in (lambda e: _accel.damaged(data, starts, sz, e),
                     lambda e: integrity.py_damaged_records(data, starts, sz, e),
                     lambda e: _accel.frame_records(data, starts, sz, 0, None, e),
                     lambda e: framing.py_frame_records(data, starts, sz, 0, None, e)):
            with pytest.raises(error):
                call(expect)
    ok = (b"T", 1, np.arange(3))
    assert _accel.damaged(data, starts, sz, ok) == integrity.py_damaged_records(data, starts, sz, ok) == []


@pytest.mark.parametrize("starts, sizes", [([0], [10**6]), ([-1], [111]), ([5], [-1]), ([0, 0], [111]),
                                           ([2**62], [2**62]), ([2**63 - 1], [1]), ([1], [2**63 - 1])])
def test_frame_records_refuse_a_record_outside_the_buffer(starts, sizes):
    data, _ = _records(2, damage=False)
    for fn in (_accel.frame_records, framing.py_frame_records):
        with pytest.raises(ValueError):
            fn(data, np.asarray(starts, np.int64), np.asarray(sizes[:1], np.int64), 0)


def test_frame_records_take_only_a_header_that_fits_the_room():
    data, sizes = _records(3, damage=False)
    starts = np.cumsum([0] + sizes).astype(np.int64)[:-1]
    for fn in (_accel.frame_records, framing.py_frame_records):
        with pytest.raises(ValueError):
            fn(data, starts, np.asarray(sizes, np.int64), 8, lambda crc, bad: b"x" * 9)
        with pytest.raises(ValueError):
            fn(data, starts, np.asarray(sizes, np.int64), 8, lambda crc, bad: "text")
        with pytest.raises(ZeroDivisionError):
            fn(data, starts, np.asarray(sizes, np.int64), 8, lambda crc, bad: 1 / 0)
        with pytest.raises(TypeError):
            fn(data, starts, np.asarray(sizes, np.int64), 8, "not callable")
        with pytest.raises(ValueError):
            fn(data, starts, np.asarray(sizes, np.int64), -1)
    assert not hasattr(_accel, "fill_room"), "no way to change a bytes object after it was made"


def test_frame_records_copy_starts_and_sizes_before_they_let_go_of_the_gil():
    """Another thread changing the starts and sizes while the copy runs (without the GIL) cannot make
    it write past the frame: they were checked and copied first. The frame is always what the
    arrays said when the call began, or the call refused them."""
    import threading
    data, sizes = _records(8, damage=False)
    data = data * 200                                   # a long copy: the other thread gets to run
    n = len(sizes) * 200
    starts = np.cumsum([0] + sizes * 200).astype(np.int64)[:-1]
    sz = np.asarray(sizes * 200, np.int64)
    stop = threading.Event()
    rnd = random.Random(1)

    def meddle():
        while not stop.is_set():
            sz[rnd.randrange(n)] = 1 << 40
            sz[:] = np.asarray(sizes * 200, np.int64)
    t = threading.Thread(target=meddle)
    t.start()
    try:
        for _ in range(200):
            try:
                frame, bad, _h = _accel.frame_records(data, starts, sz, 16)
            except ValueError:
                continue                                 # it saw a size out of bounds: refused, nothing written
            assert len(frame) == 16 + 4 * n + len(data) and bad == []
    finally:
        stop.set()
        t.join()


# the misuse cases of the issue and their like: refused with a typed error, never a crash -----------------
def test_scan_run_and_damaged_check_their_bounds():
    assert _accel.scan_run(bytes(200), 2**63 - 50, 200) == (2**63 - 50, 0, 0)
    assert _accel.scan_run(bytes(200), -5, 200)[1] == 0
    assert _accel.scan_run(bytes(200), 0, -(2**63))[1] == 0
    buf = bytes(1000)
    for starts, sizes in (([2**62], [2**62]), ([2**63 - 1], [200]), ([10], [2**63 - 1]), ([-1], [200])):
        s, z = np.asarray(starts, np.int64), np.asarray(sizes, np.int64)
        assert _accel.damaged(buf, s, z) == [0] == integrity.py_damaged_records(buf, s, z)
    unaligned = bytearray(17)                             # int64s at an odd address: read, not faulted on
    assert _accel.damaged(buf, memoryview(unaligned)[1:9], memoryview(unaligned)[9:17]) == [0]


def test_index_puts_check_their_bounds():
    slots, entries = 4, 10
    f = _File(slots, entries)
    item = index_file.HASHED_ITEM.pack(5, 123)
    for count in (2**62, 2**31, 0, -1, entries + 1):
        with pytest.raises(ValueError):
            _accel.index_put_hashed(f.buf, slots, f.entries_at, count, item, 0, 1, 0)
        with pytest.raises(ValueError):
            _accel.index_put(f.buf, slots, f.entries_at, count, [("k", 1)], 0, 1, 0)
    for s in (0, -1, 2**32, 2**62):
        with pytest.raises(ValueError):
            _accel.index_put_hashed(f.buf, s, f.entries_at, 1, item, 0, 1, 0)
    with pytest.raises(ValueError):
        _accel.index_put_hashed(f.buf, slots, 2**62, 1, item, 0, 1, 0)
    with pytest.raises(ValueError):                        # more items than the file holds
        _accel.index_put_hashed(f.buf, slots, f.entries_at, 1, item * 20, 0, 20, 0)
    with pytest.raises(TypeError):                         # not an int: no __index__ runs inside the loop
        _accel.index_put(f.buf, slots, f.entries_at, 1, [("k", 1.0)], 0, 1, 0)
    assert _accel.index_put_hashed(f.buf, slots, f.entries_at, 1, item, 0, 1, 0) == (2, 123)


def test_decode_run_takes_only_its_own_slots():
    class Impostor:                                       # another class's slot descriptors borrowed
        __slots__ = ()
    for name in ("_head", "body", "_tail", "_f", "_topic", "_props"):
        setattr(Impostor, name, getattr(codec.StoredMessage, name))
    data, sizes = _records(1, damage=False)
    with pytest.raises(TypeError):
        _accel.decode_run(Impostor, data, np.asarray(sizes, np.int32))
    with pytest.raises(TypeError):
        _accel.decode_run(5, data, np.asarray(sizes, np.int32))
    assert len(_accel.decode_run(codec.StoredMessage, data, np.asarray(sizes, np.int32))) == 1
    with pytest.raises(ValueError):
        _accel.decode_run(codec.StoredMessage, data, np.asarray([2**31 - 1], np.int32))


def test_use_crc_calls_only_isals_function():
    import ctypes
    with pytest.raises(ValueError):
        _accel.use_crc(12345)                              # not a function at all: never jumped to
    with pytest.raises(ValueError):
        _accel.use_crc(ctypes.cast(ctypes.CDLL(None).strlen, ctypes.c_void_p).value)   # another function
    assert _accel.use_crc(accel._isal_address()) is (accel.CRC == "isal") or accel.ACCEL is None
    _accel.use_crc(accel._isal_address() if accel.CRC == "isal" else 0)


def test_dedup_tables_check_their_arguments():
    k, v = bytearray(16 * 16), bytearray(16 * 16)
    keys = dedup.py_id_hash(dedup.KEY, b"T", b"1")
    one = np.zeros(1, np.int64)
    for put in (_accel.window_put, dedup.py_window_put):
        with pytest.raises(ValueError):
            put(k, bytearray(8 * 16), keys, one, one, None, 0, 1)     # values of 8 bytes a slot: not a table
        with pytest.raises(ValueError):
            put(k, v, keys, one, np.zeros(2, np.int64), None, 0, 1)
        with pytest.raises(ValueError):
            put(k, v, keys, one, one, None, -1, 1)
    with pytest.raises(ValueError):
        _accel.window_find(k, v, k, v, keys[:15])


# send_one: the common SendMessage request read from its bytes (broker/wire.py encoded_one's rule) ---
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
_HOSTS = st.sampled_from(["", "", "10.0.0.1", "10.0.0.1", "1.2.3", "256.1.1.1", "01.002.3.004", "1.2.3.4.", ".1.2.3",
                          "\u0661.\u0662.\u0663.\u0664", "host.example", "0000000001.2.3.4",
                          "\u00b2.1.1.1"])


@st.composite
def send_requests(draw):
    """(a SendMessageRequest's bytes, whether its message uses only the fields send_one reads)."""
    from tidemq.protocol.stubs import pb, spb
    r = spb.SendMessageRequest()
    plain = True
    for _ in range(draw(st.sampled_from([1] * 8 + [0, 2]))):
        m = r.messages.add()
        if draw(st.booleans()):
            m.topic.name = draw(st.sampled_from(["T", "Bench", ""]) | _TEXT)
        if draw(st.integers(0, 4)) == 0:
            m.topic.resource_namespace = draw(_TEXT)
        m.body = draw(st.sampled_from([b"x", b"x", b"", b"\x00\x01\x02" * 40]))
        sp = m.system_properties
        if draw(st.integers(0, 2)) == 0:
            sp.tag = draw(st.sampled_from(["TagA", "", "a\x01b", "\u00e9\U0001F600"]) | _TEXT)
        sp.message_id = draw(st.sampled_from(["01AB", "01AB", "01AB", "", "a\x02"]) | _TEXT)
        sp.message_type = draw(st.sampled_from([0, 1, 1, 2, 3, 4, 6, 99, -1]))
        sp.body_encoding = draw(st.sampled_from([0, 1, 2, 7]))
        if draw(st.booleans()):
            sp.born_timestamp.seconds = draw(st.sampled_from([1_700_000_000, 0, -1]) | st.integers(-2**63, 2**63 - 1))
            sp.born_timestamp.nanos = draw(st.sampled_from([0, 999_999_999, -1, -1_000_000]) |
                                           st.integers(-2**31, 2**31 - 1))
        sp.born_host = draw(_HOSTS)
        extra = draw(st.sampled_from([0] * 12 + list(range(1, 8))))
        if extra == 1:
            sp.keys.append(draw(_TEXT))
        elif extra == 2:
            m.user_properties[draw(_TEXT)] = draw(_TEXT)
        elif extra == 3:
            sp.message_group = draw(_TEXT)
        elif extra == 4:
            sp.delivery_timestamp.seconds = 5
        elif extra == 5:
            sp.queue_id = draw(st.integers(-5, 5))
        elif extra == 6:
            sp.trace_context = draw(_TEXT)
        elif extra == 7:
            sp.body_digest.type = pb.DigestType.MD5
        plain = plain and extra == 0
    return r.SerializeToString(), plain and len(r.messages) == 1


def _send_one_reference(raw: bytes):
    """What the Python path makes of the bytes: protobuf's decoding, then wire.encoded_one."""
    from tidemq.broker.wire import encoded_one
    from tidemq.protocol.stubs import spb
    try:
        req = spb.SendMessageRequest.FromString(raw)
    except Exception:            # noqa: BLE001 - not a request: the general path refuses it
        return None
    return encoded_one(req.messages[0]) if len(req.messages) == 1 else None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(send_requests())
def test_send_one_reads_what_protobuf_and_encoded_one_read(request):
    """Whatever it answers is what protobuf and encoded_one make of the bytes; and it answers for
    every request of the common form that uses only the fields it reads (the official clients')."""
    raw, plain = request
    got, want = _accel.send_one(raw), _send_one_reference(raw)
    if got is not None:
        assert got == want
        assert [type(x) for x in got] == [type(x) for x in want] and got[1] == want[1]
    elif want is not None and plain:
        sp = __import__("tidemq.protocol.stubs", fromlist=["spb"]).spb.SendMessageRequest.FromString(raw)
        sp = sp.messages[0].system_properties
        odd_host = bool(sp.born_host) and not sp.born_host.isascii()
        assert odd_host or abs(sp.born_timestamp.seconds) >= 4 * 10**15, (raw, want)


def damaged(raw: bytes, edits) -> bytes:
    """``raw`` with ``edits`` applied in turn: (at, byte, 0) a byte changed, (at, byte, 1) one inserted,
    (at, _, 2) the rest cut (``at`` taken modulo the length + 1)."""
    out = bytearray(raw)
    for at, byte, kind in edits:
        at = at % (len(out) + 1)
        if kind == 0 and at < len(out):
            out[at] = byte
        elif kind == 1:
            out.insert(at, byte)
        else:
            del out[at:]
    return bytes(out)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(send_requests(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255), st.integers(0, 2)),
                                 min_size=1, max_size=4))
def test_send_one_on_damaged_bytes_answers_none_or_what_protobuf_reads(request, edits):
    """Bytes changed, cut or grown anywhere: send_one never reads them as something protobuf would
    not (it answers None, and the general path decodes or refuses them)."""
    raw = damaged(request[0], edits)
    got = _accel.send_one(raw)
    if got is not None:
        assert got == _send_one_reference(raw)


@SETTINGS
@given(st.binary(max_size=200))
def test_send_one_on_any_bytes(raw):
    got = _accel.send_one(raw)
    assert got is None or got == _send_one_reference(raw)


def _request(**fields) -> bytes:
    from tidemq.protocol.stubs import spb
    r = spb.SendMessageRequest()
    m = r.messages.add()
    m.topic.name, m.body = "T", b"body"
    m.system_properties.message_id = "01AB"
    for name, value in fields.items():
        if name == "seconds":
            m.system_properties.born_timestamp.seconds = value
        elif name == "nanos":
            m.system_properties.born_timestamp.nanos = value
        else:
            setattr(m.system_properties, name, value)
    return r.SerializeToString()


def _field(num: int, payload: bytes) -> bytes:
    return bytes([num << 3 | 2, len(payload)]) + payload


@pytest.mark.parametrize("raw", [
    _request(), _request(message_type=1), _request(message_type=0), _request(message_type=-1),
    _request(message_type=2), _request(message_type=99), _request(body_encoding=2), _request(body_encoding=7),
    _request(body_encoding=1), _request(seconds=1_700_000_000, nanos=-1), _request(nanos=-1_000_001),
    _request(nanos=1_999_999), _request(seconds=-5), _request(tag="a\x01b"), _request(tag="x\x02"),
    _request(tag=""), _request(tag="\u00e9\U0001F600"), _request(born_host="1.2.3.256"),
    _request(born_host="001.2.3.4"), _request(born_host="\u00b2.1.1.1"), _request(message_id="a\x01"),
], ids=lambda raw: raw.hex()[-24:])
def test_send_one_case_by_case(raw):
    got, want = _accel.send_one(raw), _send_one_reference(raw)
    assert got == want, (got, want)


def test_send_one_takes_no_bytes_protobuf_refuses_or_reads_otherwise():
    """Bytes send_one must answer None for: a string that is not UTF-8 (protobuf refuses the
    request), a field given twice (protobuf merges or keeps the last), a varint past 64 bits."""
    sp = _field(3, b"01AB")
    msg = _field(1, _field(2, b"T")) + _field(4, b"b")
    assert _accel.send_one(_field(1, msg + _field(3, sp))) is not None
    bad_utf8 = [_field(1, _field(1, _field(1, b"\xff") + _field(2, b"T")) + _field(4, b"b") + _field(3, sp)),
                _field(1, msg + _field(3, _field(3, b"\xc3"))),
                _field(1, msg + _field(3, sp + _field(1, b"\xed\xa0\x80")))]
    for raw in bad_utf8:
        assert _send_one_reference(raw) is None and _accel.send_one(raw) is None
    resource_cut = _field(1, _field(1, _field(2, b"T") + b"\x80") + _field(4, b"b") + _field(3, sp))
    assert _send_one_reference(resource_cut) is None and _accel.send_one(resource_cut) is None
    twice = [_field(1, msg + _field(3, sp) + _field(3, _field(3, b"01AC"))),
             _field(1, _field(1, _field(2, b"T") + _field(2, b"U")) + _field(4, b"b") + _field(3, sp)),
             _field(1, msg + _field(3, sp + _field(3, b"01AC"))),
             _field(1, msg + _field(4, b"c") + _field(3, sp))]
    for raw in twice:
        assert _accel.send_one(raw) is None
    too_long = _field(1, msg + _field(3, sp + bytes([6 << 3]) + b"\xff" * 9 + b"\x02"))
    assert _accel.send_one(too_long) is None
    past_64_bits = _field(1, msg + _field(3, sp + _field(7, bytes([1 << 3]) + b"\x80" * 9 + b"\x02")))
    assert _accel.send_one(past_64_bits) is None


def test_send_one_reads_an_int32_as_protobuf_does():
    """A nanos varint past 32 bits: protobuf keeps its low 32 bits (and so must send_one)."""
    sp = _field(3, b"01AB") + _field(7, bytes([2 << 3]) + b"\x85\x80\x80\x80\x10")     # 2**32 + 5
    raw = _field(1, _field(1, _field(2, b"T")) + _field(4, b"b") + _field(3, sp))
    want = _send_one_reference(raw)
    assert want is not None and want[3] == 0 and _accel.send_one(raw) == want


# a follower's frame: replica_scan --------------------------------------------------------------------
def _replica_frame(rnd: random.Random, offset: int, n: int):
    """Records as a leader's log holds them from ``offset``: a few topics and queues, properties with
    and without TAGS / KEYS / UNIQ_KEY (repeated, empty, multi-byte, not UTF-8), queue offsets that
    mostly follow each other."""
    recs, pos, next_q = [], offset, {}
    names = [b"T", b"Topic-b", b"%RETRY%g"][:rnd.randrange(1, 4)]
    for _ in range(n):
        topic, qid = rnd.choice(names), rnd.randrange(3)
        qoff = next_q.get((topic, qid), rnd.randrange(0, 1 << 40))
        next_q[(topic, qid)] = qoff + (1 if rnd.random() < 0.97 else rnd.choice((0, 2)))
        props = b""
        for _ in range(rnd.randrange(0, 4)):
            name = rnd.choice((b"TAGS", b"KEYS", b"UNIQ_KEY", b"a", b"XTAGS"))
            value = rnd.choice((b"", b"v", b"k1 k2", b" k1  k2 ", "é✓😀".encode(), b"\xff\xfe", b"x" * 40))
            props += name + b"\x01" + value + b"\x02"
        if rnd.random() < 0.1:
            props += b"junk without a separator"
        r = codec.encode_record(body=rnd.randbytes(rnd.randrange(0, 300)), topic=topic, properties=props,
                                queue_id=qid, queue_offset=qoff, physical_offset=pos, born_timestamp_ms=1,
                                born_host=b"\0" * 8, store_timestamp_ms=rnd.randrange(1, 1 << 50),
                                store_host=b"\0" * 8)
        if rnd.random() < 0.05:            # a record without the CRC tail (its properties read whole)
            r = bytearray(r)
            r[-20:-11] = b"__crc32#\x01"
            r = bytes(r)
        recs.append(r)
        pos += len(r)
    return b"".join(recs)


@pytest.mark.parametrize("seed", range(60))
def test_replica_scan_gives_what_its_twin_gives(seed):
    from tidemq.store import replica_scan
    rnd = random.Random(seed)
    seg = 1 << 20
    offset = rnd.randrange(0, 4) * seg + rnd.randrange(0, 4096)
    data = bytearray(_replica_frame(rnd, offset, rnd.randrange(0, 40)))
    if seed % 3 == 1:                      # a BLANK ends the segment, whole or its header alone
        room = seg - offset % seg - len(data)
        data += codec.encode_blank(room)[:rnd.choice((8, room))]
    if seed % 3 == 2 and data:             # damage: a flipped bit, a cut, a stray byte
        how = rnd.randrange(3)
        if how == 0:
            data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
        elif how == 1:
            del data[rnd.randrange(len(data)):]
        else:
            data.insert(rnd.randrange(len(data)), 7)
    deleted = {"T": offset + rnd.randrange(0, max(1, len(data)))} if seed % 5 == 0 else {}
    for deleted, want_index in ((deleted, True), (deleted, False), (None, True)):
        c = _accel.replica_scan(bytes(data), offset, seg, deleted, want_index)
        p = replica_scan.py_scan(bytes(data), offset, seg, deleted, want_index)
        if c[0] == replica_scan.TWIN:      # a value that is not UTF-8: the twin's frame
            assert any(b"\xff\xfe" in bytes(data[i:i + 2]) for i in range(len(data) - 1))
            assert replica_scan.scan(bytes(data), offset, seg, deleted, want_index) == p
            continue
        assert c == p
        assert replica_scan.scan(bytes(data), offset, seg, deleted, want_index) == p


def test_replica_scan_checks_its_arguments():
    with pytest.raises(TypeError):
        _accel.replica_scan("text", 0, 1 << 20, {}, True)
    with pytest.raises(TypeError):
        _accel.replica_scan(b"", 0, 1 << 20, [], True)
    for offset, seg in ((-1, 1 << 20), (0, 0), (0, -5)):
        with pytest.raises(ValueError):
            _accel.replica_scan(b"", offset, seg, {}, True)
    with pytest.raises(OverflowError):
        _accel.replica_scan(b"", 2**64, 1 << 20, {}, True)
    rnd = random.Random(5)
    data = _replica_frame(rnd, 2**62, 5)
    assert _accel.replica_scan(data, 2**62, 2**63 - 1, {}, True)[0] == 0
    with pytest.raises(TypeError):       # a deletion offset that is not an int: refused, not guessed
        _accel.replica_scan(data, 2**62, 2**63 - 1, {"T": "x", "Topic-b": "x", "%RETRY%g": "x"}, True)
    for cut in range(0, len(data), 7):   # every prefix and a size field made absurd: a verdict, no read past
        for v in (None, 2**31 - 1, -(2**31), 91):
            d = bytearray(data[:cut])
            if v is not None and len(d) >= 4:
                d[:4] = v.to_bytes(4, "big", signed=True)
            assert _accel.replica_scan(bytes(d), 2**62, 1 << 40, {}, True)[0] == \
                __import__("tidemq.store.replica_scan", fromlist=["x"]).py_scan(bytes(d), 2**62, 1 << 40, {}, True)[0]
# send_many: a SendMessage request of common messages of one topic (the lane's batches) -----------
def _send_many_reference(raw: bytes):
    """protobuf's decoding, then encoded_one for each message; one topic, born time, born host and sys
    flag for all (put_encoded's arguments), else None."""
    from tidemq.broker.wire import encoded_one
    from tidemq.protocol.stubs import spb
    try:
        req = spb.SendMessageRequest.FromString(raw)
    except Exception:            # noqa: BLE001 - not a request: the general path refuses it
        return None
    got = [encoded_one(m) for m in req.messages]
    if not got or any(g is None for g in got):
        return None
    shared = {(g[0], g[3], g[4], g[5]) for g in got}
    if len(shared) != 1:
        return None
    topic, born, host, flag = shared.pop()
    return topic, [g[1] for g in got], [g[2] for g in got], born, host, flag


@st.composite
def many_requests(draw):
    """A request of 1-6 messages, mostly alike (the common batch), sometimes one that differs."""
    from tidemq.protocol.stubs import spb
    r = spb.SendMessageRequest()
    topic = draw(st.sampled_from(["T", "Bench", "\u00e9t\u00e9"]))
    born = draw(st.sampled_from([None, (1_700_000_000, 5_000_000), (-3, -1)]))
    host = draw(st.sampled_from(["", "10.0.0.1"]))
    encoding = draw(st.sampled_from([0, 1, 2]))
    for i in range(draw(st.integers(1, 6))):
        m = r.messages.add()
        m.topic.name = topic
        m.body = draw(st.sampled_from([b"x", b"\x00\x01" * 30, b"b%d" % i]))
        sp = m.system_properties
        sp.message_id = draw(st.sampled_from([f"01AB{i}", f"01AB{i}", "", "a\x02"]))
        sp.message_type = draw(st.sampled_from([1, 1, 1, 0, 2]))
        sp.body_encoding = encoding
        if draw(st.integers(0, 2)) == 0:
            sp.tag = draw(st.sampled_from(["TagA", "", "\u00e9"]))
        if born is not None:
            sp.born_timestamp.seconds, sp.born_timestamp.nanos = born
        sp.born_host = host
        odd = draw(st.integers(0, 12))                      # now and then one message differs
        if odd == 1:
            m.topic.name = "Other"
        elif odd == 2:
            sp.born_timestamp.seconds = 1_700_000_001
        elif odd == 3:
            sp.born_host = "10.0.0.2"
        elif odd == 4:
            sp.body_encoding = 2 if encoding != 2 else 1
        elif odd == 5:
            sp.keys.append("k")
        elif odd == 6:
            m.user_properties["a"] = "b"
    return r.SerializeToString()


def _send_many_read(raw: bytes, key: bytes = dedup.KEY):
    """send_many's answer as _send_many_reference says it: each message's (body, the record properties
    put_slices writes for it with send_records.NORMAL_SUFFIX, without the CRC tail) and id, after
    checking its slices (no keys, no user properties, within ``raw``), its dedup key (the Python
    twin's) and the bodies' byte count."""
    got = _accel.send_many(raw, key)
    if got is None:
        return None
    topic, fields, keys, nbytes, born, host, flag = got
    assert type(fields) is bytearray and type(keys) is bytes and len(fields) % 40 == 0
    F = np.frombuffer(fields, np.uint32).reshape(-1, 10)
    entries, ids = [], []
    for i, f in enumerate(F.tolist()):
        assert f[2] == f[3] == f[7] == f[8] == 0
        assert all(f[j] + f[5 + j] <= len(raw) for j in range(5))
        mid, tag, body = (raw[f[j]:f[j] + f[5 + j]] for j in (0, 1, 4))
        props = b"".join((record_loop.UNIQ_PROP, mid, b"\x02", send_records.NORMAL_SUFFIX,
                          b"TAGS\x01" + tag + b"\x02" if tag else b""))
        assert record_loop.slice_properties_len(f[5], f[6], 0, 0, len(send_records.NORMAL_SUFFIX), tail=0) == len(props)
        entries.append((body, props))
        ids.append(mid.decode("utf-8"))
        assert keys[16 * i:16 * (i + 1)] == dedup.py_id_hash(key, topic.encode(), mid)
    assert len(keys) == 16 * len(F) and nbytes == sum(len(b) for b, _ in entries)
    return topic, entries, ids, born, host, flag


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(many_requests())
def test_send_many_reads_what_protobuf_and_encoded_one_read(raw):
    """Whatever it answers is what protobuf and encoded_one make of each message (the properties
    put_slices writes from its slices are encoded_one's, byte for byte; the dedup keys the Python
    twin's); None exactly where the messages are not all common or do not share topic, born time,
    born host and sys flag (as far as send_one would read each: a host or a time send_one leaves to
    protobuf is None too)."""
    got, want = _send_many_read(raw), _send_many_reference(raw)
    assert got == want
    if got is not None:
        assert [type(x) for x in got] == [type(x) for x in want]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(many_requests(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255), st.integers(0, 2)),
                                 min_size=1, max_size=4))
def test_send_many_on_damaged_bytes_answers_none_or_what_protobuf_reads(raw, edits):
    raw = damaged(raw, edits)
    got = _send_many_read(raw)
    if got is not None:
        assert got == _send_many_reference(raw)


@SETTINGS
@given(st.binary(max_size=200))
def test_send_many_on_any_bytes(raw):
    got = _send_many_read(raw)
    assert got is None or got == _send_many_reference(raw)


def test_send_many_takes_what_send_one_takes_and_refuses_a_field_besides_messages():
    one = _request()
    assert _send_many_read(one) == _send_many_reference(one)
    assert _send_many_read(one)[1] == [_accel.send_one(one)[1]]
    assert _accel.send_many(b"", dedup.KEY) is None                      # no message
    assert _accel.send_many(one + bytes([2 << 3 | 2, 0]), dedup.KEY) is None     # a field the request does not have
    assert _accel.send_many(one + one + b"\x80", dedup.KEY) is None            # a truncated field after two messages
    many = b"".join([one] * 40)                                          # past the first growth of its arrays
    assert _send_many_read(many) == _send_many_reference(many)
    with pytest.raises(ValueError):
        _accel.send_many(one, b"short key")
    with pytest.raises(TypeError):
        _accel.send_many(one)


# answer_stored: the answer of a batch stored whole (send_message.py) ------------------------------
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(many_requests(), st.lists(st.integers(-5, 2**63 - 1), min_size=6, max_size=6),
       st.sampled_from([b"\x0a\x04\x12\x02OK", b"\x0a\x00", b"\x0a\x06\x08\x90\x03\x12\x01x"]))
def test_answer_stored_writes_what_its_twin_and_protobuf_write(raw, offsets, st_bytes):
    from tidemq.broker.produce.send_message import py_answer_stored
    from tidemq.protocol.stubs import spb
    got = _accel.send_many(raw, dedup.KEY)
    if got is None:
        return
    fields = got[1]
    n = len(fields) // 40
    offs = (offsets * n)[:n]
    out = _accel.answer_stored(st_bytes, raw, fields, offs)
    assert out == py_answer_stored(st_bytes, raw, fields, offs)
    r = spb.SendMessageResponse.FromString(out)
    ids = _send_many_read(raw)[2]
    assert [e.message_id for e in r.entries] == ids and [e.offset for e in r.entries] == [max(o, 0) for o in offs]
    assert all(e.status == r.status for e in r.entries)


def test_answer_stored_checks_its_arguments():
    from tidemq.broker.produce.send_message import py_answer_stored
    one = _request()
    fields = _accel.send_many(one, dedup.KEY)[1]
    st_ok = b"\x0a\x00"
    for fn in (_accel.answer_stored, py_answer_stored):
        assert fn(st_ok, one, bytearray(), []) == st_ok                  # no message: the status only
        with pytest.raises(ValueError):
            fn(st_ok, one, fields, [1, 2])                               # fields for one, two offsets
        with pytest.raises(ValueError):
            fn(st_ok, one[:10], fields, [1])                             # an id outside the request
        bad = bytearray(fields)
        bad[0:4] = (2**32 - 1).to_bytes(4, "little")                     # an offset past every request
        with pytest.raises(ValueError):
            fn(st_ok, one, bad, [1])
    with pytest.raises(TypeError):
        _accel.answer_stored(st_ok, one, fields, [1.5])                  # offsets are ints
    with pytest.raises(OverflowError):
        _accel.answer_stored(st_ok, one, fields, [2**64])
    with pytest.raises(TypeError):
        _accel.answer_stored(st_ok, one, fields, (1,))                   # a list


# send_one with the dedup key, answer_one_stored: SendPath.send_one's lane (send_message.py) ------
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(send_requests(), st.binary(min_size=16, max_size=16))
def test_send_one_with_a_key_adds_the_dedup_key_of_its_topic_and_id(request, key):
    """send_one(raw, key): send_one(raw)'s answer and, seventh, the dedup key Resends.key gives for its
    topic and id (dedup.py's Python twin of the hash, under that key)."""
    raw, _ = request
    plain, got = _accel.send_one(raw), _accel.send_one(raw, key)
    if plain is None:
        assert got is None
        return
    assert got[:6] == plain
    topic, mid = plain[0], plain[2]
    assert got[6] == dedup.py_id_hash(key, topic.encode(), mid.encode("utf-8", "surrogatepass"))


def test_send_one_checks_its_key():
    one = _request()
    assert _accel.send_one(one, dedup.KEY)[6] == dedup.id_hash(dedup.KEY, b"T", _accel.send_one(one)[2].encode())
    with pytest.raises(ValueError):
        _accel.send_one(one, b"short key")
    with pytest.raises(TypeError):
        _accel.send_one(one, "a str key of sixteen")
    assert _accel.send_one(b"\xff", dedup.KEY) is None            # not a request: None, the key unused


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200) | st.sampled_from(["", "01AB", "\udc80x", "\u00e9" * 70]),
       st.integers(0, 2**63 - 1) | st.sampled_from([0, 1, 127, 128, 0x3FFF, 0x4000, 0x1FFFFF, 0x200000]))
def test_answer_one_stored_writes_what_its_twin_and_answer_one_write(mid, offset):
    """The compiled answer of one message stored: its Python twin's bytes, answer_one's for
    (OK, "", id, offset) (protobuf's: tests/broker/produce/test_send_message.py) and answer_stored_one's."""
    from tidemq.broker.produce.send_message import _STORED_STATUS, answer_one, answer_stored_one, py_answer_one_stored
    from tidemq.protocol.stubs import Code
    got = _accel.answer_one_stored(_STORED_STATUS, mid, offset)
    assert got == py_answer_one_stored(_STORED_STATUS, mid, offset) == answer_one(Code.OK, "", mid, offset)
    assert got == answer_stored_one(mid, offset)


def test_answer_one_stored_checks_its_arguments():
    from tidemq.broker.produce.send_message import _STORED_STATUS, py_answer_one_stored
    for fn in (_accel.answer_one_stored, py_answer_one_stored):
        with pytest.raises(ValueError):
            fn(_STORED_STATUS, "m", -1)                                  # a queue offset >= 0
    with pytest.raises(OverflowError):
        _accel.answer_one_stored(_STORED_STATUS, "m", 2**64)
    with pytest.raises(TypeError):
        _accel.answer_one_stored(_STORED_STATUS, b"m", 1)                # the id is a str
    with pytest.raises(TypeError):
        _accel.answer_one_stored(_STORED_STATUS, "m", 1.5)
