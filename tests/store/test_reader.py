"""StoreReader (the read path) on its own, and how MessageStore answers reads when it is not running."""

import threading

from tidemq.io import OsFileIO
from tidemq.record import codec
from tidemq.store import GetStatus, Message, MessageStore
from tidemq.store.reader import StoreReader
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import MEMORY_ROOT, memory_config
from ..support.wait import PATIENCE_S, patience, wait_until


def test_a_reader_built_from_the_parts_reads_what_the_store_reads(store):
    rs = store.put_batch([Message("T", b"m%d" % i, tags="a" if i % 2 else "b", keys=f"k{i}", queue_id=0)
                          for i in range(6)])
    running = [True]
    r = StoreReader(store.config, store.segments, store.commit_log, store.queues, store.topics, store.index,
                    1 << 30, lambda: running[0])
    assert [m.body for m in r.get("G", "T", 0, 0, tags=["a"]).messages] == [b"m1", b"m3", b"m5"]
    sizes, data = r.get_raw("T", 0, 2, max_count=2).records
    assert list(sizes) == [rs[2].size, rs[3].size] and len(data) == sum(sizes)
    assert r.get_by_commitlog_offset(rs[4].commitlog_offset).body == b"m4"
    assert [m.body for m in r.query_by_key("T", "k5")] == [b"m5"]
    assert r.offset_for_timestamp("T", 0, 0) == 0
    running[0] = False
    assert r.get("G", "T", 0, 0).status is GetStatus.SERVICE_NOT_AVAILABLE


def test_reads_before_start_and_after_shutdown_answer_service_not_available(make_config):
    s = MessageStore(make_config())
    assert s.get("G", "T", 0, 3).status is GetStatus.SERVICE_NOT_AVAILABLE
    assert s.get_raw("T", 0, 3).status is GetStatus.SERVICE_NOT_AVAILABLE
    s.start()
    s.put(Message("T", b"x", queue_id=0))
    s.shutdown()
    g = s.get_raw("T", 0, 0)
    assert g.status is GetStatus.SERVICE_NOT_AVAILABLE and g.next_offset == 0


def _records(g):
    from tidemq.record import codec
    sizes, data = g.records
    out, pos = [], 0
    for size in sizes:
        out.append(codec.decode_record(data, pos, int(size)))
        pos += int(size)
    return out


def test_get_raw_reads_a_queue_scattered_in_the_log_across_segments(make_config, open_store):
    s = open_store(make_config(segment_size_bytes=8192))
    bodies = {q: [] for q in range(3)}
    for i in range(300):                                   # three queues interleaved: no two records of a queue adjacent
        body = b"q%d-%04d" % (i % 3, i) + b"." * (i % 50)
        s.put(Message("T", body, queue_id=i % 3))
        bodies[i % 3].append(body)
    assert len(s.segments.segments) > 5
    for q in range(3):
        got, at, answers = [], 0, 0
        while at < 100:
            g = s.get_raw("T", q, at, max_count=64)
            assert g.status is GetStatus.FOUND
            msgs = _records(g)
            assert [m.queue_offset for m in msgs] == list(range(at, at + len(msgs)))   # in order, none skipped
            got += [m.body for m in msgs]
            at = g.next_offset
            answers += 1
        assert got == bodies[q] and answers > 2            # one segment per answer
    assert s.get_raw("T", 0, 100).status is GetStatus.OFFSET_OVERFLOW_ONE


def test_get_raw_bounds_bytes_but_always_gives_one_record(store):
    store.put_batch([Message("T", b"x" * 1000, queue_id=0) for _ in range(10)])
    g = store.get_raw("T", 0, 0, max_bytes=3000)
    assert len(g.records[0]) == 2 and g.next_offset == 2
    g = store.get_raw("T", 0, 5, max_bytes=10)
    assert len(g.records[0]) == 1 and g.next_offset == 6


