"""The hash index: colliding slots, time ranges, rolling to a new file, unique keys."""

from __future__ import annotations

import errno
import os
import struct

import pytest

from tidemq.io import ManualClock, OsFileIO
from tidemq.store import Message, index_file
from tidemq.store.index_file import ENTRY, HEADER, IndexFile, IndexService, index_file_size, key_hash
from tidemq.store.mapped_file import parse_segment_name
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import MEMORY_ROOT, NothingUnsyncedSurvives, memory_config

T0 = 1_700_000_000_000


def keyed_store(make_config, open_store, clock=None, **cfg):
    cfg.setdefault("index_slots", 16)
    cfg.setdefault("index_entries", 4000)
    return open_store(make_config(**cfg), clock=clock or ManualClock(T0))


# IndexFile directly ---------------------------------------------------------------

def test_index_file_layout(tmp_path):
    fio = OsFileIO()
    f = IndexFile.create(fio, str(tmp_path), 12345, slots=16, entries=32)
    try:
        assert os.path.basename(f.path) == "00000000000000012345"
        assert os.path.getsize(f.path) == index_file_size(16, 32) == 40 + 16 * 4 + 32 * 20
        assert f.put("T#k", 777, T0)
        assert f.put("T#k", 888, T0 + 2500)
        begin_ts, end_ts, begin_phy, end_phy, slots, count = HEADER.unpack_from(f.buf, 0)
        assert (begin_ts, end_ts, begin_phy, end_phy, slots, count) == (T0, T0 + 2500, 777, 888, 16, 3)
        h = key_hash("T#k")
        (slot,) = struct.unpack_from(">i", f.buf, 40 + (h % 16) * 4)
        assert slot == 2                                     # newest entry
        e1 = ENTRY.unpack_from(f.buf, 40 + 16 * 4 + 1 * 20)
        e2 = ENTRY.unpack_from(f.buf, 40 + 16 * 4 + 2 * 20)
        assert e1 == (h, 777, 0, 0)                          # entry 0 is never used
        assert e2 == (h, 888, 2, 1)                          # time diff in seconds, previous entry
        assert f.lookup("T#k", 10, 0, 1 << 62) == [888, 777]
        assert f.lookup("T#other", 10, 0, 1 << 62) == []
    finally:
        f.close()


def test_index_file_full_and_reopen(tmp_path):
    fio = OsFileIO()
    f = IndexFile.create(fio, str(tmp_path), 1, slots=16, entries=16)
    for i in range(15):
        assert f.put(f"T#k{i}", i, T0)
    assert f.full
    assert not f.put("T#late", 99, T0)
    f.flush()
    f.close()
    g = IndexFile.open(fio, os.path.join(str(tmp_path), "00000000000000000001"), 16, 16)
    try:
        assert g.count == 16 and g.full
        for i in range(15):
            assert g.lookup(f"T#k{i}", 5, 0, 1 << 62) == [i]
    finally:
        g.close()
    with pytest.raises(ValueError):
        IndexFile.open(fio, os.path.join(str(tmp_path), "00000000000000000001"), 32, 16)


def test_index_service_rolls_and_names_files_increasing(tmp_path):
    clock = ManualClock(T0)
    svc = IndexService(OsFileIO(), str(tmp_path / "index"), 16, 16, clock)
    svc.load()
    try:
        for i in range(100):
            svc.put(f"T#k{i % 10}", i, T0)
        assert len(svc.files) == 7                    # 15 entries per file
        names = [parse_segment_name(os.path.basename(f.path)) for f in svc.files]
        assert names == sorted(set(names))            # same clock reading: still unique, increasing
        assert names[0] == T0
        assert sorted(svc.lookup("T#k3", 100, 0, 1 << 62)) == [i for i in range(100) if i % 10 == 3]
        assert len(svc.lookup("T#k3", 4, 0, 1 << 62)) == 4
    finally:
        svc.close()


# Through the store -----------------------------------------------------------------

