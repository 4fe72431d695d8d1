"""StoreWriter (the write path) on its own: built from a store's parts, its validators, the
Prepared message every path builds, and the typed reason of every non-OK PutResult the
store can produce."""

from __future__ import annotations

import errno
import os
import threading

import numpy as np
import pytest

from tidemq.io import DiskUsage, OsFileIO
from tidemq.record import codec
from tidemq.store import GetStatus, Message, MessageStore, PutReason, PutResult, PutStatus
from tidemq.store.commit_log import Prepared
from tidemq.store.put_lock import PutLock
from tidemq.store.types import PutResults
from tidemq.store.writer import StoreWriter
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.wait import wait_until
from ..support.store import slices, small_config


def writer_of(s: MessageStore, **kw) -> StoreWriter:
    """A StoreWriter built from a started store's parts (as MessageStore builds its own)."""
    parts = dict(config=s.config, topics=s.topics, queues=s.queues, commit_log=s.commit_log, segments=s.segments,
                 dispatcher=s.dispatcher, disk=s.disk, index=s.index, clock=s.clock,
                 put_lock=PutLock(s.dispatcher.dispatch_many),
                 group_commit=s.group_commit, archive=s.archive)
    parts.update(kw)
    return StoreWriter(**parts)


def bodies(s, topic, qid):
    return [m.body for m in s.get("G", topic, qid, 0, max_count=1000).messages]


# A writer built from the parts ---------------------------------------------------------------

def test_a_writer_built_from_the_parts_writes_what_the_store_reads(store):
    store.create_topic("T", 2)
    w = writer_of(store)
    rs = w.put_batch([Message("T", b"a", queue_id=0), Message("T", b"b", tags="x", queue_id=1)])
    assert [r.ok for r in rs] == [True, True] and all(r.reason is None and r.error is None for r in rs)
    rs2 = w.put_encoded("T", [(b"c", codec.encode_properties({"TAGS": "y"}))])
    assert rs2[0].ok
    d = store.put(Message("T", b"d", queue_id=rs2[0].queue_id))           # the store's writer follows on
    assert d.queue_offset == rs2[0].queue_offset + 1
    assert sorted(bodies(store, "T", 0) + bodies(store, "T", 1)) == [b"a", b"b", b"c", b"d"]


def test_prepared_is_a_named_tuple_in_the_order_the_append_unpacks():
    assert Prepared._fields == ("index", "body", "topic", "properties", "queue_id", "born_timestamp_ms", "born_host",
                                "flag", "sys_flag", "reconsume_times", "prepared_transaction_offset", "body_crc",
                                "tags_hash", "index_keys", "uniq_key", "tail_crc")
    assert issubclass(Prepared, tuple)


def test_every_path_builds_a_prepared_in_its_field_order(store, monkeypatch):
    """The write path builds plain tuples in Prepared's order: read back through the names."""
    store.create_topic("T", 2)
    batches = []
    real = store.commit_log.append_items
    monkeypatch.setattr(store.commit_log, "append_items",
                        lambda items: (batches.append(list(items.batch)), real(items))[1])
    store.put_batch([Message("T", b"fast", tags="ta", queue_id=1, born_timestamp_ms=5)])
    store.put_batch([Message("T", b"general", keys=["k"], properties={"UNIQ_KEY": "U", "p": "v"}, flag=3,
                             sys_flag=4, reconsume_times=6, prepared_transaction_offset=7, born_host="1.2.3.4:5")])
    store.put_encoded("T", [(b"encoded", codec.encode_properties({"UNIQ_KEY": "U2", "KEYS": "k2"}))])
    fast, general, encoded = (Prepared(*b[0]) for b in batches)
    t = store.topics.get("T")
    for p, body in ((fast, b"fast"), (general, b"general"), (encoded, b"encoded")):
        assert p.index == 0 and p.body == body and p.topic is t and p.body_crc == codec.body_crc(body)
        assert p.properties.endswith(codec.RECORD_CRC_TAIL) and len(p.born_host) == 8
        assert p.tail_crc == codec.tail_crc(t.name_bytes, p.properties)
    assert (fast.queue_id, fast.born_timestamp_ms, fast.tags_hash, fast.index_keys, fast.uniq_key) == \
        (1, 5, codec.tags_hash("ta"), None, None)
    assert (fast.flag, fast.sys_flag, fast.reconsume_times, fast.prepared_transaction_offset) == (0, 0, 0, 0)
    assert (general.flag, general.sys_flag, general.reconsume_times, general.prepared_transaction_offset,
            general.born_host, general.uniq_key, general.index_keys) == \
        (3, 4, 6, 7, codec.encode_host("1.2.3.4:5"), "U", ["T#k", "T#U"])
    assert (encoded.queue_id, encoded.uniq_key, encoded.index_keys, encoded.born_host) == \
        (None, "U2", ["T#k2", "T#U2"], store.writer.store_host)


