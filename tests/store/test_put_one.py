"""The one-message put in one call (store/put_one.py): the compiled put and its Python twin give the same
bytes, state and dispatch entry, declining alike; and a store putting through put_one (put_encoded where
it declines) stores what put_encoded alone stores: the same log, consume queues, index and answers."""

from __future__ import annotations

import copy
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq.broker.replication.acks import ReplicaAcks
from tidemq.io import ManualClock
from tidemq.record import codec
from tidemq.store import MessageStore, put_one
from tidemq.store.backlog import Hold
from tidemq.store.consume_queue import UNIT
from tidemq.store.log_failure import LogFailure
from tidemq.store.topics import TopicState
from tidemq.store.validate import ENCODED_RESERVED

from ..support.store import small_config

try:
    from tidemq import _accel
except ImportError:
    _accel = None

HOST = b"\x7f\0\0\x01\0\0\x27\x10"
STORE_HOST = b"\x0a\0\0\x02\0\0\x27\x11"


class Segment:
    """What put_one reads and moves of a MappedFile (store/mapped_file.py)."""

    __slots__ = ("mapping", "wrote_pos", "size", "start_offset", "last_store_timestamp_ms")

    def __init__(self, size: int, pos: int, start: int) -> None:
        self.mapping = bytearray(size)
        self.size, self.wrote_pos, self.start_offset, self.last_store_timestamp_ms = size, pos, start, 0


@st.composite
def puts(draw):
    """One put, valid in every part but (about half the time) one: what put_one takes, and each thing
    it declines (a refusal of a check, a topic with no queue to write, a roll)."""
    rnd = draw(st.randoms(use_true_random=False))
    spoil = draw(st.sampled_from(["", "", "", "", "", "", "ids", "offset", "props", "body", "born", "sys", "room",
                                  "bounds", "reserved"]))
    queues = draw(st.integers(1, 4))
    t = TopicState(draw(st.sampled_from(["T", "Orders", "x" * 200])), queues)
    t.queues = [f"q{q}" for q in range(queues)]          # any hashable stands for a consume queue
    t.next_offsets = [rnd.choice([0, rnd.randrange(1 << 40)]) for _ in range(queues)]
    t.rr = rnd.randrange(0, 1000)
    t.write_ids = draw(st.sampled_from([range(queues), tuple(range(queues - 1, -1, -1)), range(queues - 1, -1, -2)]))
    if spoil == "ids":
        t.write_ids = draw(st.sampled_from([(), (queues,), (-1,)]))
    if spoil == "offset":
        t.next_offsets = [-1] * queues
    names = ["TAGS", "UNIQ_KEY", "KEYS", "x", "é"] + (["__CRC32#"] if spoil == "reserved" else [])
    pairs = draw(st.lists(st.tuples(st.sampled_from(names), st.text(alphabet="ab é" + ("\x01" if spoil == "props" else ""),
                                                                   max_size=8)), max_size=5))
    props = b"".join(f"{k}\x01{v}\x02".encode() for k, v in pairs)
    if spoil == "props":
        props += draw(st.sampled_from([b"\xff", b"y", b"\x02"]))
    body = draw(st.binary(max_size=300))
    if spoil == "body":
        body = bytearray(body)
    born = draw(st.one_of(st.none(), st.just(0), st.integers(-(1 << 63), (1 << 63) - 1)))
    if spoil == "born":
        born = draw(st.sampled_from([True, 1 << 63, -(1 << 63) - 1, 1.0]))
    sys_flag = draw(st.one_of(st.integers(-(1 << 31), (1 << 31) - 1), st.integers(0, 8)))
    if spoil == "sys":
        sys_flag = draw(st.sampled_from([False, 1 << 31, -(1 << 31) - 1, None]))
    size = 4096
    pos = draw(st.integers(0, 2500))
    if spoil == "room":
        pos = draw(st.integers(size - 8 - 800, size))
    seg = Segment(size, pos, draw(st.sampled_from([0, 1 << 30])))
    max_body, max_record = 400, 1600
    if spoil == "bounds":
        max_body, max_record = draw(st.sampled_from([(len(body) - 1, 1600), (400, draw(st.integers(100, 800)))]))
    return t, body, props, seg, born, sys_flag, draw(st.booleans()), max_body, max_record


