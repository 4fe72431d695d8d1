"""MessageStore, the public facade: put / put_batch, get and its statuses and
limits, bad input, offsets by time, topics on disk, check(), concurrent readers."""

from __future__ import annotations

import os
import re
import threading
import zlib

import pytest

from tidemq import checked
from tidemq.store import GetStatus, Message, MessageStore, PutStatus, StoreConfig
from tidemq.io import LockedError, ManualClock, OsFileIO
from tidemq.record import codec
from tidemq.record.codec import encode_host, offset_msg_id, parse_offset_msg_id
from tidemq.store.mapped_file import segment_name
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import memory_config
from ..support.wait import patience

T0 = 1_700_000_000_000
USER_PROPS_MAX = getattr(codec, "USER_PROPERTIES_MAX_BYTES", codec.PROPERTIES_MAX_BYTES)


def test_public_api_imports():
    import tidemq.store as st
    for name in ("MessageStore", "StoreConfig", "Message", "PutStatus", "GetStatus"):
        assert name in st.__all__
    assert st.StoreConfig is StoreConfig
    assert {s.name for s in GetStatus} >= {"FOUND", "NO_MESSAGE_IN_QUEUE", "OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_ONE",
                                           "OFFSET_OVERFLOW_BADLY", "OFFSET_FOUND_NULL", "NO_MATCHED_LOGIC_QUEUE",
                                           "NO_MATCHED_MESSAGE"}
    assert {s.name for s in PutStatus} >= {"PUT_OK", "FLUSH_DISK_TIMEOUT", "SERVICE_NOT_AVAILABLE",
                                           "MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED", "TOPIC_NOT_FOUND"}


# Put ----------------------------------------------------------------------------------

def test_put_result(make_config, open_store):
    clock = ManualClock(T0)
    s = open_store(make_config(), clock=clock)
    r = s.put(Message("T", b"hello", queue_id=2))
    assert r.status is PutStatus.PUT_OK and r.ok
    assert r.commitlog_offset == 0
    assert r.queue_id == 2 and r.queue_offset == 0
    assert r.store_timestamp_ms == T0
    assert r.size > 91 + 5
    assert r.error is None
    # no UNIQ_KEY: the msg id is the offset message id (store host + commit-log offset)
    assert r.msg_id == r.offset_msg_id == offset_msg_id(encode_host("127.0.0.1:10911"), 0)
    assert len(r.msg_id) == 32 and r.msg_id == r.msg_id.upper()
    r2 = s.put(Message("T", b"world", queue_id=2))
    assert r2.commitlog_offset == r.size and r2.queue_offset == 1
    assert parse_offset_msg_id(r2.msg_id) == ("127.0.0.1:10911", r.size)
    # with UNIQ_KEY the msg id is the producer's
    r3 = s.put(Message("T", b"!", properties={"UNIQ_KEY": "AC1100010000ABCD"}))
    assert r3.msg_id == "AC1100010000ABCD"
    assert r3.offset_msg_id == offset_msg_id(encode_host("127.0.0.1:10911"), r3.commitlog_offset)


def test_store_host_from_config(make_config, open_store):
    s = open_store(make_config(store_host="10.1.2.3:9876"))
    r = s.put(Message("T", b"x"))
    assert parse_offset_msg_id(r.msg_id) == ("10.1.2.3:9876", r.commitlog_offset)
    m = s.get_by_commitlog_offset(r.commitlog_offset)
    assert m.store_host == "10.1.2.3:9876"
    assert m.offset_msg_id == r.msg_id


def test_put_batch_results(store):
    msgs = [Message("T", b"m%d" % i, queue_id=i % 3) for i in range(9)]
    rs = store.put_batch(msgs)
    assert len(rs) == 9
    assert all(r.status is PutStatus.PUT_OK for r in rs)
    assert [r.queue_id for r in rs] == [0, 1, 2] * 3
    assert [r.queue_offset for r in rs] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    offs = [r.commitlog_offset for r in rs]
    assert offs == sorted(offs) and len(set(offs)) == 9
    for a, b in zip(rs, rs[1:]):
        assert b.commitlog_offset == a.commitlog_offset + a.size
    assert store.put_batch([]) == []


def test_all_fields_round_trip(make_config, open_store):
    s = open_store(make_config(), clock=ManualClock(T0))
    m = Message("T", b"\x00body\xff", tags="TagA", keys=["k1", "k2"], properties={"a": "1", "ü": "ß"},
                queue_id=1, flag=3, sys_flag=4, born_timestamp_ms=T0 - 5, born_host="10.9.8.7:1234",
                reconsume_times=2, prepared_transaction_offset=77)
    r = s.put(m)
    g = s.get("G", "T", 1, 0)
    got = g.messages[0]
    assert got.body == b"\x00body\xff"
    assert got.topic == "T"
    assert got.tags == "TagA"
    assert got.keys == ["k1", "k2"]
    assert got.properties["a"] == "1" and got.properties["ü"] == "ß"
    assert (got.queue_id, got.queue_offset, got.commitlog_offset) == (1, 0, r.commitlog_offset)
    assert (got.flag, got.sys_flag, got.reconsume_times, got.prepared_transaction_offset) == (3, 4, 2, 77)
    assert got.born_timestamp_ms == T0 - 5 and got.store_timestamp_ms == T0
    assert got.born_host == "10.9.8.7:1234"
    assert got.store_size == r.size
    assert got.body_crc == zlib.crc32(got.body) & 0x7FFFFFFF
    assert got.msg_id == r.msg_id