def test_every_path_writes_every_field_where_it_belongs(store):
    """The fast path, the general path and put_encoded each build a Prepared: a field in the wrong
    place would show here as a wrong value read back."""
    store.create_topic("T", 4)
    fast = store.put_batch([Message("T", b"fast", tags="ta", queue_id=2, born_timestamp_ms=123)])[0]
    general = store.put_batch([Message("T", b"general", tags="tb", keys=["k1", "k2"], properties={"UNIQ_KEY": "U1",
                                       "p": "v"}, queue_id=3, flag=7, sys_flag=8, born_timestamp_ms=456,
                                       born_host="1.2.3.4:5", reconsume_times=9, prepared_transaction_offset=10)])[0]
    props = codec.encode_properties({"TAGS": "tc", "KEYS": "k3", "UNIQ_KEY": "U2"})
    enc = store.put_encoded("T", [(b"encoded", props)])[0]
    assert fast.ok and general.ok and enc.ok
    m = store.get_by_commitlog_offset(fast.commitlog_offset)
    assert (m.body, m.tags, m.queue_id, m.born_timestamp_ms, m.flag, m.sys_flag, m.reconsume_times,
            m.prepared_transaction_offset, m.store_host) == (b"fast", "ta", 2, 123, 0, 0, 0, 0, store.config.store_host)
    m = store.get_by_commitlog_offset(general.commitlog_offset)
    assert (m.body, m.tags, m.keys, m.msg_id, m.properties["p"], m.queue_id, m.born_timestamp_ms, m.born_host,
            m.flag, m.sys_flag, m.reconsume_times, m.prepared_transaction_offset) == \
        (b"general", "tb", ["k1", "k2"], "U1", "v", 3, 456, "1.2.3.4:5", 7, 8, 9, 10)
    assert general.uniq_key == "U1" and general.msg_id == "U1"
    m = store.get_by_commitlog_offset(enc.commitlog_offset)
    assert (m.body, m.tags, m.keys, m.msg_id) == (b"encoded", "tc", ["k3"], "U2")
    assert enc.uniq_key == "U2"
    # the tag hash codes went to the consume queues, the keys to the index
    assert [x.body for x in store.get("G", "T", 2, 0, tags=["ta"]).messages] == [b"fast"]
    assert [x.body for x in store.query_by_key("T", "k2")] == [b"general"]
    assert [x.body for x in store.query_by_key("T", "U2")] == [b"encoded"]
    assert store.check().ok


def test_put_slices_writes_every_field_where_it_belongs(store):
    """The SendRecords path: messages as slices of one buffer, each read back with its id as
    UNIQ_KEY, its tags (their hash in the consume queue), keys (in the index), user properties and
    the caller's extra properties; the skipped ones take no offset; round-robin over the queues."""
    store.create_topic("T", 2)
    data, fields = slices([b"U%d" % i for i in range(4)], [b"b%d" % i for i in range(4)],
                          tags=[b"ta", b"", b"tb", b"ta"], keys=[b"k1 k2", b"", b"", b"k3"],
                          properties=[b"", b"p\x01v\x02", b"", b""])
    skip = np.array([False, False, True, False])
    rs = store.put_slices("T", data, fields, b"X\x01Y\x02", skip)
    assert [r.size > 0 for r in rs] == [True, True, False, True] and all(r.ok for r in rs)   # (size 0: not put)
    assert [(r.queue_id, r.queue_offset) for i, r in enumerate(rs) if i != 2] == [(0, 0), (1, 0), (0, 1)]
    for i, want in ((0, {"TAGS": "ta", "KEYS": "k1 k2"}), (1, {"p": "v"}), (3, {"TAGS": "ta", "KEYS": "k3"})):
        m = store.get_by_commitlog_offset(rs[i].commitlog_offset)
        assert m.intact() and m.body == b"b%d" % i and m.msg_id == f"U{i}" and m.born_timestamp_ms == m.store_timestamp_ms
        assert {k: v for k, v in m.properties.items() if k != codec.RECORD_CRC_NAME} == \
            {"UNIQ_KEY": f"U{i}", "X": "Y", **want}
    assert [x.body for x in store.get("G", "T", 0, 0, tags=["ta"]).messages] == [b"b0", b"b3"]
    assert [x.body for x in store.query_by_key("T", "k2")] == [b"b0"]
    assert [x.body for x in store.query_by_key("T", "U3")] == [b"b3"]
    assert store.query_by_key("T", "U2") == []
    assert store.check().ok