def test_colliding_slots_still_find_exactly_the_right_messages(make_config, open_store):
    s = keyed_store(make_config, open_store, index_slots=16)
    n = 600
    rs = s.put_batch([Message("T", b"body%d" % i, keys=[f"key-{i}", f"group-{i % 7}"]) for i in range(n)])
    assert all(r.ok for r in rs)
    slots = {key_hash(f"T#key-{i}") % 16 for i in range(n)}
    assert len(slots) <= 16                           # 600 keys, 16 slots: long chains
    for i in (0, 1, 15, 16, 17, 299, 598, 599):
        got = s.query_by_key("T", f"key-{i}")
        assert [m.body for m in got] == [b"body%d" % i]
        assert got[0].commitlog_offset == rs[i].commitlog_offset
    got = s.query_by_key("T", "group-3", max_count=1000)
    assert sorted(m.body for m in got) == sorted(b"body%d" % i for i in range(n) if i % 7 == 3)
    # newest first
    offs = [m.commitlog_offset for m in got]
    assert offs == sorted(offs, reverse=True)
    assert s.query_by_key("T", "key-600") == []
    assert s.query_by_key("T", "key-") == []
    assert s.query_by_key("Other", "key-1") == []


def test_same_key_in_two_topics(make_config, open_store):
    s = keyed_store(make_config, open_store)
    s.put(Message("A", b"a", keys="k"))
    s.put(Message("B", b"b", keys="k"))
    assert [m.body for m in s.query_by_key("A", "k")] == [b"a"]
    assert [m.body for m in s.query_by_key("B", "k")] == [b"b"]


def test_max_count(make_config, open_store):
    s = keyed_store(make_config, open_store)
    s.put_batch([Message("T", b"%d" % i, keys="same") for i in range(50)])
    got = s.query_by_key("T", "same", max_count=10)
    assert len(got) == 10
    assert [m.body for m in got] == [b"%d" % i for i in range(49, 39, -1)]      # the newest ten
    assert len(s.query_by_key("T", "same", max_count=100)) == 50


def test_time_range(make_config, open_store):
    clock = ManualClock(T0)
    s = keyed_store(make_config, open_store, clock=clock)
    stamps = []
    for i in range(10):
        r = s.put(Message("T", b"m%d" % i, keys="k"))
        assert r.store_timestamp_ms == clock.now_ms()
        stamps.append(r.store_timestamp_ms)
        clock.advance(1.25)                    # not whole seconds: the index keeps seconds
    assert stamps[1] - stamps[0] == 1250

    def bodies(begin, end):
        return sorted(m.body for m in s.query_by_key("T", "k", max_count=100, begin_ms=begin, end_ms=end))

    assert bodies(0, 1 << 62) == sorted(b"m%d" % i for i in range(10))
    assert bodies(stamps[3], stamps[6]) == [b"m3", b"m4", b"m5", b"m6"]
    assert bodies(stamps[3] + 1, stamps[6] - 1) == [b"m4", b"m5"]
    assert bodies(stamps[9] + 1, 1 << 62) == []
    assert bodies(0, stamps[0] - 1) == []
    assert bodies(stamps[2], stamps[2]) == [b"m2"]
    assert bodies(stamps[9], stamps[9]) == [b"m9"]


def test_full_index_file_rolls_to_a_new_one(make_config, open_store):
    clock = ManualClock(T0)
    s = keyed_store(make_config, open_store, clock=clock, index_slots=16, index_entries=32)
    rs = []
    for i in range(200):
        rs.append(s.put(Message("T", b"m%d" % i, keys=[f"k{i}"])))
        if i % 50 == 0:
            clock.advance(3)
    files = s.index.files
    assert len(files) == 7                                # 31 entries per file
    names = [parse_segment_name(os.path.basename(f.path)) for f in files]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert len([n for n in os.listdir(make_config().index_path) if n.isdigit()]) == 7   # .tidemq-index is the marker
    for i in range(200):
        got = s.query_by_key("T", f"k{i}")
        assert [m.commitlog_offset for m in got] == [rs[i].commitlog_offset], i


def test_key_spread_over_several_index_files(make_config, open_store):
    s = keyed_store(make_config, open_store, index_slots=16, index_entries=16)
    s.put_batch([Message("T", b"%d" % i, keys=["hot", f"k{i}"]) for i in range(60)])
    assert len(s.index.files) > 4
    got = s.query_by_key("T", "hot", max_count=60)
    assert sorted(int(m.body) for m in got) == list(range(60))


