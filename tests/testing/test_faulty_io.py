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