def _run(fn, case):
    t, body, props, seg, born, sys_flag, index, max_body, max_record = copy.deepcopy(case)
    got = fn(t, body, props, seg, born, HOST, sys_flag, 1_700_000_000_123, STORE_HOST, index, ENCODED_RESERVED,
             max_body, max_record)
    if got is not None:
        (units, items, now, phys, end), qoff = got
        assert type(items) is bytearray and all(type(u[1]) is bytearray for u in units.values())
        got = ({cq: (u[0], bytes(u[1])) for cq, u in units.items()}, bytes(items), now, phys, end), qoff
    return got, bytes(seg.mapping), seg.wrote_pos, seg.last_store_timestamp_ms, t.rr, t.next_offsets


@pytest.mark.skipif(_accel is None, reason="tidemq._accel is not built")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(puts())
def test_the_compiled_put_is_its_twin(case):
    assert _run(_accel.put_one, case) == _run(put_one.py_put_one, case)


def test_the_selection_follows_the_switch():
    want = _accel.put_one if _accel is not None and os.environ.get("TIDEMQ_ACCEL", "1") != "0" else put_one.py_put_one
    assert put_one.put_one is want


@pytest.mark.skipif(_accel is None, reason="tidemq._accel is not built")
def test_the_compiled_put_checks_its_arguments_before_it_writes():
    t = TopicState("T", 1)
    t.queues = ["q0"]

    def call(seg, host=HOST, reserved=ENCODED_RESERVED):
        return _accel.put_one(t, b"b", b"", seg, None, host, 0, 1, STORE_HOST, False, reserved, 10, 1000)

    with pytest.raises(ValueError):
        call(Segment(512, 0, 0), host=b"short")
    with pytest.raises(TypeError):
        call(Segment(512, 0, 0), reserved=[b"x"])
    short = Segment(512, 0, 0)
    short.mapping = bytearray(100)                       # a mapping shorter than the segment says
    with pytest.raises(ValueError):
        call(short)
    ro = Segment(512, 0, 0)
    ro.mapping = bytes(512)                              # not writable
    with pytest.raises(BufferError):
        call(ro)
    assert (t.rr, t.next_offsets) == (0, [0])            # nothing taken by any of them
    assert call(Segment(512, 0, 0)) is not None and (t.rr, t.next_offsets) == (1, [1])


@pytest.mark.parametrize("fn", [_accel.put_one if _accel is not None else None, put_one.py_put_one],
                         ids=["compiled", "python"])
def test_a_segment_changing_the_topics_lists_midway_is_no_memory_fault(fn):
    # the segment's attributes are a caller's code, read after the queue and its offset are taken: one
    # that empties next_offsets is an IndexError (not a write past the list's end), one that replaces the
    # offset leaves both numbers counted right (neither released twice nor kept)
    if fn is None:
        pytest.skip("tidemq._accel is not built")
    t = TopicState("T", 1)
    t.queues = ["q0"]
    old, new = 10**18 + 7, 10**18 + 9
    t.next_offsets = [old]

    class Meddling(Segment):
        __slots__ = ("change",)

        def __getattribute__(self, name):
            if name == "mapping":
                object.__getattribute__(self, "change")()
            return object.__getattribute__(self, name)

    def put(change):
        seg = Meddling(512, 0, 0)
        seg.change = change
        return fn(t, b"b", b"", seg, None, HOST, 0, 1, STORE_HOST, False, ENCODED_RESERVED, 10, 1000)

    def replace():
        t.next_offsets[0] = new

    base_old, base_new = sys.getrefcount(old), sys.getrefcount(new)
    got = put(replace)
    assert got is not None and got[1] == old and t.next_offsets == [old + 1]
    del got
    assert (sys.getrefcount(old), sys.getrefcount(new)) == (base_old - 1, base_new)
    with pytest.raises(IndexError):
        put(t.next_offsets.clear)


