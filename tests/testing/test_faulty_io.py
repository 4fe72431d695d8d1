"""The fault model itself: durability, crashes, power loss, injected errors."""

import errno
import random

import pytest

from tidemq.testing.faulty_io import FaultyFileIO, SimulatedCrash


def new_file(fio, path="/d/f", data=b""):
    fio.makedirs("/d")
    h = fio.open(path, create=True)
    if data:
        fio.pwrite(h, data, 0)
    return h


def test_kill9_keeps_unsynced_writes():
    fio = FaultyFileIO()
    h = new_file(fio, data=b"hello")
    new = fio.after_crash()
    assert new.pread(new.open("/d/f"), 5, 0) == b"hello"
    with pytest.raises(SimulatedCrash):
        fio.pread(h, 5, 0)          # the old process is dead


def test_power_loss_keeps_synced_data_and_may_drop_the_rest():
    outcomes = set()
    for seed in range(30):
        fio = FaultyFileIO()
        h = new_file(fio, data=b"A" * 8192)
        fio.fsync(h)
        fio.fsync_dir("/d")
        fio.pwrite(h, b"B" * 8192, 0)
        new = fio.after_power_loss(random.Random(seed))
        data = new.pread(new.open("/d/f"), 8192, 0)
        assert set(data) <= {ord("A"), ord("B")}
        outcomes.add(data)
    assert len(outcomes) > 2, "power loss should produce old, new and torn pages"


def test_unsynced_file_creation_may_vanish_on_power_loss():
    gone = 0
    for seed in range(20):
        fio = FaultyFileIO()
        new_file(fio, data=b"x")
        new = fio.after_power_loss(random.Random(seed))
        gone += not new.exists("/d/f")
    assert 0 < gone < 20


def test_fsync_dir_makes_an_unlink_durable():
    for seed in range(10):
        fio = FaultyFileIO()
        h = new_file(fio, data=b"x")
        fio.fsync(h)
        fio.unlink("/d/f")
        fio.fsync_dir("/d")
        assert not fio.after_power_loss(random.Random(seed)).exists("/d/f")


def test_crash_after_n_operations():
    fio = FaultyFileIO()
    h = new_file(fio)
    fio.crash_after(2)
    fio.pwrite(h, b"1", 0)
    with pytest.raises(SimulatedCrash):
        fio.pwrite(h, b"2", 1)
    assert fio.dead


def test_a_crash_can_tear_a_pwrite_its_first_bytes_land_in_the_page_cache():
    fio = FaultyFileIO()
    h = new_file(fio)
    fio.allocate(h, 16)
    mapping = fio.map(h, 16)
    fio.pwrite(h, b"AAAA", 0)
    assert bytes(mapping[:4]) == b"AAAA"          # a pwrite is what the mapping shows
    fio.crash_after(1, torn_bytes=3)
    with pytest.raises(SimulatedCrash):
        fio.pwrite(h, b"BBBBBB", 4)
    after = fio.after_crash()                      # kill -9: the page cache, torn write included
    assert after.pread(after.open("/d/f"), 16, 0) == b"AAAABBB" + bytes(9)


def test_a_torn_pwrite_not_synced_survives_a_power_loss_at_most_in_part():
    for seed in range(20):
        fio = FaultyFileIO()
        h = new_file(fio)
        fio.allocate(h, 8192)
        fio.pwrite(h, b"A" * 100, 0)
        fio.fsync(h)
        fio.crash_after(1, torn_bytes=50)
        with pytest.raises(SimulatedCrash):
            fio.pwrite(h, b"B" * 5000, 100)
        got = fio.after_power_loss(random.Random(seed))
        data = got.pread(got.open("/d/f"), 8192, 0)
        assert data[:100] == b"A" * 100            # what was synced stays
        tail = data[100:].rstrip(b"\0")
        assert tail == b"B" * len(tail) and len(tail) <= 50


def test_an_injected_pwrite_error_can_land_part_of_the_bytes():
    fio = FaultyFileIO()
    h = new_file(fio)
    fio.allocate(h, 16)
    fio.fail("pwrite", errno.ENOSPC, path_contains="/d/", written=2)
    with pytest.raises(OSError) as e:
        fio.pwrite(h, b"XYZW", 4)
    assert e.value.errno == errno.ENOSPC
    assert fio.pread(h, 16, 0) == bytes(4) + b"XY" + bytes(10)
    fio.pwrite(h, b"XYZW", 4)                      # only once
    assert fio.pread(h, 8, 0) == bytes(4) + b"XYZW"


def test_injected_errors_and_enospc():
    fio = FaultyFileIO(capacity_bytes=1000)
    h = new_file(fio)
    fio.fail("fsync", errno.EIO, times=1)
    with pytest.raises(OSError) as e:
        fio.fsync(h)
    assert e.value.errno == errno.EIO
    fio.fsync(h)                    # only once
    with pytest.raises(OSError) as e:
        fio.allocate(h, 2000)
    assert e.value.errno == errno.ENOSPC
    assert fio.disk_usage("/d").free_bytes == 1000


def test_lock_is_exclusive_per_path_until_unlocked():
    from tidemq.io import LockedError
    fio = FaultyFileIO()
    h = fio.lock("/s/lock")
    with pytest.raises(LockedError, match="in use"):
        fio.lock("/s/lock")
    with pytest.raises(LockedError):
        fio.lock("/s/./lock")                     # the same path, spelled otherwise
    other = fio.lock("/t/lock")                   # another root
    fio.unlock(h)
    fio.unlock(h)                                 # twice is harmless
    h2 = fio.lock("/s/lock")                      # free again
    fio.unlock(other)
    fio.unlock(h2)
    assert "lock" not in fio.listdir("/") and not fio.exists("/s/lock"), "no file is written for a lock"