def test_unique_key_lookup(make_config, open_store):
    s = keyed_store(make_config, open_store)
    uniqs = [f"7F00000100002A9F{i:016X}" for i in range(100)]
    rs = s.put_batch([Message("T", b"u%d" % i, properties={"UNIQ_KEY": u}) for i, u in enumerate(uniqs)])
    for i in (0, 42, 99):
        assert rs[i].msg_id == uniqs[i]
        got = s.query_by_key("T", uniqs[i])
        assert len(got) == 1
        assert got[0].body == b"u%d" % i
        assert got[0].msg_id == uniqs[i]
    assert s.query_by_key("T", "7F00000100002A9F" + "F" * 16) == []


def test_keys_and_unique_key_together(make_config, open_store):
    s = keyed_store(make_config, open_store)
    s.put(Message("T", b"x", keys=["a", "b"], properties={"UNIQ_KEY": "U1"}))
    for k in ("a", "b", "U1"):
        assert [m.body for m in s.query_by_key("T", k)] == [b"x"]


def test_index_survives_restart(make_config, open_store):
    cfg = make_config(index_slots=16, index_entries=64)
    s = open_store(cfg, clock=ManualClock(T0))
    s.put_batch([Message("T", b"%d" % i, keys=f"k{i}") for i in range(100)])
    s.shutdown()
    s2 = open_store(cfg, clock=ManualClock(T0 + 60_000))
    for i in (0, 63, 99):
        assert [m.body for m in s2.query_by_key("T", f"k{i}")] == [b"%d" % i]
    s2.put(Message("T", b"new", keys="k0"))
    assert sorted(m.body for m in s2.query_by_key("T", "k0")) == [b"0", b"new"]


def test_index_disabled(make_config, open_store):
    s = open_store(make_config(index_enabled=False))
    s.put(Message("T", b"x", keys="k"))
    assert s.index is None
    assert s.query_by_key("T", "k") == []


def test_put_many_writes_what_put_writes_and_rolls_files(tmp_path):
    fio = OsFileIO()
    items = [(f"T#k{i % 7}", 100 + i) for i in range(40)]
    one = IndexService(fio, str(tmp_path / "one"), 8, 16, ManualClock(T0))
    many = IndexService(fio, str(tmp_path / "many"), 8, 16, ManualClock(T0))
    for d in (one, many):
        d.load()
    try:
        for k, phy in items:
            one.put(k, phy, T0 + 1500)
        done = 0
        while done < len(items):
            done += many.put_many(items, done, T0 + 1500)
        assert len(many.files) == len(one.files) == 3                # 15 entries per file
        for a, b in zip(one.files, many.files):
            assert bytes(a.buf) == bytes(b.buf)                       # byte for byte
        assert many.lookup("T#k3", 100, 0, 1 << 62) == [phy for k, phy in reversed(items) if k == "T#k3"]
    finally:
        for d in (one, many):
            d.close()


def _hashed(items) -> bytearray:
    return bytearray(b"".join(index_file.HASHED_ITEM.pack(key_hash(k), phy) for k, phy in items))


@pytest.mark.skipif(index_file.index_put_slots is None, reason="slots by pwrite: the compiled loop only")
def test_slots_written_by_pwrite_are_what_the_mapping_writes_across_fsyncs(tmp_path, monkeypatch):
    """put_hashed on a real file writes the slots of a short run by pwrite for the first pwrite_budget
    slots after each fsync and through the mapping after them: the same file, byte for byte, as every slot through the
    mapping, whatever the mix (a page pwritten then written through the mapping, and back)."""
    fio = OsFileIO()
    items = [(f"T#k{i % 23}", 100 + i) for i in range(300)]
    hashed = _hashed(items)
    a = IndexService(fio, str(tmp_path / "pwrite"), 2048, 400, ManualClock(T0))
    b = IndexService(fio, str(tmp_path / "mapped"), 2048, 400, ManualClock(T0))
    for d in (a, b):
        d.load()
    try:
        assert a._writable_file().fd is not None and a._writable_file().pwrite_budget == 1   # 2 pages of slots
        b._writable_file().fd = None                                  # every slot through the mapping
        real, by_pwrite = index_file.index_put_slots, []

        def counted(*args):                                     # (the real one, counted)
            by_pwrite.append(args[7] - args[6])
            return real(*args)
        monkeypatch.setattr(index_file, "index_put_slots", counted)
        for d in (a, b):
            done, runs = 0, 0
            while done < len(items):                            # runs of 1 to 9 items (drains)
                run = hashed[done * 12:(done + 1 + done % 9) * 12]
                put = 0
                while put < len(run) // 12:
                    put += d.put_hashed(run, put, T0 + 1500)
                done += put
                runs += 1
                if runs % 3 == 0:
                    d.flush()                                   # the budget again
        assert 0 < sum(by_pwrite) < len(items)                  # both ways, on the same pages
        assert bytes(a.files[0].buf) == bytes(b.files[0].buf)
        with open(a.files[0].path, "rb") as fa, open(b.files[0].path, "rb") as fb:
            assert fa.read() == fb.read()                       # what the file holds, not only the mapping
        assert a.lookup("T#k3", 100, 0, 1 << 62) == [phy for k, phy in reversed(items) if k == "T#k3"]
    finally:
        for d in (a, b):
            d.close()