def test_put_slices_refuses_what_the_other_paths_refuse(make_config, open_store):
    s = open_store(make_config(message_body_bytes_max=100, segment_size_bytes=64 * 1024))
    s.create_topic("T", 1)
    big = b"p\x01" + b"v" * 33_000 + b"\x02"
    data, fields = slices([b"a", b"b", b"c", b"d"], [b"x" * 101, b"x", b"ok", b"y"], properties=[b"", big, b"", b""])
    rs = s.put_slices("T", data, fields)
    assert [r.reason for r in rs] == [PutReason.BODY_TOO_LARGE, PutReason.PROPERTIES_TOO_LARGE, None, None]
    assert [r.queue_offset for r in rs[2:]] == [0, 1]
    assert refused(s.put_slices("bad topic!", data, fields)[0], PutReason.INVALID_TOPIC)


def test_put_slices_takes_born_fields_as_put_encoded_does(store):
    """``born`` (SendMessage's batches read from their bytes): every record's born time, born host and
    sys flag, the store's time and host without them; refused for the whole batch as put_encoded
    refuses the same (BAD_FIELD), nothing put."""
    store.create_topic("T", 1)
    data, fields = slices([b"U0", b"U1"], [b"b0", b"b1"])
    rs = store.put_slices("T", data, fields, b"", None, (1_600_000_000_000, "10.0.0.2:7", 1))
    for r in rs:
        m = store.get_by_commitlog_offset(r.commitlog_offset)
        assert m.intact() and (m.born_timestamp_ms, m.born_host, m.sys_flag) == (1_600_000_000_000, "10.0.0.2:7", 1)
    for born in ((None, "not a host", 0), (1, None, 2**31), (2**63, None, 0), ("1", None, 0)):
        got = store.put_slices("T", data, fields, b"", None, born)
        want = store.put_encoded("T", [(b"b0", b"UNIQ_KEY\x01U0\x02")] * 2, *born)
        assert [(r.status, r.reason, r.error) for r in got] == [(r.status, r.reason, r.error) for r in want]
        assert refused(got[0], PutReason.BAD_FIELD) and refused(got[1], PutReason.BAD_FIELD), born
    assert store.max_offset("T", 0) == 2


def test_put_slices_takes_the_largest_record_that_fits_and_no_larger(make_config, open_store):
    s = open_store(make_config(message_body_bytes_max=1 << 20, segment_size_bytes=64 * 1024))
    s.create_topic("T", 1)
    pl = len(b"UNIQ_KEY\x01i\x02") + codec.RECORD_CRC_TAIL_LEN
    room = s.commit_log.max_record_size - codec.record_size(0, 1, pl)
    rs = s.put_slices("T", *slices([b"i", b"i"], [b"y" * room, b"y" * (room + 1)]))
    assert rs[0].ok and refused(rs[1], PutReason.RECORD_TOO_LARGE)