def test_get_raw_skips_what_cleanup_removed(make_config, open_store):
    s = open_store(make_config(segment_size_bytes=8192, file_reserved_time_hours=0, delete_when="",
                               delete_commit_log_files_interval_ms=0))
    s.put_batch([Message("T", b"y" * 500, queue_id=0) for _ in range(60)])
    s.trigger_delete_expired()
    s.clean()
    mn = s.min_offset("T", 0)
    assert mn > 0
    g = s.get_raw("T", 0, 0)
    assert g.status is GetStatus.OFFSET_TOO_SMALL and g.next_offset == mn
    g = s.get_raw("T", 0, mn)
    assert g.status is GetStatus.FOUND and _records(g)[0].queue_offset == mn


def test_get_over_a_kept_corrupt_record_answers_a_status(stores):
    """A record recovery kept although invalid (corruption below the durable offset): a get from
    before it answers with the messages around it, never a CodecError."""
    cfg = memory_config()
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    rs = [s.put(Message("T", b"m%02d" % i + b"x" * 200)) for i in range(30)]
    s.shutdown()
    fio.files[MEMORY_ROOT + "/commitlog/" + "0" * 20].data[rs[10].commitlog_offset + 4] ^= 0xFF   # MAGIC bit rot
    s = stores(cfg, fio)
    assert s.recovery.problems                   # kept and reported, as designed
    g = s.get("g", "T", 0, 0, max_count=32)
    assert len(g.messages) >= 10


def test_two_requested_tags_with_the_same_hash_are_both_served(stores):
    assert codec.tags_hash("Aa") == codec.tags_hash("BB")
    s = stores(memory_config(), FaultyFileIO())
    s.put(Message("T", b"1", tags="Aa"))
    s.put(Message("T", b"2", tags="BB"))
    g = s.get("g", "T", 0, 0, tags=["Aa", "BB"])
    assert [m.body for m in g.messages] == [b"1", b"2"]


# Damaged records are never served (issue 12) ------------------------------------------------

def _damaged_store(stores, where: int, n: int = 30, victims=(10,)):
    """A stopped store of ``n`` messages (one queue) whose records ``victims`` have one byte
    flipped ``where`` bytes into the record (88+: the body; 20: QUEUEOFFSET; -15: properties)."""
    cfg = memory_config()
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    rs = s.put_batch([Message("T", b"m%02d" % i + b"x" * 200, tags="a") for i in range(n)])
    s.shutdown()
    seg = fio.files[MEMORY_ROOT + "/commitlog/" + "0" * 20].data
    for v in victims:
        at = rs[v].commitlog_offset + (where if where >= 0 else rs[v].size + where)
        seg[at] ^= 0x01
    return stores(cfg, fio), rs


def test_get_skips_a_damaged_record_counts_it_and_serves_the_rest(stores, caplog):
    for where in (100, 20, -15):                        # body, header, properties
        s, rs = _damaged_store(stores, where)
        got, off = [], 0
        while off < s.max_offset("T", 0):
            g = s.get("g", "T", 0, off, max_count=4)
            assert g.next_offset > off
            got += [m.body[:3] for m in g.messages]
            off = g.next_offset
        assert got == [b"m%02d" % i for i in range(30) if i != 10], where
        assert s.stats()["records_damaged"] == 1
        assert s.get_by_commitlog_offset(rs[10].commitlog_offset) is None
        assert s.get_by_commitlog_offset(rs[11].commitlog_offset).body[:3] == b"m11"
        only = s.get("g", "T", 0, 10, max_count=1)
        assert only.status is GetStatus.MESSAGE_DAMAGED and only.next_offset == 11 and not only.messages
        s.shutdown()


def test_get_raw_never_returns_a_record_that_fails_its_crc(stores):
    s, rs = _damaged_store(stores, 150, victims=(3, 4, 17))
    got, off = [], 0
    while off < 30:
        g = s.get_raw("T", 0, off, max_count=5)
        assert g.next_offset > off
        if g.status is GetStatus.FOUND:
            msgs = _records(g)
            assert all(m.intact() for m in msgs)
            got += [m.queue_offset for m in msgs]
        else:
            assert g.status is GetStatus.MESSAGE_DAMAGED and g.records is None
        off = g.next_offset
    assert got == [i for i in range(30) if i not in (3, 4, 17)]
    assert s.stats()["records_damaged"] == 3
    g = s.get_raw("T", 0, 3, max_count=2)
    assert g.status is GetStatus.MESSAGE_DAMAGED and g.next_offset == 5



