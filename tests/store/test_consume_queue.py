"""Consume queues: 20-byte units in files of consume_queue_units_per_segment units,
bounded open file handles, truncation, reads across files."""

from __future__ import annotations

import errno
import os
import struct

import pytest

from tidemq.io import OsFileIO
from tidemq.record.codec import tags_hash
from tidemq.store import GetStatus, Message, StoreError
from tidemq.store.consume_queue import UNIT, UNIT_SIZE, ConsumeQueue, HandleCache
from tidemq.store.mapped_file import segment_name
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.fds import fd_count
from ..support.store import NothingUnsyncedSurvives, memory_config

UNITS = 16


def units(start: int, n: int) -> bytes:
    return b"".join(UNIT.pack(1000 * i, 100 + i, i - 7) for i in range(start, start + n))


@pytest.fixture
def cache():
    c = HandleCache(OsFileIO(), 8)
    yield c
    c.close_all()


@pytest.fixture
def cq(tmp_path, cache):
    q = ConsumeQueue(OsFileIO(), str(tmp_path / "consumequeue"), "T", 3, UNITS, cache)
    yield q
    q.close()


def test_unit_is_20_bytes_big_endian():
    assert UNIT_SIZE == UNIT.size == 20
    assert UNIT.pack(1, 2, -3) == struct.pack(">q", 1) + struct.pack(">i", 2) + struct.pack(">q", -3)


def test_files_are_named_by_byte_offset_under_topic_and_queue(cq, tmp_path):
    cq.append(0, units(0, 40))
    d = tmp_path / "consumequeue" / "T" / "3"
    assert cq.dir == str(d)
    names = sorted(os.listdir(d))
    assert names == [segment_name(0), segment_name(UNITS * 20), segment_name(2 * UNITS * 20)]
    assert names[1] == "00000000000000000320"
    sizes = [os.path.getsize(d / n) for n in names]
    assert sizes == [UNITS * 20, UNITS * 20, 8 * 20]
    assert cq.max_offset == 40 and cq.min_offset == 0
    assert cq.file_starts() == [0, 16, 32]
    with open(d / names[1], "rb") as f:
        first = f.read(20)
    assert UNIT.unpack(first) == (16000, 116, 9)


def test_append_must_continue_at_max_offset(cq):
    cq.append(0, units(0, 3))
    with pytest.raises(ValueError):
        cq.append(5, units(5, 1))
    with pytest.raises(ValueError):
        cq.append(2, units(2, 1))
    cq.append(3, units(3, 1))
    assert cq.max_offset == 4


def test_read_across_files(cq):
    cq.append(0, units(0, 50))
    assert cq.read(10, 20) == units(10, 20)           # crosses the file at 16
    assert cq.read(0, 50) == units(0, 50)             # crosses two
    assert cq.read(45, 100) == units(45, 5)           # capped at max_offset
    assert cq.read(50, 1) == b""
    assert cq.read(15, 1) == units(15, 1)
    assert cq.read(16, 1) == units(16, 1)
    assert cq.last_unit() == UNIT.unpack(units(49, 1))


def test_load_finds_files_and_max_offset(tmp_path, cache):
    root = str(tmp_path / "consumequeue")
    a = ConsumeQueue(OsFileIO(), root, "T", 0, UNITS, cache)
    a.append(0, units(0, 37))
    a.close()
    b = ConsumeQueue(OsFileIO(), root, "T", 0, UNITS, cache)
    b.load()
    assert b.file_starts() == [0, 16, 32]
    assert b.max_offset == 37 and b.min_offset == 0
    assert b.read(0, 37) == units(0, 37)
    b.append(37, units(37, 1))
    assert b.read(36, 2) == units(36, 2)


def test_load_ignores_a_partial_unit(tmp_path, cache):
    root = str(tmp_path / "consumequeue")
    a = ConsumeQueue(OsFileIO(), root, "T", 0, UNITS, cache)
    a.append(0, units(0, 5))
    a.close()
    with open(os.path.join(a.dir, segment_name(0)), "ab") as f:
        f.write(b"\x01" * 7)                 # a torn unit at the end
    b = ConsumeQueue(OsFileIO(), root, "T", 0, UNITS, cache)
    b.load()
    assert b.max_offset == 5