@pytest.mark.skipif(index_file.index_put_slots is None, reason="slots by pwrite: the compiled loop only")
def test_a_slot_pwrite_that_fails_midway_keeps_what_went_in_and_every_chain(tmp_path):
    """A slot pwrite that fails (a real one: past RLIMIT_FSIZE, EFBIG) after some items: those are in
    and counted (their slots name them: no chain loses its older entries), the call returns how many;
    the next call fails at once with nothing put; once writes succeed again the rest go in, and every
    key finds each of its entries exactly once."""
    import resource
    import signal
    fio = OsFileIO()
    slots = 4096                                 # 4 pages of slots: the limit cuts them in two
    old = [(f"T#k{i}", 10 + i) for i in range(64)]            # indexed before, through the mapping
    d = IndexService(fio, str(tmp_path / "ix"), slots, 1000, ManualClock(T0))
    d.load()
    f = d._writable_file()
    f.pwrite_budget = 1 << 30
    try:
        f.fd, fd = None, f.fd
        d.put_many(old, 0, T0)
        f.fd = fd
        limit = HEADER.size + slots * 2                         # slots below it writable, above it not
        low = [k for k, _ in old if HEADER.size + key_hash(k) % slots * 4 < limit]
        high = [k for k, _ in old if HEADER.size + key_hash(k) % slots * 4 >= limit]
        new = [(low[0], 1000), (low[1], 1001), (high[0], 1002), (low[2], 1003)]
        hashed = _hashed(new)
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        was = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        try:
            assert d.put_hashed(hashed, 0, T0 + 1000) == 2          # the two before the slot past the limit
            with pytest.raises(OSError) as e:
                d.put_hashed(hashed, 2, T0 + 1000)
            assert e.value.errno == errno.EFBIG
            assert f.count == 1 + len(old) + 2 and f.end_phy == 1001
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, was)
        assert d.put_hashed(hashed, 2, T0 + 1000) == 2
        want = {k: [phy for kk, phy in reversed(old + new) if kk == k] for k, _ in old}
        assert {k: d.lookup(k, 100, 0, 1 << 62) for k, _ in old} == want
        d.flush()
        d.close()
        d = IndexService(fio, str(tmp_path / "ix"), slots, 1000, ManualClock(T0))
        d.load()
        assert {k: d.lookup(k, 100, 0, 1 << 62) for k, _ in old} == want      # the file, reopened
    finally:
        d.close()


@pytest.mark.skipif(index_file.index_put_slots is None, reason="slots by pwrite: the compiled loop only")
def test_a_slot_pwrite_torn_in_two_leaves_the_slot_as_it_was(tmp_path):
    """A slot pwrite the kernel takes in part (its first two bytes: RLIMIT_FSIZE in the middle of the
    slot, a real short write, then EFBIG): the put fails with nothing counted and the slot holds its old
    value again, so the entries already in its chain are still found."""
    import resource
    import signal
    fio = OsFileIO()
    slots = 4096
    d = IndexService(fio, str(tmp_path / "ix"), slots, 70_000, ManualClock(T0))
    d.load()
    f = d._writable_file()
    f.pwrite_budget = 1 << 30
    try:
        f.fd, fd = None, f.fd
        # entry 65535 (0x0000FFFF) the slot's newest: the next, 65536 (0x00010000), differs in its first two bytes
        items = [("T#k", 7)] + [(f"T#f{i}", 100 + i) for i in range(65533)] + [("T#k", 9)]
        assert d.put_many(items, 0, T0) == 65535 and f.count == 65536
        f.fd = fd
        at = HEADER.size + key_hash("T#k") % slots * 4
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        was = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (at + 2, hard))
        try:
            with pytest.raises(OSError) as e:
                d.put_hashed(_hashed([("T#k", 999)]), 0, T0)
            assert e.value.errno == errno.EFBIG
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, was)
        assert f.count == 65536
        with open(f.path, "rb") as fh:
            fh.seek(at)
            assert struct.unpack(">i", fh.read(4))[0] == 65535
        assert d.lookup("T#k", 10, 0, 1 << 62) == [9, 7]
    finally:
        d.close()