def test_a_record_that_cannot_be_packed_is_refused_and_the_rest_of_the_batch_too(store):
    store.create_topic("T", 1)
    w = writer_of(store, put_lock=store._put_lock)
    t = store.topics.get("T")
    good = Prepared(*w.prepare(Message("T", b"ok"), 0, 1))
    bad = good._replace(index=1, flag="not a number")        # what no validator would let through
    after = good._replace(index=2)
    results = PutResults(3, 1, store.writer.store_host)
    w.append([good, bad, after], results, 1)
    assert results[0].ok
    assert [r.reason for r in results[1:]] == [PutReason.ENCODE_FAILED] * 2
    assert all(r.status is PutStatus.MESSAGE_ILLEGAL for r in results[1:])
    assert t.next_offsets[0] == 1 and store.put(Message("T", b"next")).queue_offset == 1


# The validators --------------------------------------------------------------------------------

def test_every_reason_has_one_status():
    for reason in PutReason:
        r = PutResult.refused(reason, "why")
        assert r.status is reason.status and r.reason is reason and r.error == "why" and not r.ok
        assert r.commitlog_offset == -1 and r.msg_id is None


# Every non-OK PutResult the store can produce, with its reason -----------------------------------

def refused(r: PutResult, reason: PutReason) -> bool:
    assert r.reason is reason, r
    assert r.status is reason.status and r.error, r
    return True


def test_invalid_message_reasons_on_every_path(make_config, open_store):
    s = open_store(make_config(message_body_bytes_max=100, segment_size_bytes=64 * 1024))
    s.create_topic("T", 2)
    big_props = codec.encode_properties({"p": "v" * 33_000})
    cases = [
        (Message("bad topic!", b"x"), PutReason.INVALID_TOPIC),
        (Message("T", "not bytes"), PutReason.BAD_BODY),
        (Message("T", b"x" * 101), PutReason.BODY_TOO_LARGE),                       # the fast path's message
        (Message("T", b"x" * 101, keys="k"), PutReason.BODY_TOO_LARGE),             # the general path's
        (Message("T", b"x", properties={"p": "v" * 33_000}), PutReason.PROPERTIES_TOO_LARGE),
        (Message("T", b"x", tags="t" * 33_000), PutReason.PROPERTIES_TOO_LARGE),
        (Message("T", b"x", queue_id=2), PutReason.BAD_QUEUE_ID),
        (Message("T", b"x", queue_id="0"), PutReason.BAD_QUEUE_ID),
        (Message("T", b"x", tags="a\x02"), PutReason.BAD_PROPERTY),
        (Message("T", b"x", keys=["has space"]), PutReason.BAD_PROPERTY),
        (Message("T", b"x", properties={"k\x01": "v"}), PutReason.BAD_PROPERTY),
        (Message("T", b"x", flag=1 << 40), PutReason.BAD_FIELD),
        (Message("T", b"x", born_timestamp_ms="soon"), PutReason.BAD_FIELD),
        (Message("T", b"x", born_host="nowhere"), PutReason.BAD_FIELD),
    ]
    rs = s.put_batch([m for m, _ in cases] + [Message("T", b"fine")])
    for r, (m, reason) in zip(rs, cases):
        assert refused(r, reason), m
    assert rs[-1].ok and rs[-1].queue_offset == 0          # the bad ones took no offset
    enc = s.put_encoded("T", [(b"x" * 101, b""), (b"x", big_props),
                              (bytearray(b"x"), b""), (b"ok", b"")])
    assert [r.reason for r in enc] == [PutReason.BODY_TOO_LARGE, PutReason.PROPERTIES_TOO_LARGE, PutReason.BAD_BODY,
                                       None]
    assert all(refused(r, r.reason) for r in enc[:3])
    assert refused(s.put_encoded("bad topic!", [(b"x", b"")])[0], PutReason.INVALID_TOPIC)
    # the invalid-topic text is codec.topic_problem's, wherever the name is checked
    assert rs[0].error == codec.topic_problem("bad topic!")
    with pytest.raises(ValueError, match=r"invalid topic name 'bad topic!': use 1-127 characters"):
        s.create_topic("bad topic!")