@pytest.mark.parametrize("cut", [0, 1, 15, 16, 17, 31, 32, 33, 39])
def test_truncate(cq, cut):
    cq.append(0, units(0, 40))
    cq.truncate(cut)
    assert cq.max_offset == cut
    assert cq.read(0, 100) == units(0, cut)
    files_needed = (cut + UNITS - 1) // UNITS
    assert cq.file_starts() == [i * UNITS for i in range(files_needed)]
    assert sorted(os.listdir(cq.dir)) == [segment_name(i * UNITS * 20) for i in range(files_needed)]
    if cut % UNITS:
        assert os.path.getsize(os.path.join(cq.dir, segment_name((cut // UNITS) * UNITS * 20))) == (cut % UNITS) * 20
    # appending goes on from the cut, with different units
    cq.append(cut, units(cut + 1000, 5))
    assert cq.read(cut, 5) == units(cut + 1000, 5)
    assert cq.max_offset == cut + 5


def test_truncate_beyond_max_changes_nothing(cq):
    cq.append(0, units(0, 10))
    cq.truncate(10)
    cq.truncate(99)
    assert cq.max_offset == 10 and cq.read(0, 10) == units(0, 10)


def test_delete_head_file_moves_min_offset(cq):
    cq.append(0, units(0, 40))
    cq.delete_file(0)
    assert cq.min_offset == UNITS
    assert cq.file_starts() == [16, 32]
    assert not os.path.exists(os.path.join(cq.dir, segment_name(0)))
    assert cq.read(0, 4) == b""
    assert cq.read(UNITS, 4) == units(UNITS, 4)


def test_put_unit_checked(cq):
    assert cq.put_unit_checked(0, 10, 5, 1) == "appended"
    assert cq.put_unit_checked(0, 10, 5, 1) == "skip"
    assert cq.put_unit_checked(0, 11, 5, 1) == "fixed"
    assert cq.read(0, 1) == UNIT.pack(11, 5, 1)
    assert cq.put_unit_checked(5, 99, 5, 1) == "gap"
    assert cq.max_offset == 1


def test_handle_cache_is_bounded(tmp_path):
    fio = OsFileIO()
    c = HandleCache(fio, 8)
    before = fd_count(tmp_path)
    try:
        for i in range(50):
            with c.use(str(tmp_path / f"f{i}"), create=True) as h:
                fio.pwrite(h, b"x", 0)
            assert fd_count(tmp_path) - before <= 8
        # a handle in use is never closed under its user
        with c.use(str(tmp_path / "f0")) as h0:
            for i in range(1, 30):
                with c.use(str(tmp_path / f"f{i}")):
                    pass
            assert fio.pread(h0, 1, 0) == b"x"
    finally:
        c.close_all()
    assert fd_count(tmp_path) == before


def test_the_last_file_written_keeps_its_handle_for_the_next_writes(tmp_path):
    """Writes to a queue's last file go through a handle it keeps (pinned: never closed under it,
    at most half the cache); a file deleted or cut meanwhile makes the next write go the long way
    and land where it belongs; closing gives every handle back."""
    fio = OsFileIO()
    c = HandleCache(fio, 4)
    before = fd_count(tmp_path)
    qs = [ConsumeQueue(fio, str(tmp_path / "cq"), "T", q, UNITS, c) for q in range(3)]
    try:
        for q in qs:
            q.append(0, units(0, 5))
        assert c.pinned == 2 and qs[0]._tail is not None and qs[2]._tail is None      # half of 4
        for k in range(20):                                  # the other handles come and go
            with c.use(str(tmp_path / f"other{k}"), create=True):
                pass
        qs[0].append(5, units(5, 3))                         # through the kept handle
        qs[2].append(5, units(5, 3))                         # the long way
        assert [q.read(0, 8) for q in (qs[0], qs[2])] == [units(0, 8)] * 2
        qs[0].truncate(6)                                    # the tail's file cut
        qs[0].append(6, units(60, 2))
        assert qs[0].read(0, 8) == units(0, 6) + units(60, 2)
        qs[1].append(5, units(5, UNITS))                     # across into a new file: its handle kept now
        assert qs[1]._tail[0] == UNITS and qs[1].read(0, 5 + UNITS) == units(0, 5 + UNITS)
        qs[1].truncate(0)                                    # every file gone: the kept handle is not used
        qs[1].append(0, units(7, 2))
        assert qs[1].read(0, 2) == units(7, 2) and qs[1].file_starts() == [0]
    finally:
        for q in qs:
            q.close()
        c.close_all()
    assert c.pinned == 0 and fd_count(tmp_path) == before


# Through the store ------------------------------------------------------------------

def test_store_writes_units_with_offset_size_and_tags_hash(make_config, open_store):
    s = open_store(make_config(consume_queue_units_per_segment=UNITS))
    rs = s.put_batch([Message("T", b"m%d" % i, tags="TagA" if i % 2 else "TagB", queue_id=1) for i in range(40)])
    cq = s.queues.get("T", 1)
    raw = cq.read(0, 40)
    assert len(raw) == 40 * 20
    for r, (off, size, th) in zip(rs, UNIT.iter_unpack(raw)):
        assert off == r.commitlog_offset
        assert size == r.size
        assert th == tags_hash("TagA" if r.queue_offset % 2 else "TagB")
    d = os.path.join(make_config().consumequeue_path, "T", "1")
    assert sorted(os.listdir(d)) == [segment_name(0), segment_name(320), segment_name(640)]


def test_store_get_reads_across_consume_queue_files(make_config, open_store):
    s = open_store(make_config(consume_queue_units_per_segment=UNITS))
    s.put_batch([Message("T", b"m%d" % i, queue_id=0) for i in range(100)])
    g = s.get("G", "T", 0, 10, max_count=32)
    assert g.status is GetStatus.FOUND
    assert [m.body for m in g.messages] == [b"m%d" % i for i in range(10, 42)]
    assert g.next_offset == 42
    assert g.min_offset == 0 and g.max_offset == 100


def test_store_consume_queues_survive_restart(make_config, open_store):
    cfg = make_config(consume_queue_units_per_segment=UNITS)
    s = open_store(cfg)
    s.put_batch([Message("T", b"m%d" % i, queue_id=i % 2) for i in range(41)])
    s.shutdown()
    s2 = open_store(cfg)
    assert s2.max_offset("T", 0) == 21 and s2.max_offset("T", 1) == 20
    g = s2.get("G", "T", 0, 15, max_count=5)
    assert [m.body for m in g.messages] == [b"m%d" % (2 * i) for i in range(15, 20)]


QUEUES = 10_000
OPEN_MAX = 64


def test_ten_thousand_queues_with_bounded_open_files(make_config, open_store, nosync_fio):
    """10,000 queues written and read back; consume-queue handles stay within
    consume_queue_open_files_max (fsync off: durability is not the subject here)."""
    cfg = make_config(consume_queue_open_files_max=OPEN_MAX, segment_size_bytes=1024 * 1024, topic_queues_max=QUEUES,
                      index_enabled=False, flush_consume_queue_interval_ms=60_000,
                      checkpoint_interval_ms=60_000)
    before = fd_count()
    s = open_store(cfg, fio=nosync_fio)
    base = fd_count()
    assert base - before < 20
    s.create_topic("Many", QUEUES)
    peak = 0
    for chunk in range(0, QUEUES, 1000):
        rs = s.put_batch([Message("Many", b"q%d" % q, queue_id=q) for q in range(chunk, chunk + 1000)])
        assert all(r.ok for r in rs)
        assert [r.queue_id for r in rs] == list(range(chunk, chunk + 1000))
        assert all(r.queue_offset == 0 for r in rs)
        peak = max(peak, fd_count())
    # a second round: every queue gets a second unit
    rs = s.put_batch([Message("Many", b"r%d" % q, queue_id=q) for q in range(QUEUES)])
    assert all(r.ok and r.queue_offset == 1 for r in rs)
    peak = max(peak, fd_count())
    for q in range(QUEUES):
        g = s.get("G", "Many", q, 0)
        assert g.status is GetStatus.FOUND, (q, g)
        assert [m.body for m in g.messages] == [b"q%d" % q, b"r%d" % q]
        if q % 500 == 0:
            peak = max(peak, fd_count())
    peak = max(peak, fd_count())
    # the commit-log segments made since (two descriptors each: the file and Python's mmap keeps a dup)
    # plus the bounded consume-queue handles
    segments = len(s.segments)
    assert peak - base <= OPEN_MAX + 2 * segments + 2, f"{peak - base} descriptors opened ({segments} segments)"
    assert len(os.listdir(os.path.join(cfg.consumequeue_path, "Many"))) == QUEUES
    assert len(s.queues.handles._open) <= OPEN_MAX
    s.shutdown()
    assert fd_count() <= before + 1


# Durability of the units (in memory, FaultyFileIO: power loss) -------------------------------

def test_a_failed_fsync_leaves_every_dirty_file_dirty_for_the_next_round(stores):
    """One file's fsync fails in a queue-flush round: that file and every dirty file after it are
    fsynced in the next round before its checkpoint claims them; after a power loss every
    acknowledged (SYNC_FLUSH) message keeps its unit."""
    cfg = memory_config(flush_disk_type="SYNC_FLUSH")         # 16 units per consume-queue file
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    for i in range(10):
        assert s.put(Message("T", b"m%d" % i)).ok
    s.flush_queues()
    for i in range(10, 20):                                    # units 10..15 in file 0, 16..19 in file 1
        assert s.put(Message("T", b"m%d" % i)).ok              # acknowledged: durable in the log
    fio.fail("fsync", errno.EIO, "consumequeue/T/0/" + "0" * 20, times=1)
    faults = fio.stats.faults_raised
    try:
        s.flush_queues()                                       # the queue-flush round that meets the EIO
    except OSError:
        pass
    assert fio.stats.faults_raised == faults + 1, "the fsync failed"
    s.flush_queues()                                           # next round: succeeds, writes the checkpoint
    s.kill()
    fio = fio.after_power_loss(NothingUnsyncedSurvives())
    s = stores(cfg, fio)
    assert s.max_offset("T", 0) == 20, "units of acknowledged messages lost"
    g = s.get("g", "T", 0, 0, max_count=32)
    assert [m.body for m in g.messages] == [b"m%d" % i for i in range(20)]


def test_a_dirty_mark_is_made_under_the_lock_the_flush_swaps_the_set_under(stores):
    """A file marked dirty outside the lock could land in the set a concurrent flush already took
    and never be fsynced, while the next checkpoint covers its units."""
    cfg = memory_config(flush_disk_type="SYNC_FLUSH")
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    for i in range(16):                                # units 0..15 fill consume-queue file 0
        assert s.put(Message("T", b"m%d" % i)).ok
    cq = s.queues.get("T", 0)
    assert cq._dirty == {0}                            # file 0 waits for the next queue flush
    marks = []

    class MustHoldTheLock(set):
        def add(self, x):
            assert cq._lock.locked(), "dirty mark made outside the lock flush() swaps the set under"
            marks.append(x)
            super().add(x)

    cq._dirty = MustHoldTheLock({0})
    assert s.put(Message("T", b"m16")).ok              # unit 16 opens file 1; acknowledged (SYNC_FLUSH)
    assert marks == [16], "the put marked its file (the one from unit 16) dirty"
    s.flush_queues()                                   # next round: the checkpoint covers m16
    s.kill()
    fio = fio.after_power_loss(NothingUnsyncedSurvives())
    s = stores(cfg, fio)
    assert s.max_offset("T", 0) == 17, "the unit of an acknowledged message was never fsynced"


def test_changed_units_per_segment_is_refused_or_keeps_every_message(stores):
    """consume_queue_units_per_segment changed between runs (segment_size_bytes is checked the
    same way): a clear refusal, or every message still reachable."""
    fio = FaultyFileIO()
    s = stores(memory_config(consume_queue_units_per_segment=16), fio)
    for i in range(40):
        assert s.put(Message("T", b"m%d" % i)).ok
    s.shutdown()
    try:
        s = stores(memory_config(consume_queue_units_per_segment=32), fio)
    except StoreError:
        return                                  # a clear refusal is fine
    got, off = [], 0
    while off < s.max_offset("T", 0):
        g = s.get("g", "T", 0, off, max_count=32)
        got += [m.body for m in g.messages]
        if g.next_offset <= off:
            break
        off = g.next_offset
    assert got == [b"m%d" % i for i in range(40)], f"{40 - len(got)} messages unreachable"


def test_message_bytes_exact_up_to_a_bound_then_estimated(cq):
    cq.append(0, units(0, 40))                   # sizes 100 .. 139, across three files
    assert cq.message_bytes(100) == (sum(range(100, 140)), True)
    assert cq.message_bytes(40) == (sum(range(100, 140)), True)
    nbytes, exact = cq.message_bytes(10)         # the last ten (130 .. 139): mean 134.5, times 40
    assert not exact and nbytes == 134.5 * 40
    cq.min_offset = 30                           # cleaned below 30: what the queue still holds
    assert cq.message_bytes(100) == (sum(range(130, 140)), True)


def test_queue_bytes_of_a_store_is_what_its_records_take(stores):
    s = stores(memory_config(segment_size_bytes=1 << 20), FaultyFileIO())
    results = s.put_batch([Message("T", b"x" * (10 + i)) for i in range(50)])
    assert all(r.ok for r in results)
    assert s.queue_bytes("T", 0) == (s.commitlog_max_offset - s.commitlog_min_offset, True)
    assert s.queue_bytes("nope", 0) == (0, True)