@pytest.mark.parametrize("fn", [_accel.put_one if _accel is not None else None, put_one.py_put_one],
                         ids=["compiled", "python"])
def test_absurd_bounds_and_places_decline(fn):
    # a segment size or a record bound near the bottom of int64: declined (the sums that test the room and
    # the record's size would overflow: under .ci/sanitize UBSan halts on them); a negative place in the
    # segment: declined by both (the Python twin wrote it counted from the mapping's end)
    if fn is None:
        pytest.skip("tidemq._accel is not built")
    t = TopicState("T", 1)
    t.queues = ["q0"]
    low = -(1 << 63)
    for size, max_record, pos, start in ((low, 1000, 0, 0), (low + 3, 1000, 0, 0), (512, low, 0, 0),
                                         (512, low + 5, 0, 0), (512, 1000, -200, 0), (512, 1000, 0, -1)):
        seg = Segment(512, pos, start)
        seg.size = size
        assert fn(t, b"b", b"", seg, None, HOST, 0, 1, STORE_HOST, False, ENCODED_RESERVED, 10, max_record) is None
    assert (t.rr, t.next_offsets) == (0, [0])


def test_a_record_put_verifies_and_reads_back():
    t = TopicState("T", 2)
    t.queues = ["q0", "q1"]
    seg = Segment(4096, 100, 1 << 20)
    props = b"UNIQ_KEY\x01id-1\x02TAGS\x01tg\x02KEYS\x01k1 k2\x02"
    got = put_one.put_one(t, b"body", props, seg, 5, HOST, 3, 77, STORE_HOST, True, ENCODED_RESERVED, 100, 1000)
    (units, items, now, phys, end), qoff = got
    m = codec.decode_record(seg.mapping, 100, end - phys)
    assert m.intact() and (m.body, m.topic, m.queue_id, m.queue_offset, m.commitlog_offset) == (b"body", "T", 0, 0, phys)
    assert (m.born_timestamp_ms, m.store_timestamp_ms, m.sys_flag, m.tags, m.keys, m.msg_id) == \
        (5, 77, 3, "tg", ["k1", "k2"], "id-1")
    assert (phys, seg.wrote_pos, t.rr, t.next_offsets, now) == ((1 << 20) + 100, 100 + end - phys, 1, [1, 0], 77)
    assert units == {"q0": [0, bytearray(UNIT.pack(phys, end - phys, codec.tags_hash("tg")))]}
    assert len(items) == 3 * 12                              # k1, k2, the id
    before = bytes(seg.mapping), seg.wrote_pos, t.rr
    seg.wrote_pos = seg.size - 8 - (end - phys) + 1          # one byte short of room: a roll, put_encoded's
    assert put_one.put_one(t, b"body", props, seg, 5, HOST, 3, 77, STORE_HOST, True, ENCODED_RESERVED, 100,
                           1000) is None
    assert (bytes(seg.mapping), t.rr) == (before[0], before[2])


# through a store ------------------------------------------------------------------------------------
def _pair(tmp_path, **overrides):
    clock = ManualClock()
    made = []
    for name in ("one", "encoded"):
        cfg = small_config(tmp_path / name, segment_size_bytes=8 * 1024, message_body_bytes_max=3000, **overrides)
        made.append(MessageStore(cfg, clock=clock).start())
    return made, clock


def _answer(r):
    if type(r) is tuple:
        return "stored", r
    x = r[0]
    return ("stored", (int(r.qoff[0]), int(r.phys[0]))) if x.ok else ("refused", (x.status, x.reason))