def test_get_raw_lays_the_records_out_once_after_the_room(stores):
    """The frame: the room (zero, or the header ``head`` answers, written as the frame is made), the
    sizes, the records (what ``records`` are views of); with a damaged record among them, the frame
    holds the others only (and the header is for them)."""
    import zlib
    for victims in ((), (4,)):
        s, rs = _damaged_store(stores, 150, n=12, victims=victims)
        g = s.get_raw("T", 0, 2, max_count=6, room=64)
        frame, room, headed = g.frame
        assert headed is False
        asked = []
        h = s.get_raw("T", 0, 2, max_count=6, room=64,
                      head=lambda *a: asked.append(a) or b"H" * 10)
        assert h.frame[2] is True and bytes(h.frame[0][:10]) == b"H" * 10 and bytes(h.frame[0][10:64]) == bytes(54)
        (nxt, lo, hi, count, crc), = asked
        assert (nxt, count) == (h.next_offset, len(h.records[0])) and crc == zlib.crc32(bytes(h.frame[0][64:]))
        sizes, data = g.records
        n = len(sizes)
        assert room == 64 and bytes(frame[:room]) == bytes(room) and n == 6 - len(victims)
        assert bytes(frame[room:room + 4 * n]) == sizes.astype("<i4").tobytes()
        assert bytes(frame[room + 4 * n:]) == bytes(data) and len(data) == sum(sizes)
        assert [m.queue_offset for m in _records(g)] == [i for i in range(2, 8) if i not in victims]
        s.shutdown()


# What readers may be served: MessageStore.readable_end (issue 27.2) ----------------------------

class HeldFsyncs(OsFileIO):
    """The real file system, whose commit-log fsyncs wait for ``gate`` while ``held`` (``entered``:
    one is waiting)."""

    def __init__(self) -> None:
        self.paths: dict = {}
        self.held = False
        self.gate = threading.Event()
        self.entered = threading.Event()

    def open(self, path, create=False, readonly=False):
        h = super().open(path, create, readonly)
        self.paths[h] = path
        return h

    def fsync(self, handle) -> None:
        if self.held and "commitlog" in self.paths.get(handle, ""):
            self.entered.set()
            assert self.gate.wait(2 * PATIENCE_S), "the test never let the fsync end"
        super().fsync(handle)


def test_under_sync_flush_nothing_is_served_before_its_fsync_ended(make_config, open_store):
    """The reproduction of issue 27 without time: a put whose fsync is held is in the log and its
    queue, and no read serves it (get, get_raw, by offset, by key; the max offset consumers see does
    not count it) until the fsync ended; a long poll waiting for it is called once it is readable."""
    fio = HeldFsyncs()
    s = open_store(make_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=600_000), fio=fio)
    first = s.put(Message("T", b"first", keys="k0", queue_id=0))
    assert first.ok and s.readable_end() == s.commitlog_max_offset
    assert s.notify_readable(lambda: None) is False, "nothing to wait for"
    fio.held = True
    got: list = []
    putter = threading.Thread(target=lambda: got.append(s.put(Message("T", b"held", keys="k1", queue_id=0))))
    putter.start()
    try:
        assert fio.entered.wait(patience())
        wait_until(lambda: s.max_offset("T", 0) == 2, "the record to be appended and dispatched")
        end = s.commitlog_max_offset
        assert s.readable_end() == first.commitlog_offset + first.size < end
        assert s.readable_max_offset("T", 0) == 1
        g = s.get("G", "T", 0, 0, max_count=8)
        assert [m.body for m in g.messages] == [b"first"] and g.max_offset == 1 and g.next_offset == 1
        g = s.get("G", "T", 0, 1)
        assert g.status is GetStatus.OFFSET_OVERFLOW_ONE and g.next_offset == 1, "not there yet: a long poll waits"
        assert s.get("G", "T", 0, 2).status is GetStatus.OFFSET_OVERFLOW_ONE          # the queue's own end
        assert s.get("G", "T", 0, 3).status is GetStatus.OFFSET_OVERFLOW_BADLY
        raw = s.get_raw("T", 0, 0)
        assert len(raw.records[0]) == 1 and raw.max_offset == 1
        assert s.get_raw("T", 0, 1).status is GetStatus.OFFSET_OVERFLOW_ONE
        assert s.get_by_commitlog_offset(first.commitlog_offset + first.size) is None
        assert s.query_by_key("T", "k1") == [] and [m.body for m in s.query_by_key("T", "k0")] == [b"first"]
        woken = threading.Event()
        assert s.notify_readable(woken.set) is True and not woken.is_set()
    finally:
        fio.held = False
        fio.gate.set()
    putter.join(patience())
    assert got[0].ok
    assert woken.wait(patience()), "the waiter is called once the record is readable"
    assert [m.body for m in s.get("G", "T", 0, 0).messages] == [b"first", b"held"]
    assert s.readable_max_offset("T", 0) == 2 and [m.body for m in s.query_by_key("T", "k1")] == [b"held"]