def test_a_crash_releases_every_lock():
    fio = FaultyFileIO()
    fio.makedirs("/s")
    fio.lock("/s/lock")
    power = FaultyFileIO()
    power.lock("/s/lock")
    for survivor in (fio.after_crash(), power.after_power_loss(random.Random(1))):
        survivor.unlock(survivor.lock("/s/lock"))
    with pytest.raises(SimulatedCrash):
        fio.lock("/t/lock")                       # the dead process takes no lock


# A failed fsync (Linux's writeback error: PostgreSQL's "fsyncgate") ----------------------------

def _failed_fsync(seed: int, drop_ratio: float):
    """A file durable as A*3 pages, B written over it, an fsync that fails: (fio, handle)."""
    fio = FaultyFileIO(seed=seed)
    fio.drop_ratio = drop_ratio
    h = new_file(fio, data=b"A" * 3 * 4096)
    fio.fsync(h)
    fio.pwrite(h, b"B" * 3 * 4096, 0)
    fio.fail("fsync", errno.EIO, "/d/")
    with pytest.raises(OSError) as e:
        fio.fsync(h)
    assert e.value.errno == errno.EIO
    return fio, h


def test_a_failed_fsync_drops_or_keeps_each_dirty_page_seeded():
    seen = set()
    for seed in range(20):
        fio, h = _failed_fsync(seed, 0.5)
        pages = tuple(fio.pread(h, 4096, p * 4096)[:1] for p in range(3))
        assert set(pages) <= {b"A", b"B"}            # dropped: the disk's bytes again; kept: the new ones
        seen.add(pages)
        again, _ = _failed_fsync(seed, 0.5)
        assert tuple(again.pread(again.open("/d/f"), 4096, p * 4096)[:1] for p in range(3)) == pages, "seeded"
    assert len(seen) > 2


def test_the_next_fsync_succeeding_proves_nothing_about_the_pages_a_failed_one_covered():
    fio, h = _failed_fsync(0, 0.0)                    # every page kept in the cache, marked clean
    assert fio.pread(h, 4, 0) == b"BBBB"
    fio.fsync(h)                                      # succeeds: writes nothing of them
    for seed in range(5):
        new = fio.after_power_loss(random.Random(seed))
        assert new.pread(new.open("/d/f"), 3 * 4096, 0) == b"A" * 3 * 4096, "the kept pages were never on disk"


def test_a_page_written_again_after_a_failed_fsync_is_dirty_again():
    fio, h = _failed_fsync(0, 0.0)
    fio.pwrite(h, b"B", 4096)                         # the same byte: the page is dirty again (Linux)
    fio.fsync(h)
    new = fio.after_power_loss(random.Random(1))
    data = new.pread(new.open("/d/f"), 3 * 4096, 0)
    assert data == b"A" * 4096 + b"B" * 4096 + b"A" * 4096


def test_a_kill9_keeps_the_clean_pages_a_failed_fsync_left_and_they_are_still_not_durable():
    fio, h = _failed_fsync(0, 0.0)
    new = fio.after_crash()
    h2 = new.open("/d/f")
    assert new.pread(h2, 4, 0) == b"BBBB"             # the page cache survives a kill -9...
    new.sync_filesystem("/d")                         # ...and no sync writes those pages
    after = new.after_power_loss(random.Random(2))
    assert after.pread(after.open("/d/f"), 4, 0) == b"AAAA"


def test_a_rename_is_atomic_and_a_committed_change_commits_the_ones_before():
    """The names: of the changes not committed, a prefix survives a power loss (never the second
    of two renames without the first); an fsync of any file commits every change before it."""
    kinds = set()
    for seed in range(30):
        fio = FaultyFileIO()
        new_file(fio, "/d/a", b"old")
        fio.fsync_dir("/d")
        fio.rename("/d/a", "/d/a.bak")
        h = fio.open("/d/a.tmp", create=True)
        fio.pwrite(h, b"new", 0)
        fio.rename("/d/a.tmp", "/d/a")
        after = fio.after_power_loss(random.Random(seed))
        names = tuple(sorted(after.listdir("/d")))
        assert names in {("a",), ("a.bak",), ("a.bak", "a.tmp"), ("a", "a.bak")}, names
        kinds.add(names)
    assert len(kinds) > 2
    fio = FaultyFileIO()
    new_file(fio, "/d/a", b"x")
    h = fio.open("/d/b", create=True)
    fio.fsync(h)                                      # commits the journal: /d/a's creation too
    assert sorted(fio.after_power_loss(random.Random(0)).listdir("/d")) == ["a", "b"]


def test_a_file_unlinked_while_open_keeps_its_bytes_and_its_space_until_closed():
    """As on Linux: the name goes at once, the open handle (and a mapping of it) reads on, and the
    space is used until the last handle closes; a crash closes every handle."""
    fio = FaultyFileIO()
    h = new_file(fio, data=b"x" * 10_000)
    m = fio.map(h, 10_000)
    other = fio.open("/d/f")
    used = fio.disk_usage("/").used_bytes
    fio.unlink("/d/f")
    assert not fio.exists("/d/f") and m[:1] == b"x" and fio.pread(h, 1, 0) == b"x"
    assert fio.disk_usage("/").used_bytes == used, "an unlinked file still open keeps its blocks"
    fio.close(other)
    assert fio.disk_usage("/").used_bytes == used, "... until its last handle closes"
    fio.close(h)
    assert fio.disk_usage("/").used_bytes == used - 10_000
    h = new_file(fio, "/d/g", data=b"y" * 5_000)
    fio.unlink("/d/g")
    assert fio.after_crash().disk_usage("/").used_bytes == 0, "a crash closed it"