def _files(root: str, sub: str) -> dict:
    out = {}
    base = os.path.join(root, sub)
    for d, _dirs, files in os.walk(base):
        for f in files:
            if f.startswith("."):          # (a directory's own marker: an id of its own)
                continue
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, base)] = fh.read()
    return out


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_a_store_putting_through_put_one_stores_what_put_encoded_stores(tmp_path, flush):
    (a, b), clock = _pair(tmp_path, flush_disk_type=flush)
    for s in (a, b):
        s.create_topic("T", 3)
    took = []

    def both(topic, body, props, born_ms=None, born_host=None, sys_flag=0):
        got = a.put_one(topic, (body, props), born_ms, born_host, sys_flag)
        took.append(got is not None)
        if got is None:
            got = a.put_encoded(topic, [(body, props)], born_ms, born_host, sys_flag, defer_dispatch=True)
        want = b.put_encoded(topic, [(body, props)], born_ms, born_host, sys_flag, defer_dispatch=True)
        assert _answer(got) == _answer(want), (topic, body[:10], props)
        if len(took) % 5 == 0:
            # the broker's timer drains every dispatch_delay_ms; an index entry keeps its run's store time
            # (dispatch.py: a drain's items of one kind in one run, the last put's time), and a drain
            # mixing put_one's hashed items with put_encoded's listed keys runs each kind apart: with the
            # clock still within a drain the two stores' index files are the same bytes
            for s in (a, b):
                s.drain_dispatch()
            clock.advance(0.007)
        return _answer(got)[0]

    def plain(i, **kw):
        return both("T", b"m%04d" % i + b"x" * (i * 37 % 900), b"UNIQ_KEY\x01id-%d\x02TAGS\x01t%d\x02" % (i, i % 3), **kw)

    try:
        answers = [plain(i) for i in range(40)]                      # rolls every few records
        answers.append(both("T", b"k", b"KEYS\x01a b  c\x02UNIQ_KEY\x01id-k\x02"))
        answers.append(both("T", b"s", b"KEYS\x01 \x02"))            # keys that index nothing
        answers.append(both("T", b"r", b"__CRC32#\x01x\x02"))        # a reserved name: refused
        answers.append(both("T", b"p", b"no pair"))                  # not properties: refused
        answers.append(both("T", b"e", b""))                         # no properties, an empty one: stored
        answers.append(both("T", b"", b"UNIQ_KEY\x01id-e\x02"))
        answers.append(both("T", b"x" * 3001, b""))                  # past message_body_bytes_max
        answers.append(both("T", b"x" * 2900, b"y\x01" + b"z" * 6000 + b"\x02"))      # record too large
        answers.append(plain(50, born_ms=12345, born_host="10.0.0.9:99", sys_flag=4))
        answers.append(plain(51, born_ms=-1))
        answers.append(plain(52, born_ms=1 << 63))                   # born fields refused
        answers.append(plain(53, sys_flag=1 << 31))
        answers.append(plain(54, born_host="nohost"))
        answers.append(plain(55, born_ms=True))
        answers.append(both("New", b"auto", b"UNIQ_KEY\x01id-n\x02"))   # a topic made by its first put
        answers.append(both("New", b"auto2", b"UNIQ_KEY\x01id-n2\x02"))
        for s in (a, b):
            s.disk.refusal = "disk full (test)"
        answers.append(plain(60))
        for s in (a, b):
            s.disk.refusal = None
        answers.append(plain(61))
        for s in (a, b):                                             # the log failed for good: refused
            s.commit_log.halt(LogFailure("d", "p", 0, 0, "test", None, 0))
        answers.append(plain(62))
        if flush == "SYNC_FLUSH":
            assert not any(took)                   # a put that waits for its fsync never takes this way
        else:
            assert took.count(True) >= 35 and took.count(False) >= 15, took
            assert answers.count("refused") >= 9
        for s in (a, b):
            s.drain_dispatch()
            s.flush_queues()
        for sub in ("commitlog", "consumequeue", "index"):
            fa, fb = _files(a.config.root_dir, sub), _files(b.config.root_dir, sub)
            assert fa.keys() == fb.keys() and fa == fb, sub
        for key in ("id-3", "a", "c", "id-k", "id-n2", "id-e"):
            topic = "T" if key != "id-n2" else "New"
            assert [m.body for m in a.query_by_key(topic, key, whole_log=True)] == \
                [m.body for m in b.query_by_key(topic, key, whole_log=True)]
        assert [m.body for m in a.query_by_key("T", "c", whole_log=True)] == [b"k"]
    finally:
        for s in (a, b):
            s.shutdown()