def test_record_too_large_for_a_segment(make_config, open_store):
    s = open_store(make_config(message_body_bytes_max=1 << 20, segment_size_bytes=64 * 1024))
    s.create_topic("T", 1)
    body = b"x" * (64 * 1024)
    assert refused(s.put(Message("T", body)), PutReason.RECORD_TOO_LARGE)
    assert refused(s.put(Message("T", body, keys="k")), PutReason.RECORD_TOO_LARGE)
    assert refused(s.put_encoded("T", [(body, b"")])[0], PutReason.RECORD_TOO_LARGE)
    # the largest record that fits is taken, by every path
    room = s.commit_log.max_record_size - codec.record_size(0, 1, codec.RECORD_CRC_TAIL_LEN)
    assert s.put(Message("T", b"y" * room)).ok
    assert s.put_encoded("T", [(b"z" * room, b"")])[0].ok
    assert refused(s.put_encoded("T", [(b"z" * (room + 1), b"")])[0], PutReason.RECORD_TOO_LARGE)


def test_topic_not_found_and_topic_create_failed(tmp_path):
    fio = FaultyFileIO()
    s = MessageStore(small_config("/s", auto_create_topics=False), fio=fio).start()
    try:
        assert refused(s.put(Message("Nope", b"x")), PutReason.TOPIC_NOT_FOUND)
        assert refused(s.put_encoded("Nope", [(b"x", b"")])[0], PutReason.TOPIC_NOT_FOUND)
    finally:
        s.shutdown()
    fio = FaultyFileIO()
    s = MessageStore(small_config("/s", auto_create_topics=True), fio=fio).start()
    try:
        fio.fail("open", errno.EIO, path_contains="topics.json", times=2)
        assert refused(s.put(Message("New", b"x")), PutReason.TOPIC_CREATE_FAILED)
        assert refused(s.put_encoded("New2", [(b"x", b"")])[0], PutReason.TOPIC_CREATE_FAILED)
        assert s.queue_count("New") == 0 and s.queue_count("New2") == 0, "a topic not saved is not created"
        assert s.put(Message("New", b"x")).ok, "created once the file can be written"
        assert s.dispatcher.error is None and bodies(s, "New", 0) + bodies(s, "New", 1) == [b"x"]
        fio.fail("open", errno.EIO, path_contains="topics.json", times=1)
        with pytest.raises(OSError):
            s.create_topic("New", 16)                       # growing it, not saved: not grown
        assert s.queue_count("New") == s.config.topic_queues_default
    finally:
        s.shutdown()


class FakeUsage(OsFileIO):
    """Real files; disk_usage reports ``percent`` used for every directory once set."""

    percent: float | None = None

    def disk_usage(self, path):
        if self.percent is None:
            return super().disk_usage(path)
        total = 100 << 30
        used = int(total * self.percent / 100)
        return DiskUsage(total, used, total - used)


def test_disk_full_and_archive_pending(make_config, open_store):
    fio = FakeUsage()
    s = open_store(make_config(segment_size_bytes=64 * 1024), fio=fio)
    fio.percent = 95
    s.check_disk()
    assert refused(s.put(Message("T", b"x")), PutReason.DISK_FULL)
    assert refused(s.put_batch([Message("T", b"x", keys="k")])[0], PutReason.DISK_FULL)
    assert refused(s.put_encoded("T", [(b"x", b"")])[0], PutReason.DISK_FULL)
    assert s.put_refusal()[0] is PutReason.DISK_FULL and s.write_refusal().startswith("disk full")
    fio.percent = 10
    s.check_disk()
    assert s.put(Message("T", b"x")).ok and s.put_refusal() is None

    fio2 = FakeUsage()
    a = open_store(make_config(root_dir=str(s.config.root_dir) + "-archive", segment_size_bytes=64 * 1024,
                               archive_before_delete=True), fio=fio2)
    while len(a.segments) < 2:                                  # one sealed segment, never archived
        assert a.put(Message("T", b"x" * 4000)).ok
    fio2.percent = 95
    a.check_disk()
    r = a.put(Message("T", b"x"))
    assert refused(r, PutReason.ARCHIVE_PENDING) and "tidemq archive" in r.error and r.error.startswith("disk full")


class NoRoom(OsFileIO):
    """Segments cannot be created once ``fail_errno`` is set (ENOSPC: a full disk; EIO: a broken one)."""

    fail_errno: int | None = None

    def allocate(self, handle, size):
        if self.fail_errno is not None:
            raise OSError(self.fail_errno, os.strerror(self.fail_errno))
        super().allocate(handle, size)