def test_born_timestamp_defaults_to_now(make_config, open_store):
    s = open_store(make_config(), clock=ManualClock(T0))
    s.put(Message("T", b"x", queue_id=0))
    assert s.get("G", "T", 0, 0).messages[0].born_timestamp_ms == T0


def test_round_robin_queue_choice(store):
    store.create_topic("RR", 4)
    rs = [store.put(Message("RR", b"%d" % i)) for i in range(10)]
    assert [r.queue_id for r in rs] == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert [r.queue_offset for r in rs] == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    rb = store.put_batch([Message("RR", b"b") for _ in range(4)])
    assert [r.queue_id for r in rb] == [2, 3, 0, 1]
    # an explicit queue id does not move the round robin
    store.put(Message("RR", b"x", queue_id=0))
    assert store.put(Message("RR", b"y")).queue_id == 2


def test_auto_created_topic_has_default_queue_count(make_config, open_store):
    s = open_store(make_config(topic_queues_default=3))
    rs = [s.put(Message("Auto", b"x")) for _ in range(4)]
    assert s.queue_count("Auto") == 3
    assert [r.queue_id for r in rs] == [0, 1, 2, 0]
    assert "Auto" in s.topic_names()


def test_create_topic_grows_queue_count(store):
    store.create_topic("G", 2)
    store.put(Message("G", b"x", queue_id=1))
    store.create_topic("G", 5)
    assert store.queue_count("G") == 5
    assert store.put(Message("G", b"y", queue_id=4)).ok
    store.create_topic("G", 1)                           # never shrinks
    assert store.queue_count("G") == 5
    assert store.max_offset("G", 1) == 1


# Get statuses ------------------------------------------------------------------------

def test_get_found(store):
    store.put_batch([Message("T", b"m%d" % i, queue_id=0) for i in range(10)])
    g = store.get("G", "T", 0, 3, max_count=4)
    assert g.status is GetStatus.FOUND
    assert [m.body for m in g.messages] == [b"m3", b"m4", b"m5", b"m6"]
    assert [m.queue_offset for m in g.messages] == [3, 4, 5, 6]
    assert g.next_offset == 7 and g.min_offset == 0 and g.max_offset == 10


def test_get_no_message_in_queue(store):
    store.create_topic("E", 2)
    g = store.get("G", "E", 1, 0)
    assert g.status is GetStatus.NO_MESSAGE_IN_QUEUE
    assert g.messages == [] and g.next_offset == 0