def test_put_one_declines_in_every_state_that_refuses_or_waits(tmp_path):
    """Every change of state after which a put would be refused, would wait or could not append into
    the last segment makes put_one decline (None, nothing written), and put_one takes puts again once
    it is undone: it checks them all on each put (no cached verdict that a change could leave stale)."""
    dirs = (str(tmp_path / "d1"), str(tmp_path / "d2"))
    s = MessageStore(small_config(tmp_path / "s", segment_size_bytes=8 * 1024, commitlog_dirs=dirs),
                     clock=ManualClock()).start()
    w = s.writer
    entry = (b"body", b"UNIQ_KEY\x01u\x02")
    try:
        s.create_topic("T", 2)
        s.put_encoded("T", [entry], defer_dispatch=True)       # (the first segment: put_encoded's roll)
        assert s.put_one("T", entry) is not None

        def declines(why):
            end = s.segments.max_offset
            assert s.put_one("T", entry) is None, why
            assert s.segments.max_offset == end, why
            assert s.put_encoded("T", [entry], defer_dispatch=True) is not None

        def took(why):
            assert s.put_one("T", entry) is not None, why

        changes = [
            ("disk alarm", lambda: setattr(s.disk, "refusal", "disk full (test)"),
             lambda: setattr(s.disk, "refusal", None)),
            ("stopping", lambda: setattr(s, "refusal", "held (test)"), lambda: setattr(s, "refusal", None)),
            ("role: following", lambda: s.follow("a follower (test)"), lambda: s.lead(0)),
            ("dispatch failed", lambda: setattr(s.dispatcher, "error", "test"),
             lambda: setattr(s.dispatcher, "error", None)),
            ("backlog held", lambda: setattr(s.cleaner, "hold", Hold("p", "T", 0, 0, ())),
             lambda: setattr(s.cleaner, "hold", None)),
            ("ASYNC followers (a put asks their lease)",
             lambda: setattr(w, "replicas", ReplicaAcks(False, 0, 60_000, 60_000, lambda: s.segments.max_offset, s.clock)),
             lambda: setattr(w, "replicas", None)),
        ]
        for why, do, undo in changes:
            do()
            declines(why)
            undo()
            took(why)
        # a full segment (sealed early: its end is its size) and its directory offline
        mf = s.segments.last
        s.disk.mark_offline(mf.directory, "test")
        assert s.write_refusal() is None             # the other directory takes the log on
        declines("directory offline")                # (put_encoded sealed it and rolled)
        took("the next segment, in the other directory")
        assert s.segments.last is not mf and mf.is_full
        # a full segment (``is_full``: sealed early, or filled) is declined by the call itself: nothing fits
        t = s.topics.get("T")
        for fn in (put_one.py_put_one, *((_accel.put_one,) if _accel is not None else ())):
            assert fn(t, b"b", b"", mf, None, HOST, 0, 1, STORE_HOST, True, ENCODED_RESERVED, 3000, 1 << 20) is None
        # the log failed for good
        s.commit_log.halt(LogFailure("d", "p", 0, 0, "test", None, 0))
        declines("log halted")
    finally:
        s.shutdown()
    # SYNC_FLUSH: a put that waits for its fsync never takes this way
    s = MessageStore(small_config(tmp_path / "sync", flush_disk_type="SYNC_FLUSH"), clock=ManualClock()).start()
    try:
        s.create_topic("T", 2)
        assert s.put_one("T", entry) is None
    finally:
        s.shutdown()