def test_under_async_flush_readers_see_the_log_to_its_end(stores):
    """ASYNC_FLUSH keeps today's behaviour: what a crash can take back is served (the mode promises
    only what was flushed)."""
    s = stores(memory_config(), FaultyFileIO())
    r = s.put(Message("T", b"x"))
    assert s.commit_log.flushed_offset < r.commitlog_offset + r.size == s.readable_end()
    assert [m.body for m in s.get("G", "T", 0, 0).messages] == [b"x"]


def test_a_commit_limit_bounds_every_read_and_its_moves_wake_the_waiters(stores):
    """set_commit_limit (SYNC replication's high watermark), with a plain function."""
    s = stores(memory_config(), FaultyFileIO())
    rs = s.put_batch([Message("T", b"m%d" % i) for i in range(4)])
    ends = [r.commitlog_offset + r.size for r in rs]
    limit = [ends[1]]
    s.set_commit_limit(lambda: limit[0])
    assert s.readable_end() == ends[1] and s.readable_max_offset("T", 0) == 2 and s.max_offset("T", 0) == 4
    assert [m.body for m in s.get("G", "T", 0, 0).messages] == [b"m0", b"m1"]
    assert s.get("G", "T", 0, 2).status is GetStatus.OFFSET_OVERFLOW_ONE
    assert [len(s.get_raw("T", 0, 0).records[0])] == [2]
    calls: list = []
    assert s.notify_readable(lambda: calls.append(1)) is True
    s.readable_advanced()
    assert calls == [], "the limit did not move"
    limit[0] = ends[3]
    s.readable_advanced()
    assert calls == [1]
    s.readable_advanced()
    assert calls == [1], "once"
    assert [m.body for m in s.get("G", "T", 0, 0).messages] == [b"m0", b"m1", b"m2", b"m3"]
    s.set_commit_limit(None)
    assert s.readable_end() == s.commitlog_max_offset


def test_readable_max_finds_the_readable_end_of_a_long_unreadable_tail(stores):
    """More unreadable units than one step of the backward search, and a hole among them."""
    s = stores(memory_config(segment_size_bytes=256 * 1024), FaultyFileIO())
    rs = s.put_batch([Message("T", b"m%d" % i) for i in range(600)])
    ends = [r.commitlog_offset + r.size for r in rs]
    for k in (0, 1, 255, 256, 257, 299, 598, 599):
        s.set_commit_limit(lambda k=k: ends[k])
        assert s.readable_max_offset("T", 0) == k + 1
        g = s.get("G", "T", 0, k)
        assert [m.body for m in g.messages] == [b"m%d" % k] and g.max_offset == k + 1
    s.set_commit_limit(lambda: ends[0] - 1)
    assert s.readable_max_offset("T", 0) == 0