def test_get_no_matched_logic_queue(store):
    store.put(Message("T", b"x", queue_id=0))
    assert store.get("G", "Unknown", 0, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    assert store.get("G", "T", 8, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE     # 8 queues: 0..7
    assert store.get("G", "T", -1, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE


def test_get_offset_overflow_one_and_badly(store):
    store.put_batch([Message("T", b"x", queue_id=0) for _ in range(5)])
    g = store.get("G", "T", 0, 5)
    assert g.status is GetStatus.OFFSET_OVERFLOW_ONE
    assert g.next_offset == 5 and g.max_offset == 5 and g.messages == []
    g = store.get("G", "T", 0, 6)
    assert g.status is GetStatus.OFFSET_OVERFLOW_BADLY
    assert g.next_offset == 5
    g = store.get("G", "T", 0, 1000)
    assert g.status is GetStatus.OFFSET_OVERFLOW_BADLY and g.next_offset == 5


def test_get_offset_too_small(make_config, open_store):
    s = open_store(make_config(consume_queue_units_per_segment=16))
    s.put_batch([Message("T", b"m%d" % i, queue_id=0) for i in range(40)])
    s.queues.get("T", 0).delete_file(0)
    assert s.min_offset("T", 0) == 16
    g = s.get("G", "T", 0, 3)
    assert g.status is GetStatus.OFFSET_TOO_SMALL
    assert g.next_offset == 16 and g.min_offset == 16 and g.max_offset == 40
    assert s.get("G", "T", 0, -1).status is GetStatus.OFFSET_TOO_SMALL
    g = s.get("G", "T", 0, 16, max_count=2)
    assert g.status is GetStatus.FOUND and [m.body for m in g.messages] == [b"m16", b"m17"]


def test_get_offset_found_null(make_config, open_store):
    s = open_store(make_config(consume_queue_units_per_segment=16))
    s.put_batch([Message("T", b"m%d" % i, queue_id=0) for i in range(40)])
    cq = s.queues.get("T", 0)
    path = os.path.join(cq.dir, segment_name(16 * 20))
    cq.handles.forget(path)
    os.unlink(path)                               # the middle consume-queue file is gone
    g = s.get("G", "T", 0, 20)
    assert g.status is GetStatus.OFFSET_FOUND_NULL
    assert g.messages == []
    assert g.next_offset == 32                    # the start of the next file
    assert s.get("G", "T", 0, 32).status is GetStatus.FOUND


def test_get_message_was_removing(make_config, open_store):
    s = open_store(make_config())
    s.put_batch([Message("T", b"x" * 1000, queue_id=0) for _ in range(100)])   # two segments
    head = s.segments.first
    s.segments.remove_head(head)
    head.destroy(0, 0)
    g = s.get("G", "T", 0, 0, max_count=4)
    assert g.status is GetStatus.MESSAGE_WAS_REMOVING
    assert g.next_offset == 4


def test_get_tags_filter(store):
    tags = ["TagA", "TagB", "TagC"]
    store.put_batch([Message("T", b"%d" % i, tags=tags[i % 3], queue_id=0) for i in range(30)])
    g = store.get("G", "T", 0, 0, max_count=32, tags=["TagB"])
    assert g.status is GetStatus.FOUND
    assert [int(m.body) for m in g.messages] == list(range(1, 30, 3))
    assert all(m.tags == "TagB" for m in g.messages)
    g = store.get("G", "T", 0, 0, tags=["TagA", "TagC"])
    assert [int(m.body) for m in g.messages] == [i for i in range(30) if i % 3 != 1]
    assert len(store.get("G", "T", 0, 0, tags=["*"]).messages) == 30
    assert len(store.get("G", "T", 0, 0, tags=None).messages) == 30


def test_get_no_matched_message(store):
    store.put_batch([Message("T", b"x", tags="TagA", queue_id=0) for _ in range(10)])
    g = store.get("G", "T", 0, 0, tags=["TagZ"])
    assert g.status is GetStatus.NO_MATCHED_MESSAGE
    assert g.messages == []
    assert g.next_offset == 10                  # the consumer moves past what it scanned


def test_tags_filter_tells_apart_tags_with_the_same_hash(store):
    assert codec.tags_hash("Aa") == codec.tags_hash("BB")
    store.put_batch([Message("T", b"%d" % i, tags="Aa" if i % 2 else "BB", queue_id=0) for i in range(10)])
    g = store.get("G", "T", 0, 0, tags=["Aa"])
    assert [int(m.body) for m in g.messages] == [1, 3, 5, 7, 9]
    g = store.get("G", "T", 0, 0, tags=["BB"])
    assert [int(m.body) for m in g.messages] == [0, 2, 4, 6, 8]


# Get limits ---------------------------------------------------------------------------

def test_get_max_count(store):
    store.put_batch([Message("T", b"x", queue_id=0) for _ in range(50)])
    assert len(store.get("G", "T", 0, 0, max_count=5).messages) == 5
    assert store.get("G", "T", 0, 0, max_count=5).next_offset == 5
    assert len(store.get("G", "T", 0, 45, max_count=10).messages) == 5
    assert len(store.get("G", "T", 0, 0, max_count=1).messages) == 1


def test_get_max_bytes(store):
    rs = store.put_batch([Message("T", b"x" * 1000, queue_id=0) for _ in range(20)])
    size = rs[0].size
    g = store.get("G", "T", 0, 0, max_bytes=3 * size)
    assert len(g.messages) == 3 and g.next_offset == 3
    g = store.get("G", "T", 0, 0, max_bytes=3 * size + size - 1)
    assert len(g.messages) == 3


def test_first_message_returned_even_if_larger_than_max_bytes(store):
    store.put_batch([Message("T", b"x" * 5000, queue_id=0) for _ in range(3)])
    g = store.get("G", "T", 0, 0, max_bytes=10)
    assert g.status is GetStatus.FOUND
    assert len(g.messages) == 1 and g.next_offset == 1


def test_get_default_limit_is_32(store):
    store.put_batch([Message("T", b"x", queue_id=0) for _ in range(100)])
    g = store.get("G", "T", 0, 0)
    assert len(g.messages) == 32 and g.next_offset == 32
    assert len(store.get("G", "T", 0, 0, max_count=1000).messages) == 32


def test_config_pull_limits_in_memory(make_config, open_store):
    s = open_store(make_config(pull_in_memory_count_max=4))
    rs = s.put_batch([Message("T", b"x" * 100, queue_id=0) for _ in range(20)])
    g = s.get("G", "T", 0, 0, max_count=100)
    assert g.from_disk is False
    assert len(g.messages) == 4
    s2_cfg = make_config(root_dir=str(make_config().root_dir) + "2", pull_in_memory_bytes_max=3 * rs[0].size)
    s2 = open_store(s2_cfg)
    s2.put_batch([Message("T", b"x" * 100, queue_id=0) for _ in range(20)])
    assert len(s2.get("G", "T", 0, 0, max_count=100, max_bytes=1 << 30).messages) == 3


def test_config_pull_limits_from_disk(make_config, open_store, monkeypatch):
    # pretend the machine has 100 KiB of memory: data more than 40 KiB behind the log's end is "on disk"
    monkeypatch.setattr("tidemq.store.sizing.total_memory_bytes", lambda: 100 * 1024)
    s = open_store(make_config(segment_size_bytes=1024 * 1024))
    rs = s.put_batch([Message("T", b"x" * 1000, queue_id=0) for _ in range(200)])
    g = s.get("G", "T", 0, 0, max_count=100, max_bytes=1 << 30)
    assert g.from_disk is True
    assert len(g.messages) == 8                     # pull_from_disk_count_max
    tail = s.get("G", "T", 0, 195, max_count=100)
    assert tail.from_disk is False and len(tail.messages) == 5
    size = rs[0].size
    s2 = open_store(make_config(root_dir=str(make_config().root_dir) + "2", segment_size_bytes=1024 * 1024,
                                pull_from_disk_bytes_max=3 * size))
    s2.put_batch([Message("T", b"x" * 1000, queue_id=0) for _ in range(200)])
    g = s2.get("G", "T", 0, 0, max_count=100, max_bytes=1 << 30)
    assert g.from_disk is True and len(g.messages) == 3


# Bad input ----------------------------------------------------------------------------

def snapshot(s: MessageStore):
    return (s.commitlog_max_offset, tuple(s.max_offset("T", q) for q in range(8)), tuple(s.topic_names()))


BAD = [
    ("topic with space", lambda: Message("bad topic", b"x"), PutStatus.MESSAGE_ILLEGAL),
    ("topic with slash", lambda: Message("a/b", b"x"), PutStatus.MESSAGE_ILLEGAL),
    ("empty topic", lambda: Message("", b"x"), PutStatus.MESSAGE_ILLEGAL),
    ("topic of 128 chars", lambda: Message("t" * 128, b"x"), PutStatus.MESSAGE_ILLEGAL),
    ("body too large", lambda: Message("T", b"x" * 1025), PutStatus.MESSAGE_ILLEGAL),
    ("body not bytes", lambda: Message("T", "text"), PutStatus.MESSAGE_ILLEGAL),
    ("properties too large", lambda: Message("T", b"x", properties={"big": "v" * 33_000}),
     PutStatus.PROPERTIES_SIZE_EXCEEDED),
    ("properties one byte too large",
     lambda: Message("T", b"x", properties={"p": "v" * (USER_PROPS_MAX - 3 + 1)}), PutStatus.PROPERTIES_SIZE_EXCEEDED),
    ("many keys too large", lambda: Message("T", b"x", keys=["k%05d" % i for i in range(6000)]),
     PutStatus.PROPERTIES_SIZE_EXCEEDED),
    ("key with space", lambda: Message("T", b"x", keys=["a b"]), PutStatus.MESSAGE_ILLEGAL),
    ("empty key", lambda: Message("T", b"x", keys=[""]), PutStatus.MESSAGE_ILLEGAL),
    ("property with separator", lambda: Message("T", b"x", properties={"a\x01": "b"}), PutStatus.MESSAGE_ILLEGAL),
    ("property value with separator", lambda: Message("T", b"x", properties={"a": "b\x02"}),
     PutStatus.MESSAGE_ILLEGAL),
    ("tags with separator", lambda: Message("T", b"x", tags="a\x02b"), PutStatus.MESSAGE_ILLEGAL),
    ("queue id too large", lambda: Message("T", b"x", queue_id=8), PutStatus.MESSAGE_ILLEGAL),
    ("queue id negative", lambda: Message("T", b"x", queue_id=-1), PutStatus.MESSAGE_ILLEGAL),
]


@pytest.mark.parametrize("what, make_msg, status", BAD, ids=[b[0] for b in BAD])
def test_bad_input_gets_a_status_and_writes_nothing(make_config, open_store, what, make_msg, status):
    s = open_store(make_config(message_body_bytes_max=1024))
    s.put(Message("T", b"first", queue_id=0))
    before = snapshot(s)
    r = s.put(make_msg())
    assert r.status is status, (what, r)
    assert not r.ok
    assert r.error, "a rejected message says why"
    assert r.commitlog_offset == -1 and r.msg_id is None
    assert snapshot(s) == before
    # the store goes on
    assert s.put(Message("T", b"after", queue_id=0)).queue_offset == 1


def test_limits_themselves_are_accepted(make_config, open_store):
    s = open_store(make_config(message_body_bytes_max=1024))
    assert s.put(Message("T", b"x" * 1024)).ok
    assert s.put(Message("t" * 127, b"x")).ok
    assert s.put(Message("%RETRY%g|a_b-C9", b"x")).ok
    assert s.put(Message("T", b"x", properties={"p": "v" * (USER_PROPS_MAX - 3)})).ok
    assert s.put(Message("T", b"x", queue_id=7)).ok
    assert s.put(Message("T", b"")).ok


def test_topic_with_trailing_newline_is_illegal(store):
    before = store.commitlog_max_offset
    r = store.put(Message("T\n", b"x"))
    assert r.status is PutStatus.MESSAGE_ILLEGAL
    assert store.commitlog_max_offset == before
    assert "T\n" not in store.topic_names()


def test_oversized_tags_are_properties_size_exceeded(store):
    before = store.commitlog_max_offset
    r = store.put(Message("T", b"x", tags="t" * 40_000))
    assert r.status is PutStatus.PROPERTIES_SIZE_EXCEEDED, r.error
    assert store.commitlog_max_offset == before
    # the same tags with a property go through the other path: same answer
    r2 = store.put(Message("T", b"x", tags="t" * 40_000, properties={"a": "b"}))
    assert r2.status is PutStatus.PROPERTIES_SIZE_EXCEEDED


def test_rejected_message_does_not_create_its_topic(make_config, open_store):
    cfg = make_config(message_body_bytes_max=1024)
    s = open_store(cfg)
    r = s.put(Message("NewTopic", b"x" * 2000))
    assert r.status is PutStatus.MESSAGE_ILLEGAL
    assert "NewTopic" not in s.topic_names()
    path = os.path.join(cfg.config_path, "topics.json")
    if os.path.exists(path):
        with open(path, "rb") as f:
            assert "NewTopic" not in checked.decode(f.read())["topics"]


def test_bad_message_in_a_batch_does_not_stop_the_others(make_config, open_store):
    s = open_store(make_config(message_body_bytes_max=1024))
    rs = s.put_batch([Message("T", b"a", queue_id=0), Message("T", b"x" * 2000, queue_id=0),
                      Message("T", b"b", queue_id=0), Message("bad topic", b"c"),
                      Message("T", b"c", queue_id=0)])
    assert [r.status for r in rs] == [PutStatus.PUT_OK, PutStatus.MESSAGE_ILLEGAL, PutStatus.PUT_OK,
                                      PutStatus.MESSAGE_ILLEGAL, PutStatus.PUT_OK]
    assert [r.queue_offset for r in rs if r.ok] == [0, 1, 2]
    assert [m.body for m in s.get("G", "T", 0, 0).messages] == [b"a", b"b", b"c"]


def test_topic_not_found_without_auto_create(make_config, open_store):
    s = open_store(make_config(auto_create_topics=False))
    r = s.put(Message("T", b"x"))
    assert r.status is PutStatus.TOPIC_NOT_FOUND and r.error
    assert s.commitlog_max_offset == 0 and s.topic_names() == []
    s.create_topic("T", 2)
    r = s.put(Message("T", b"x"))
    assert r.ok and r.queue_id in (0, 1)


def test_put_before_start_and_after_shutdown(make_config):
    cfg = make_config()
    s = MessageStore(cfg)
    assert s.put(Message("T", b"x")).status is PutStatus.SERVICE_NOT_AVAILABLE
    s.start()
    try:
        assert s.put(Message("T", b"x")).ok
    finally:
        s.shutdown()
    r = s.put(Message("T", b"y"))
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and r.error
    s.shutdown()                                    # twice is harmless


def test_second_store_on_the_same_root_is_refused(make_config, open_store):
    cfg = make_config()
    open_store(cfg)
    other = MessageStore(cfg)
    with pytest.raises(LockedError):
        other.start()


def test_context_manager(make_config):
    cfg = make_config()
    with MessageStore(cfg) as s:
        assert s.put(Message("T", b"x")).ok
    assert not os.path.exists(cfg.abort_path)
    with MessageStore(cfg) as s2:                   # the lock was released
        assert s2.commitlog_max_offset > 0


# Offsets ------------------------------------------------------------------------------

def test_min_max_offset(store):
    assert store.min_offset("T", 0) == 0 and store.max_offset("T", 0) == 0
    store.put_batch([Message("T", b"x", queue_id=0) for _ in range(7)])
    store.put_batch([Message("T", b"x", queue_id=1) for _ in range(3)])
    assert store.max_offset("T", 0) == 7 and store.max_offset("T", 1) == 3
    assert store.min_offset("T", 0) == 0
    assert store.max_offset("T", 2) == 0
    assert store.max_offset("Nope", 0) == 0 and store.min_offset("Nope", 0) == 0


def test_offset_for_timestamp(make_config, open_store):
    clock = ManualClock(T0)
    s = open_store(make_config(), clock=clock)
    for i in range(10):
        s.put(Message("T", b"%d" % i, queue_id=0))
        s.put(Message("T", b"other", queue_id=1))
        clock.advance(1)
    assert s.offset_for_timestamp("T", 0, 0) == 0
    assert s.offset_for_timestamp("T", 0, T0) == 0
    assert s.offset_for_timestamp("T", 0, T0 + 1) == 1
    assert s.offset_for_timestamp("T", 0, T0 + 3000) == 3
    assert s.offset_for_timestamp("T", 0, T0 + 3500) == 4
    assert s.offset_for_timestamp("T", 0, T0 + 9000) == 9
    assert s.offset_for_timestamp("T", 0, T0 + 9001) == 10          # after the last: max offset
    assert s.offset_for_timestamp("T", 5, T0) == 0                  # empty queue
    assert s.offset_for_timestamp("Nope", 0, T0) == 0


def test_offset_for_timestamp_with_equal_timestamps(make_config, open_store):
    clock = ManualClock(T0)
    s = open_store(make_config(), clock=clock)
    for _ in range(3):
        s.put(Message("T", b"a", queue_id=0))
    clock.advance(1)
    for _ in range(4):
        s.put(Message("T", b"b", queue_id=0))
    assert s.offset_for_timestamp("T", 0, T0) == 0
    assert s.offset_for_timestamp("T", 0, T0 + 1) == 3
    assert s.offset_for_timestamp("T", 0, T0 + 1000) == 3
    assert s.offset_for_timestamp("T", 0, T0 + 1001) == 7


# Topics on disk -----------------------------------------------------------------------

def test_topics_persisted_and_restored(make_config, open_store):
    cfg = make_config()
    s = open_store(cfg)
    s.create_topic("Orders", 3)
    s.put(Message("Auto", b"x"))
    s.put_batch([Message("Orders", b"o%d" % i, queue_id=2) for i in range(5)])
    path = os.path.join(cfg.config_path, "topics.json")
    doc = checked.decode(open(path, "rb").read())
    assert doc["topics"]["Orders"]["queue_count"] == 3
    assert doc["topics"]["Auto"]["queue_count"] == 8
    s.shutdown()
    s2 = open_store(cfg)
    assert s2.topic_names() == ["Auto", "Orders"]
    assert s2.queue_count("Orders") == 3 and s2.queue_count("Auto") == 8
    assert s2.get("G", "Orders", 1, 0).status is GetStatus.NO_MESSAGE_IN_QUEUE
    r = s2.put(Message("Orders", b"o5", queue_id=2))
    assert r.queue_offset == 5                                       # queue offsets continue
    assert [m.body for m in s2.get("G", "Orders", 2, 0).messages] == [b"o%d" % i for i in range(6)]


def test_topics_without_auto_create_survive_restart(make_config, open_store):
    cfg = make_config(auto_create_topics=False)
    s = open_store(cfg)
    s.create_topic("Known", 2)
    s.shutdown()
    s2 = open_store(cfg)
    assert s2.put(Message("Known", b"x")).ok
    assert s2.put(Message("Unknown", b"x")).status is PutStatus.TOPIC_NOT_FOUND


def test_topics_file_lost_queues_found_on_disk_are_added_back(make_config, open_store):
    cfg = make_config()
    s = open_store(cfg)
    s.put_batch([Message("T", b"q5-%d" % i, queue_id=5) for i in range(3)])
    s.shutdown()
    os.unlink(os.path.join(cfg.config_path, "topics.json"))
    s2 = open_store(cfg)
    assert "T" in s2.topic_names()
    assert s2.queue_count("T") >= 6
    assert [m.body for m in s2.get("G", "T", 5, 0).messages] == [b"q5-0", b"q5-1", b"q5-2"]
    assert s2.put(Message("T", b"q5-3", queue_id=5)).queue_offset == 3


def test_a_flipped_digit_in_topics_json_never_hides_intact_messages(make_config, open_store):
    """Real files: a topic deleted, made again, sent to; a flipped digit in the deleted topic's end
    (read as is, it covered the new topic's acknowledged messages: never served) is recognised and
    the previous version used; every acknowledged message is served after the restart."""
    cfg = make_config()
    s = open_store(cfg)
    s.put_batch([Message("D", b"old-%d" % i, queue_id=0) for i in range(3)])
    s.delete_topic("D")
    end = s.topics.deleted["D"]
    s.create_topic("D", 1)
    assert all(r.ok for r in s.put_batch([Message("D", b"new-%d" % i, queue_id=0) for i in range(3)]))
    log_end = s.commitlog_max_offset
    s.shutdown()
    path = os.path.join(cfg.config_path, "topics.json")
    data = open(path, "rb").read()
    flipped = int("9" * len(str(end)))
    damaged, n = re.subn(rb'("D": ?)%d\b' % end, rb"\g<1>%d" % flipped, data)
    assert n == 1 and flipped >= log_end, "the damage covers the new messages"
    open(path, "wb").write(damaged)
    s2 = open_store(cfg)
    assert [m.body for m in s2.get("G", "D", 0, 0).messages] == [b"new-0", b"new-1", b"new-2"]
    assert s2.topics.deleted["D"] == end and os.path.exists(path + ".damaged")


def test_abort_file_exists_only_while_running(make_config, open_store):
    cfg = make_config()
    s = open_store(cfg)
    assert os.path.exists(cfg.abort_path)
    s.put(Message("T", b"x"))
    s.shutdown()
    assert not os.path.exists(cfg.abort_path)
    s2 = open_store(cfg)
    assert s2.recovery is not None and s2.recovery.abnormal is False


# check() ------------------------------------------------------------------------------

def test_check_healthy_store(make_config, open_store):
    s = open_store(make_config(consume_queue_units_per_segment=16))
    s.put_batch([Message("T", b"x" * 1000, keys="k%d" % i) for i in range(150)])
    rep = s.check()
    assert rep.ok, rep.problems
    assert rep.problems == []
    assert rep.records == 150
    assert rep.segments == len(s.segments) >= 2
    assert rep.units == 150
    assert rep.queues == 8
    assert rep.index_files >= 1


def test_check_empty_store(store):
    rep = store.check()
    assert rep.ok and rep.records == 0


@pytest.mark.parametrize("which", ["first", "middle", "last"])
def test_check_reports_a_corrupted_body_byte(make_config, open_store, which):
    s = open_store(make_config())
    rs = s.put_batch([Message("T", b"x" * 1000, queue_id=0) for _ in range(100)])
    r = {"first": rs[0], "middle": rs[70], "last": rs[-1]}[which]
    mf = s.segments.find(r.commitlog_offset)
    pos = r.commitlog_offset - mf.start_offset + 88 + 500          # a byte in the body
    mf.buf[pos] ^= 0x20
    rep = s.check()
    assert not rep.ok
    assert rep.problems
    assert any(str(r.commitlog_offset) in p for p in rep.problems), rep.problems


def test_check_reports_a_consume_queue_unit_pointing_at_the_wrong_message(store):
    from tidemq.store.consume_queue import UNIT
    rs = store.put_batch([Message("T", b"m%d" % i, queue_id=0) for i in range(5)])
    cq = store.queues.get("T", 0)
    with cq.handles.use(os.path.join(cq.dir, segment_name(0))) as h:
        store.fio.pwrite(h, UNIT.pack(rs[3].commitlog_offset, rs[3].size, 0), 20 * 1)   # unit 1 -> message 3
    rep = store.check()
    assert not rep.ok
    assert any("T/0" in p and "unit 1" in p for p in rep.problems), rep.problems


# Concurrency --------------------------------------------------------------------------

def expected_body(i: int) -> bytes:
    return (b"%06d:" % i) * (1 + i % 40)


def test_readers_never_see_a_half_written_record(make_config, open_store):
    s = open_store(make_config(segment_size_bytes=128 * 1024))
    s.create_topic("C", 1)
    batches, per_batch = 150, 20
    total = batches * per_batch
    done = threading.Event()
    errors: list[str] = []
    seen = [0]

    def reader():
        off = 0
        try:
            while off < total:
                g = s.get("G", "C", 0, off, max_count=32)
                if g.status is GetStatus.FOUND:
                    for m in g.messages:
                        if m.queue_offset != off:
                            errors.append(f"expected offset {off}, got {m.queue_offset}")
                            return
                        if m.body != expected_body(off):
                            errors.append(f"wrong body at {off}")
                            return
                        if m.body_crc != zlib.crc32(m.body) & 0x7FFFFFFF:
                            errors.append(f"bad CRC at {off}")
                            return
                        off += 1
                    seen[0] = off
                elif g.status is not GetStatus.OFFSET_OVERFLOW_ONE and g.status is not GetStatus.NO_MESSAGE_IN_QUEUE:
                    errors.append(f"unexpected {g}")
                    return
                elif done.is_set() and s.max_offset("C", 0) == off:
                    return
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for b in range(batches):
            rs = s.put_batch([Message("C", expected_body(b * per_batch + k)) for k in range(per_batch)])
            assert all(r.ok for r in rs)
    finally:
        done.set()
        for t in readers:
            t.join(patience())
    assert not any(t.is_alive() for t in readers)
    assert not errors, errors
    assert seen[0] == total
    assert len(s.segments) > 2
    assert s.check().ok


def test_concurrent_writers_keep_queue_offsets_dense(make_config, open_store):
    s = open_store(make_config(segment_size_bytes=256 * 1024))
    s.create_topic("W", 2)
    results: list = []
    lock = threading.Lock()

    def writer(t):
        for i in range(100):
            r = s.put(Message("W", b"%d-%d" % (t, i)))
            with lock:
                results.append(r)

    ts = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(r.ok for r in results)
    for q in (0, 1):
        offs = sorted(r.queue_offset for r in results if r.queue_id == q)
        assert offs == list(range(len(offs)))
    assert len({r.commitlog_offset for r in results}) == 400
    assert s.check().ok


def test_stats(store):
    store.put_batch([Message("T", b"x") for _ in range(5)])
    st = store.stats()
    assert st["state"] == "running"
    assert st["commitlog_max_offset"] == store.commitlog_max_offset > 0
    assert st["topics"] == 1 and st["queues"] == 8
    assert st["write_refusal"] is None


# Bad numbers in a batch; reads around shutdown ----------------------------------------------

def test_an_out_of_range_field_in_a_batch_is_message_illegal_and_the_queue_stays_dense(stores):
    s = stores(memory_config(), FaultyFileIO())
    assert s.put(Message("T", b"a", queue_id=0)).ok
    rs = s.put_batch([Message("T", b"b", queue_id=0), Message("T", b"c", queue_id=0, flag=1 << 31)])
    assert rs[0].status is PutStatus.PUT_OK and rs[1].status is PutStatus.MESSAGE_ILLEGAL
    # the queue keeps working and its offsets stay dense
    r = s.put(Message("T", b"d", queue_id=0))
    assert r.ok and r.queue_offset == 2
    g = s.get("g", "T", 0, 0)
    assert g.status is GetStatus.FOUND and [m.body for m in g.messages] == [b"a", b"b", b"d"]


def test_a_float_queue_id_is_message_illegal(stores):
    s = stores(memory_config(topic_queues_default=2), FaultyFileIO())
    rs = s.put_batch([Message("T", b"a", queue_id=0), Message("T", b"b", queue_id=1.0)])
    assert rs[0].ok and rs[1].status is PutStatus.MESSAGE_ILLEGAL
    assert s.put(Message("T", b"c", queue_id=0)).queue_offset == 1


def test_a_get_racing_shutdown_answers_without_raising(tmp_path, monkeypatch):
    """Shutdown runs (to its end) while a reader is inside get(), holding a segment: segments,
    consume-queue handles and index files are closed only once no reader uses them."""
    s = MessageStore(memory_config(root_dir=str(tmp_path / "store")), fio=OsFileIO(), clock=ManualClock()).start()
    try:
        for i in range(5):
            assert s.put(Message("T", b"m%d" % i)).ok
        real = codec.decode_record
        fired = []

        def decode_then_shutdown(buf, pos, size=None):
            if not fired:                       # the reader holds the segment; another thread shuts down
                fired.append(1)
                t = threading.Thread(target=s.shutdown)
                t.start()
                t.join()
            return real(buf, pos, size)

        monkeypatch.setattr(codec, "decode_record", decode_then_shutdown)
        s.get("g", "T", 0, 0)
        assert fired == [1], "the shutdown ran while the get was reading"
    finally:
        s.shutdown()


def test_a_get_after_shutdown_neither_skips_nor_leaks(tmp_path):
    """A broker still draining after the store stopped: the answer tells no consumer to skip
    messages, and no descriptor is opened for it."""
    s = MessageStore(memory_config(root_dir=str(tmp_path / "store")), fio=OsFileIO(), clock=ManualClock()).start()
    try:
        for i in range(5):
            assert s.put(Message("T", b"m%d" % i)).ok
    finally:
        s.shutdown()
    fds = len(os.listdir("/proc/self/fd"))
    g = s.get("g", "T", 0, 0)
    leaked = len(os.listdir("/proc/self/fd")) - fds
    assert not (g.status is GetStatus.MESSAGE_WAS_REMOVING and g.next_offset > 0), \
        f"a stopped store tells the consumer to skip to {g.next_offset}: {g}"
    assert leaked == 0, f"{leaked} descriptor(s) opened by a get on a stopped store"


class _Replicas:
    """What the write path asks of a leader's followers (broker/replication/acks.ReplicaAcks)."""

    def __init__(self, sync: bool) -> None:
        self.sync = sync
        self.timeout_s = 60.0

    def refusal(self):
        return None

    def appended(self, end):
        pass

    def wait(self, end, timeout_s):
        return None


@pytest.mark.parametrize("flush, replicas, waits", [("SYNC_FLUSH", None, True), ("ASYNC_FLUSH", None, False),
                                                     ("ASYNC_FLUSH", False, False), ("ASYNC_FLUSH", True, True)])
def test_puts_may_wait_is_true_where_a_put_waits_for_the_disk_or_the_followers(stores, flush, replicas, waits):
    s = stores(memory_config(flush_disk_type=flush), FaultyFileIO())
    if replicas is not None:
        s.writer.replicas = _Replicas(sync=replicas)
    assert s.puts_may_wait is waits
    assert s.put(Message("T", b"x")).ok
