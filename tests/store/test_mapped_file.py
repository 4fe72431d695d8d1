"""MappedFile: one preallocated, mapped segment; hold/release; destroy."""

from __future__ import annotations

import logging
import os

import pytest

from tidemq.io import OsFileIO
from tidemq.store.mapped_file import MappedFile, parse_segment_name, segment_name

from ..support.fds import fd_count

SIZE = 64 * 1024


@pytest.fixture
def fio():
    return OsFileIO()


@pytest.fixture
def mf(fio, tmp_path):
    m = MappedFile.create(fio, str(tmp_path), 0, SIZE)
    yield m
    m.close()


def test_segment_name_is_20_digits():
    assert segment_name(0) == "00000000000000000000"
    assert segment_name(1073741824) == "00000000001073741824"
    assert len(segment_name(2 ** 63 - 1)) == 20
    assert parse_segment_name("00000000001073741824") == 1073741824
    assert parse_segment_name("1073741824") is None
    assert parse_segment_name("0000000000107374182x") is None
    assert parse_segment_name("00000000001073741824.tmp") is None


def test_create_preallocates_and_maps(fio, tmp_path):
    m = MappedFile.create(fio, str(tmp_path), 3 * SIZE, SIZE)
    try:
        assert m.path == os.path.join(str(tmp_path), "00000000000000196608")
        assert m.directory == str(tmp_path)
        assert os.path.getsize(m.path) == SIZE
        assert os.stat(m.path).st_blocks * 512 >= SIZE      # real blocks, no sparse file
        assert m.start_offset == 3 * SIZE and m.end_offset == 4 * SIZE
        assert m.wrote_pos == 0 and m.flushed_pos == 0
        assert not m.is_full and m.available and m.refs == 0
        assert len(m.buf) == SIZE
        assert bytes(m.buf[:16]) == bytes(16)
    finally:
        m.close()


def test_create_refuses_an_existing_file(fio, tmp_path, mf):
    with pytest.raises(FileExistsError):
        MappedFile.create(fio, str(tmp_path), 0, SIZE)


def test_write_flush_and_open_again(fio, tmp_path):
    m = MappedFile.create(fio, str(tmp_path), 0, SIZE)
    m.buf[100:105] = b"hello"
    m.wrote_pos = 105
    assert m.flush() == 105
    assert m.flushed_pos == 105
    assert m.flush() == 105             # nothing new: no second fsync needed
    m.close()
    with open(os.path.join(str(tmp_path), segment_name(0)), "rb") as f:
        assert f.read()[100:105] == b"hello"
    m2 = MappedFile.open(fio, os.path.join(str(tmp_path), segment_name(0)), 0, SIZE)
    try:
        assert bytes(m2.buf[100:105]) == b"hello"
        assert m2.wrote_pos == 0                 # positions come from recovery, not the file
    finally:
        m2.close()


def test_open_extends_a_short_file(fio, tmp_path):
    p = os.path.join(str(tmp_path), segment_name(0))
    with open(p, "wb") as f:
        f.write(b"abc")
    m = MappedFile.open(fio, p, 0, SIZE)
    try:
        assert os.path.getsize(p) == SIZE
        assert bytes(m.buf[:3]) == b"abc"
        assert bytes(m.buf[3:SIZE]) == bytes(SIZE - 3)
    finally:
        m.close()


def test_flush_only_fsyncs_when_something_is_new(tmp_path):
    class Counting(OsFileIO):
        fsyncs = 0

        def fsync(self, handle):
            Counting.fsyncs += 1
            super().fsync(handle)

    m = MappedFile.create(Counting(), str(tmp_path), 0, SIZE)
    try:
        m.flush()
        assert Counting.fsyncs == 0
        m.wrote_pos = 10
        m.flush()
        m.flush()
        assert Counting.fsyncs == 1
    finally:
        m.close()


def test_is_full_when_wrote_pos_reaches_size(mf):
    mf.wrote_pos = SIZE - 1
    assert not mf.is_full
    mf.wrote_pos = SIZE
    assert mf.is_full