@pytest.mark.parametrize("err, reason", [(errno.ENOSPC, PutReason.DISK_FULL), (errno.EIO, PutReason.WRITE_ERROR)])
def test_a_segment_that_cannot_be_made(make_config, open_store, err, reason):
    fio = NoRoom()
    s = open_store(make_config(segment_size_bytes=64 * 1024), fio=fio)
    assert s.put(Message("T", b"first", queue_id=0)).ok
    fio.fail_errno = err
    rs = s.put_batch([Message("T", b"x" * 4000, queue_id=0) for _ in range(20)])    # must roll
    failed = [r for r in rs if not r.ok]
    assert failed and all(refused(r, reason) for r in failed)
    assert s.disk_status()["flags"]["segment_error"]
    fio.fail_errno = None
    if reason is PutReason.DISK_FULL:
        s.check_disk()
    assert s.put(Message("T", b"later", queue_id=0)).ok


def test_dispatch_error(tmp_path):
    fio = FaultyFileIO()
    s = MessageStore(small_config("/s", dispatch_write_retries_max=0), fio=fio).start()
    try:
        assert s.put(Message("T", b"a", queue_id=0)).ok
        fio.fail("pwrite", errno.EIO, path_contains="consumequeue", times=1)
        assert s.put(Message("T", b"b", queue_id=0)).ok          # in the log; its unit could not be written
        assert s.dispatcher.error is not None
        assert refused(s.put(Message("T", b"c", queue_id=0)), PutReason.DISPATCH_ERROR)
        assert refused(s.put_encoded("T", [(b"c", b"")])[0], PutReason.DISPATCH_ERROR)
        s.flush_queues()                                           # heals it
        assert s.put(Message("T", b"c", queue_id=0)).ok
        assert bodies(s, "T", 0) == [b"a", b"b", b"c"]
    finally:
        s.shutdown()


class GatedFsync(OsFileIO):
    """While ``armed``, an fsync for which ``gated()`` is true sets ``entered`` and waits for ``go``."""

    def __init__(self) -> None:
        self.armed = False
        self.gated = lambda: True
        self.entered = threading.Event()
        self.go = threading.Event()

    def fsync(self, handle) -> None:
        if self.armed and self.gated():
            self.entered.set()
            assert self.go.wait(120), "the test never released the fsync"
        super().fsync(handle)


def test_flush_timeout(make_config, open_store):
    fio = GatedFsync()
    s = open_store(make_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=1), fio=fio)
    s.create_topic("T", 1)
    test_thread = threading.current_thread()
    fio.gated = lambda: threading.current_thread() is not test_thread    # the group commit's fsync waits
    fio.armed = True
    try:
        r = s.put(Message("T", b"x"))        # the fsync cannot finish before the test lets it
    finally:
        fio.armed = False
        fio.go.set()
    assert refused(r, PutReason.FLUSH_TIMEOUT) and r.status is PutStatus.FLUSH_DISK_TIMEOUT
    assert r.commitlog_offset >= 0 and r.queue_offset == 0, "appended, only not durable in time"
    wait_until(lambda: s.commit_log.flushed_offset >= r.commitlog_offset + r.size, "the fsync to end")
    assert s.get("G", "T", r.queue_id, 0).status is GetStatus.FOUND      # readable once durable


def test_shutting_down(make_config):
    fio = GatedFsync()
    s = MessageStore(make_config(), fio=fio).start()
    assert s.put(Message("T", b"x")).ok
    fio.armed = True
    stopper = threading.Thread(target=s.shutdown)
    fio.gated = lambda: threading.current_thread() is stopper          # only shutdown's own fsyncs wait
    stopper.start()
    try:
        assert fio.entered.wait(120), "shutdown never reached its flush"
        assert refused(s.put(Message("T", b"y")), PutReason.SHUTTING_DOWN)
        assert refused(s.put_encoded("T", [(b"y", b"")])[0], PutReason.SHUTTING_DOWN)
        assert s.put_refusal()[0] is PutReason.SHUTTING_DOWN
    finally:
        fio.armed = False
        fio.go.set()
        stopper.join(120)
    assert refused(s.put(Message("T", b"z")), PutReason.NOT_RUNNING)