# Durability and concurrency (in memory, FaultyFileIO) --------------------------------------

def test_a_failed_index_fsync_keeps_the_file_dirty_until_one_succeeds(stores):
    """The fsync fails: the file stays dirty, the next round fsyncs it before its checkpoint
    claims the index durable; after a power loss every acknowledged key is found."""
    cfg = memory_config(flush_disk_type="SYNC_FLUSH")
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    for i in range(5):
        assert s.put(Message("T", b"m%d" % i, keys=[f"k{i}"])).ok
    s.flush_queues()
    for i in range(5, 10):
        assert s.put(Message("T", b"m%d" % i, keys=[f"k{i}"])).ok
    fio.fail("fsync", errno.EIO, MEMORY_ROOT + "/index/", times=1)
    faults = fio.stats.faults_raised
    try:
        s.flush_queues()
    except OSError:
        pass
    assert fio.stats.faults_raised == faults + 1, "the index fsync failed"
    s.flush_queues()                                  # succeeds: checkpoint says the index is durable
    s.kill()
    fio = fio.after_power_loss(NothingUnsyncedSurvives())
    s = stores(cfg, fio)
    assert [i for i in range(10) if not s.query_by_key("T", f"k{i}")] == []


def test_query_by_key_racing_the_cleanup_of_an_index_file(stores, monkeypatch):
    """The cleanup deletes (unmaps) an index file while a lookup walks the files: the lookup holds
    them, it answers instead of raising."""
    clock = ManualClock()
    s = stores(memory_config(segment_size_bytes=8 * 1024, index_slots=16, index_entries=16), FaultyFileIO(), clock)
    i = 0
    while len(s.segments) < 4:
        assert s.put(Message("T", b"x" * 1000, keys=[f"k{i}"])).ok
        i += 1
    assert len(s.index.files) == 2
    clock.advance(73 * 3600)
    s.trigger_delete_expired()
    real = index_file.IndexFile.lookup
    cleaned = []

    def lookup_racing_clean(self, *a):
        if not cleaned:                         # the clean service's round runs between two index files
            s.clean()
            cleaned.append(len(s.index.files))
        return real(self, *a)

    monkeypatch.setattr(index_file.IndexFile, "lookup", lookup_racing_clean)
    s.query_by_key("T", f"k{i - 1}")
    assert cleaned and cleaned[0] < 2, "the cleanup deleted an index file during the lookup"


def test_query_by_key_while_a_colliding_key_is_indexed(stores, monkeypatch):
    """put() stores the slot before it raises the entry count: a lookup in between must still walk
    the chain to the older entries of that slot."""
    slots = 16
    s = stores(memory_config(index_slots=slots), FaultyFileIO())
    other = next(f"n{i}" for i in range(10_000) if key_hash(f"T#n{i}") % slots == key_hash("T#old") % slots)
    assert s.put(Message("T", b"acknowledged long ago", keys=["old"])).ok
    real = index_file.SLOT
    seen = []

    class SlotThenReader:
        size = real.size

        def unpack_from(self, *a):
            return real.unpack_from(*a)

        def pack_into(self, *a):
            real.pack_into(*a)
            if not seen:                        # the writer is preempted here; a reader runs
                seen.append(s.query_by_key("T", "old"))

    monkeypatch.setattr(index_file, "SLOT", SlotThenReader())
    monkeypatch.setattr(index_file, "index_put", None)   # the Python loops (the compiled ones hold the GIL)
    monkeypatch.setattr(index_file, "index_put_hashed", None)    # (a put's items hashed: dispatch_merge)
    assert s.put(Message("T", b"new", keys=[other])).ok
    assert seen and len(seen[0]) == 1, "the old, acknowledged message was not found"