def test_zero_from_wipes_the_tail(mf):
    mf.buf[:SIZE] = b"\x07" * SIZE
    mf.zero_from(1000)
    assert bytes(mf.buf[:1000]) == b"\x07" * 1000
    assert bytes(mf.buf[1000:]) == bytes(SIZE - 1000)
    mf.zero_from(SIZE)                           # nothing to do
    assert os.path.getsize(mf.path) == SIZE


def test_hold_release_counts(mf):
    assert mf.hold() and mf.hold()
    assert mf.refs == 2
    mf.release()
    assert mf.refs == 1
    mf.release()
    assert mf.refs == 0
    assert mf.available


def test_destroy_without_readers_deletes_at_once(fio, tmp_path):
    before = fd_count(tmp_path)
    m = MappedFile.create(fio, str(tmp_path), 0, SIZE)
    assert m.destroy(now_ms=1000, force_after_ms=60_000) is True
    assert not os.path.exists(m.path)
    assert not m.available
    assert not m.hold()
    assert fd_count(tmp_path) == before                  # handle closed


def test_destroy_waits_for_readers(fio, tmp_path):
    before = fd_count(tmp_path)
    m = MappedFile.create(fio, str(tmp_path), 0, SIZE)
    m.buf[:4] = b"data"
    assert m.hold()
    assert m.destroy(now_ms=1000, force_after_ms=5000) is False
    # taken out of service: no new reader gets it, its name is gone at once (no start after this
    # process, however it ends, loads it again), the current reader still reads it through the mapping
    assert not m.available
    assert not m.hold()
    assert not os.path.exists(m.path)
    assert bytes(m.buf[:4]) == b"data"
    # retried before the interval: still waiting
    assert m.destroy(now_ms=5999, force_after_ms=5000) is False
    assert bytes(m.buf[:4]) == b"data"
    # the reader goes; the retried delete succeeds
    m.release()
    assert m.destroy(now_ms=6000, force_after_ms=5000) is True
    assert not os.path.exists(m.path)
    assert fd_count(tmp_path) == before


def test_destroy_is_forced_after_the_interval(fio, tmp_path, caplog):
    before = fd_count(tmp_path)
    m = MappedFile.create(fio, str(tmp_path), 0, SIZE)
    assert m.hold()
    view = m.buf[0:16]                    # a view a reader still has
    assert m.destroy(now_ms=1000, force_after_ms=5000) is False
    with caplog.at_level(logging.WARNING, logger="tidemq.store"):
        assert m.destroy(now_ms=6000, force_after_ms=5000) is True
    assert not os.path.exists(m.path)
    assert any("anyway" in r.getMessage() for r in caplog.records)
    # the late reader's view is still safe to touch (no segfault) and its release is harmless
    assert bytes(view) == bytes(16)
    m.release()
    assert m.refs == 0
    del view
    assert fd_count(tmp_path) == before


def test_destroy_timer_starts_at_the_first_call(fio, tmp_path):
    m = MappedFile.create(fio, str(tmp_path), 0, SIZE)
    try:
        assert m.hold()
        assert m.destroy(now_ms=10_000, force_after_ms=1000) is False
        assert m.destroy_first_ms == 10_000
        assert m.destroy(now_ms=10_500, force_after_ms=1000) is False
        assert m.destroy_first_ms == 10_000           # not restarted by a retry
        assert m.destroy(now_ms=11_000, force_after_ms=1000) is True
    finally:
        m.release()


def test_last_release_after_destroy_unmaps(fio, tmp_path):
    before = fd_count(tmp_path)
    m = MappedFile.create(fio, str(tmp_path), 0, SIZE)
    assert m.hold()
    assert m.destroy(0, 60_000) is False
    m.release()
    # unmapped and closed by the release (the name went when it left service); the retried
    # destroy finishes it
    assert m.mapping is None
    assert fd_count(tmp_path) == before
    assert not os.path.exists(m.path)
    assert m.destroy(1, 60_000) is True
    assert not os.path.exists(m.path)


def test_close_keeps_the_file(fio, tmp_path):
    before = fd_count(tmp_path)
    m = MappedFile.create(fio, str(tmp_path), 0, SIZE)
    m.close()
    m.close()                               # twice is harmless
    assert os.path.exists(m.path)
    assert not m.hold()
    assert fd_count(tmp_path) == before