def test_a_queue_unit_pointing_at_a_record_of_another_queue_is_never_served(store):
    """Consume-queue units carry no CRC: a damaged one can point at an intact record of another topic,
    queue or queue offset (its own CRCs pass). Every read checks the record is the one the unit stands
    for (topic, queue, queue offset); one that is not is never served (a reader of topic A would be
    handed a message of B, which its user may not read): the record the unit stands for is found in
    the log and served in its place (unit_repair.py), or, when the log does not hold it, skipped and
    counted as damage (test_unit_repair.py)."""
    import os

    from tidemq.layout import list_segments, queue_dir
    from tidemq.store.consume_queue import UNIT
    a = store.put_batch([Message("A", b"a%d" % i, queue_id=0) for i in range(3)])
    b = store.put_batch([Message("B", b"b%d" % i, queue_id=0) for i in range(3)])
    store.put_batch([Message("A", b"c%d" % i, queue_id=1) for i in range(3)])

    qdir = queue_dir(os.path.join(store.config.root_dir, "consumequeue"), "A", 0)
    [(_, path)] = list_segments(OsFileIO(), qdir)
    a1 = store.get_raw("A", 1, 1, max_count=1)
    a1_off = int(_records(a1)[0].commitlog_offset)
    for unit, (off, size) in ((0, (b[0].commitlog_offset, b[0].size)),    # B/0 at the same queue offset
                              (1, (a1_off, int(a1.records[0][0]))),        # A/1 at the same queue offset
                              (2, (a[0].commitlog_offset, a[0].size))):    # A/0 itself, at another offset
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, UNIT.pack(off, size, 0), unit * UNIT.size)
        finally:
            os.close(fd)
    g = store.get("G", "A", 0, 0, max_count=8)
    assert [(m.topic, m.queue_id, m.body) for m in g.messages] == [("A", 0, b"a%d" % i) for i in range(3)]
    g = store.get_raw("A", 0, 0, max_count=8)
    assert [(m.topic, m.queue_id, m.body) for m in _records(g)] == [("A", 0, b"a%d" % i) for i in range(3)]
    assert store.reader.repair.found_again == 3


def test_a_stranger_among_a_queues_records_is_left_out_and_the_rest_served(store):
    """A damaged unit in the middle of a batch pointing at another topic's intact record, its own
    record damaged too (nothing to find again: unit_repair.py): the stranger is skipped and counted,
    the records around it are served in order by get and get_raw, and get_raw's frame is made again
    without it (its header, its CRC cover only what is served)."""
    import os

    from tidemq.layout import list_segments, queue_dir
    from tidemq.store.consume_queue import UNIT
    a = store.put_batch([Message("A", b"a%d" % i, queue_id=0) for i in range(5)])
    b = store.put_batch([Message("B", b"b0", queue_id=0)])
    [(_, path)] = list_segments(OsFileIO(), queue_dir(os.path.join(store.config.root_dir, "consumequeue"), "A", 0))
    [(_, log)] = list_segments(OsFileIO(), os.path.join(store.config.root_dir, "commitlog"))
    for name, at, data in ((path, 2 * UNIT.size, UNIT.pack(b[0].commitlog_offset, b[0].size, 0)),
                           (log, a[2].commitlog_offset + 90, b"\xff")):       # a2's body: its CRC fails
        fd = os.open(name, os.O_WRONLY)
        try:
            os.pwrite(fd, data, at)
        finally:
            os.close(fd)
    before = store.stats()["records_damaged"]
    g = store.get("G", "A", 0, 0, max_count=8)
    assert g.status is GetStatus.FOUND and g.next_offset == 5
    assert [(m.body, m.queue_offset) for m in g.messages] == [(b"a0", 0), (b"a1", 1), (b"a3", 3), (b"a4", 4)]
    g = store.get_raw("A", 0, 0, max_count=8, room=256, head=lambda *a: b"H")
    assert g.status is GetStatus.FOUND and g.next_offset == 5
    assert [(m.body, m.topic, m.queue_offset) for m in _records(g)] == \
        [(b"a0", "A", 0), (b"a1", "A", 1), (b"a3", "A", 3), (b"a4", "A", 4)]
    frame, room, headed = g.frame
    assert headed and frame[:1] == b"H" and len(frame) == room + 4 * 4 + sum(int(s) for s in g.records[0])
    assert store.stats()["records_damaged"] == before + 2
