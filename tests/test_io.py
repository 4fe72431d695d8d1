"""The FileIO and Clock seams: OsFileIO, write_atomic, the store lock, ManualClock."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from tidemq.io import (DiskUsage, LockedError, ManualClock, OsFileIO, SystemClock, read_whole,
                       write_atomic)


@pytest.fixture
def fio() -> OsFileIO:
    return OsFileIO()


def test_makedirs_listdir_exists_is_dir(fio, tmp_path):
    d = str(tmp_path / "a" / "b")
    fio.makedirs(d)
    fio.makedirs(d)                     # exists already: fine
    assert fio.is_dir(d) and fio.exists(d)
    h = fio.open(os.path.join(d, "f"), create=True)
    fio.close(h)
    assert fio.listdir(d) == ["f"]
    assert fio.exists(os.path.join(d, "f")) and not fio.is_dir(os.path.join(d, "f"))
    assert not fio.exists(os.path.join(d, "nope"))


def test_pwrite_that_fills_a_file_system_keeps_what_fit_and_raises_enospc(fio, env):
    """A write the file system takes only part of (a short pwrite) goes on from where it stopped:
    what fit stays, the rest is refused with ENOSPC, never a silent short write."""
    d = env.tmpfs("full", 1)
    h = fio.open(os.path.join(d, "f"), create=True)
    try:
        data = bytes(range(256)) * (8 << 10)           # 2 MiB into 1 MiB
        with pytest.raises(OSError) as e:
            fio.pwrite(h, data, 0)
        assert e.value.errno == errno.ENOSPC
        kept = fio.size_of(h)
        assert 0 < kept < len(data) and fio.pread(h, kept, 0) == data[:kept]
    finally:
        fio.close(h)


def test_open_without_create_of_missing_file_raises_enoent(fio, tmp_path):
    with pytest.raises(FileNotFoundError):
        fio.open(str(tmp_path / "missing"))


def test_pwrite_pread_size(fio, tmp_path):
    p = str(tmp_path / "f")
    h = fio.open(p, create=True)
    try:
        assert fio.pwrite(h, b"hello", 0) == 5
        assert fio.pwrite(h, memoryview(b"world"), 10) == 5
        assert fio.size_of(h) == 15
        assert fio.pread(h, 15, 0) == b"hello\0\0\0\0\0world"
        assert fio.pread(h, 100, 12) == b"rld"          # short read at the end
        assert fio.pread(h, 10, 100) == b""
        fio.fsync(h)
    finally:
        fio.close(h)
    assert fio.file_size(p) == 15


def test_allocate_and_truncate(fio, tmp_path):
    p = str(tmp_path / "f")
    h = fio.open(p, create=True)
    try:
        fio.allocate(h, 8192)
        assert fio.size_of(h) == 8192
        assert os.stat(p).st_blocks * 512 >= 8192        # real blocks reserved
        assert fio.pread(h, 8192, 0) == bytes(8192)
        fio.truncate(h, 100)
        assert fio.size_of(h) == 100
    finally:
        fio.close(h)


def test_zero_range_zeroes_exactly_the_range_and_keeps_size(fio, tmp_path):
    p = str(tmp_path / "f")
    size = 64 * 1024
    h = fio.open(p, create=True)
    try:
        data = bytes((i * 7 + 1) % 251 or 1 for i in range(size))
        fio.pwrite(h, data, 0)
        fio.zero_range(h, 4096, 8192)
        fio.zero_range(h, 20000, 1234)      # not page aligned
        fio.zero_range(h, 100, 0)           # nothing
        fio.zero_range(h, 100, -5)          # nothing
        got = fio.pread(h, size, 0)
        assert fio.size_of(h) == size
    finally:
        fio.close(h)
    expected = bytearray(data)
    expected[4096:4096 + 8192] = bytes(8192)
    expected[20000:20000 + 1234] = bytes(1234)
    assert got == bytes(expected)


def test_zero_range_visible_through_a_mapping(fio, tmp_path):
    p = str(tmp_path / "f")
    h = fio.open(p, create=True)
    try:
        fio.allocate(h, 16384)
        m = fio.map(h, 16384)
        try:
            m[:] = b"\xff" * 16384
            fio.fsync(h)
            fio.zero_range(h, 8192, 8192)
            assert m[:8192] == b"\xff" * 8192
            assert m[8192:] == bytes(8192)
        finally:
            fio.unmap(m)
    finally:
        fio.close(h)


def test_map_writes_reach_the_file(fio, tmp_path):
    p = str(tmp_path / "f")
    h = fio.open(p, create=True)
    try:
        fio.allocate(h, 4096)
        m = fio.map(h, 4096)
        m[10:15] = b"abcde"
        fio.fsync(h)
        fio.unmap(m)
        assert fio.pread(h, 5, 10) == b"abcde"
    finally:
        fio.close(h)


def test_rename_unlink_rmtree(fio, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    h = fio.open(a, create=True)
    fio.pwrite(h, b"1", 0)
    fio.close(h)
    h = fio.open(b, create=True)
    fio.close(h)
    fio.rename(a, b)                         # replaces
    assert not fio.exists(a)
    assert read_whole(fio, b) == b"1"
    fio.unlink(b)
    assert not fio.exists(b)
    with pytest.raises(FileNotFoundError):
        fio.unlink(b)
    d = str(tmp_path / "tree" / "sub")
    fio.makedirs(d)
    fio.rmtree(str(tmp_path / "tree"))
    assert not fio.exists(str(tmp_path / "tree"))
    fio.fsync_dir(str(tmp_path))


def test_disk_usage(fio, tmp_path):
    u = fio.disk_usage(str(tmp_path))
    assert isinstance(u, DiskUsage)
    assert u.total_bytes > 0
    assert 0 <= u.free_bytes <= u.total_bytes
    assert 0 <= u.used_bytes <= u.total_bytes
    assert 0.0 <= u.used_ratio <= 1.0
    assert DiskUsage(0, 0, 0).used_ratio == 1.0
    assert DiskUsage(200, 50, 150).used_ratio == 0.25


def test_write_atomic_creates_and_replaces(fio, tmp_path):
    p = str(tmp_path / "cfg.json")
    write_atomic(fio, p, b"first version, long")
    assert read_whole(fio, p) == b"first version, long"
    write_atomic(fio, p, b"second")
    assert read_whole(fio, p) == b"second"          # not b"secondversion, long"
    assert sorted(os.listdir(tmp_path)) == ["cfg.json"]   # no .tmp left behind


def test_write_atomic_leaves_the_old_file_when_the_write_fails(tmp_path):
    class FailingWrite(OsFileIO):
        def pwrite(self, handle, data, offset):
            raise OSError(errno.ENOSPC, "No space left on device")

    p = str(tmp_path / "cfg.json")
    write_atomic(OsFileIO(), p, b"old")
    with pytest.raises(OSError) as ei:
        write_atomic(FailingWrite(), p, b"new")
    assert ei.value.errno == errno.ENOSPC
    assert read_whole(OsFileIO(), p) == b"old"


def test_lock_refuses_a_second_locker(fio, tmp_path):
    p = str(tmp_path / "lock")
    h = fio.lock(p)
    try:
        with open(p) as f:
            assert f.read() == str(os.getpid())
        with pytest.raises(LockedError, match="in use"):
            OsFileIO().lock(p)
        with pytest.raises(LockedError):
            fio.lock(p)
    finally:
        fio.unlock(h)
    h2 = fio.lock(p)                    # free again after unlock
    fio.unlock(h2)


def test_lock_does_not_leak_descriptors_when_refused(fio, tmp_path):
    p = str(tmp_path / "lock")
    h = fio.lock(p)
    try:
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(20):
            with pytest.raises(LockedError):
                fio.lock(p)
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        fio.unlock(h)


def test_manual_clock_moves_only_when_told():
    c = ManualClock(now_ms=5_000)
    assert c.now_ms() == 5_000
    m0 = c.monotonic_s()
    assert c.now_ms() == 5_000 and c.monotonic_s() == m0
    c.advance(1.5)
    assert c.now_ms() == 6_500
    assert c.monotonic_s() == pytest.approx(m0 + 1.5)
    c.sleep(2)                           # sleep advances, without waiting
    assert c.now_ms() == 8_500
    assert c.monotonic_s() == pytest.approx(m0 + 3.5)


def test_manual_clock_default_start_and_thread_safety():
    c = ManualClock()
    start = c.now_ms()
    assert start == 1_700_000_000_000

    def work():
        for _ in range(1000):
            c.advance(0.001)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert c.now_ms() == start + 4000


def test_system_clock():
    c = SystemClock()
    import time
    before = time.time()
    now = c.now_ms()
    after = time.time()
    assert int(before * 1000) - 1 <= now <= after * 1000 + 1
    a = c.monotonic_s()
    c.sleep(0.001)
    assert c.monotonic_s() > a


@pytest.mark.parametrize("ms", [1, 999, 1001, 1005, 2049, 4999])
def test_manual_clock_advance_by_fractional_seconds_is_exact_to_the_ms(ms):
    c = ManualClock(now_ms=0)
    c.advance(ms / 1000)          # e.g. 1.001 s is 1001 ms, not 1000 (float truncation)
    assert c.now_ms() == ms
