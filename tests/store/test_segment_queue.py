"""SegmentQueue: ordered segments over one or more directories; load checks;
placement by free space; roll; truncate."""

from __future__ import annotations

import errno
import os

import pytest

from tidemq.io import DiskUsage, OsFileIO
from tidemq.store.mapped_file import segment_name
from tidemq.store.segment_queue import SegmentQueue
from tidemq.store.types import StoreError

from ..support.wait import wait_until

SIZE = 64 * 1024
GB = 1 << 30


class DiskFileIO(OsFileIO):
    """OsFileIO whose disk_usage answers from a table the test controls (by directory)."""

    def __init__(self, free: dict[str, int]) -> None:
        self.free = free

    def disk_usage(self, path: str) -> DiskUsage:
        free = self.free[path]
        return DiskUsage(100 * GB, 100 * GB - free, free)


@pytest.fixture
def queues():
    made: list[SegmentQueue] = []

    def make(*args, **kw) -> SegmentQueue:
        q = SegmentQueue(*args, **kw)
        made.append(q)
        return q

    yield make
    for q in made:
        q.close()


def touch_segment(directory, start: int, size: int = SIZE, data: bytes = b"") -> str:
    os.makedirs(directory, exist_ok=True)
    p = os.path.join(str(directory), segment_name(start))
    with open(p, "wb") as f:
        f.write(data)
        f.truncate(size)
    return p


def test_needs_a_directory():
    with pytest.raises(StoreError):
        SegmentQueue(OsFileIO(), [], SIZE)


def test_empty_queue(queues, tmp_path):
    q = queues(OsFileIO(), [str(tmp_path / "cl")], SIZE, preallocate=False)
    q.load()
    assert os.path.isdir(tmp_path / "cl")
    assert len(q) == 0 and q.first is None and q.last is None
    assert q.min_offset == 0 and q.max_offset == 0
    assert q.find(0) is None


def test_new_segments_follow_each_other_and_find(queues, tmp_path):
    d = str(tmp_path / "cl")
    q = queues(OsFileIO(), [d], SIZE, preallocate=False)
    q.load()
    a = q.new_segment(0)
    b = q.new_segment(SIZE)
    c = q.new_segment(2 * SIZE)
    assert sorted(os.listdir(d)) == [segment_name(0), segment_name(SIZE), segment_name(2 * SIZE)]
    assert all(len(n) == 20 and n.isdigit() for n in os.listdir(d))
    assert q.first is a and q.last is c and len(q) == 3
    assert q.find(0) is a and q.find(SIZE - 1) is a
    assert q.find(SIZE) is b and q.find(3 * SIZE - 1) is c
    assert q.find(3 * SIZE) is None and q.find(-1) is None
    c.wrote_pos = 123
    assert q.min_offset == 0 and q.max_offset == 2 * SIZE + 123
    with pytest.raises(StoreError):
        q.new_segment(5 * SIZE)            # must follow the last one


def test_load_opens_segments_in_order(queues, tmp_path):
    d = tmp_path / "cl"
    for s in (2 * SIZE, 0, SIZE):
        touch_segment(d, s, data=b"seg%d" % s)
    (d / "not-a-segment").write_text("x")
    (d / "00000000000000000000.tmp").write_text("x")
    q = queues(OsFileIO(), [str(d)], SIZE, preallocate=False)
    q.load()
    assert [m.start_offset for m in q.segments] == [0, SIZE, 2 * SIZE]
    assert bytes(q.segments[1].buf[:8]) == b"seg%d" % SIZE
    # loaded segments are mapped but positions are for recovery to set
    assert all(m.wrote_pos == 0 for m in q.segments)


def test_load_over_two_directories(queues, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    touch_segment(a, 0)
    touch_segment(b, SIZE)
    touch_segment(a, 2 * SIZE)
    q = queues(OsFileIO(), [str(a), str(b)], SIZE, preallocate=False)
    q.load()
    assert [(m.start_offset, m.directory) for m in q.segments] == [(0, str(a)), (SIZE, str(b)), (2 * SIZE, str(a))]
    assert q.find(SIZE + 5).directory == str(b)


def test_load_refuses_the_same_name_in_two_directories(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    touch_segment(a, 0)
    touch_segment(a, SIZE)
    touch_segment(b, SIZE)
    q = SegmentQueue(OsFileIO(), [str(a), str(b)], SIZE, preallocate=False)
    try:
        with pytest.raises(StoreError, match=segment_name(SIZE)) as ei:
            q.load()
        assert "two directories" in str(ei.value)
    finally:
        q.close()


def test_load_refuses_a_hole(tmp_path):
    d = tmp_path / "cl"
    touch_segment(d, 0)
    touch_segment(d, 2 * SIZE)
    q = SegmentQueue(OsFileIO(), [str(d)], SIZE, preallocate=False)
    try:
        with pytest.raises(StoreError, match="hole"):
            q.load()
    finally:
        q.close()


def test_load_refuses_a_hole_when_a_directory_is_missing(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    touch_segment(a, 0)
    touch_segment(b, SIZE)
    touch_segment(a, 2 * SIZE)
    q = SegmentQueue(OsFileIO(), [str(a)], SIZE, preallocate=False)   # b forgotten in the config
    try:
        with pytest.raises(StoreError, match="hole"):
            q.load()
    finally:
        q.close()


def test_load_refuses_a_different_segment_size(tmp_path):
    d = tmp_path / "cl"
    touch_segment(d, 0, size=2 * SIZE)
    touch_segment(d, 2 * SIZE, size=2 * SIZE)
    q = SegmentQueue(OsFileIO(), [str(d)], SIZE, preallocate=False)
    try:
        with pytest.raises(StoreError):
            q.load()
    finally:
        q.close()


def test_load_refuses_a_misaligned_name(tmp_path):
    d = tmp_path / "cl"
    touch_segment(d, 100)
    q = SegmentQueue(OsFileIO(), [str(d)], SIZE, preallocate=False)
    try:
        with pytest.raises(StoreError, match="multiple"):
            q.load()
    finally:
        q.close()


def test_load_extends_a_short_last_segment(queues, tmp_path):
    d = tmp_path / "cl"
    touch_segment(d, 0)
    p = touch_segment(d, SIZE, size=100)
    q = queues(OsFileIO(), [str(d)], SIZE, preallocate=False)
    q.load()
    assert len(q) == 2
    assert os.path.getsize(p) == SIZE


def test_placement_picks_the_directory_with_most_free_space(queues, tmp_path):
    a, b, c = str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c")
    fio = DiskFileIO({a: 10 * GB, b: 50 * GB, c: 20 * GB})
    q = queues(fio, [a, b, c], SIZE, preallocate=False)
    q.load()
    assert q.pick_dir() == b
    assert q.new_segment(0).directory == b
    fio.free[a] = 60 * GB
    assert q.new_segment(SIZE).directory == a
    fio.free[c] = 70 * GB
    assert q.new_segment(2 * SIZE).directory == c
    assert os.listdir(b) == [segment_name(0)]
    assert os.listdir(a) == [segment_name(SIZE)]
    assert os.listdir(c) == [segment_name(2 * SIZE)]


def test_placement_is_not_round_robin(queues, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    fio = DiskFileIO({a: 5 * GB, b: 50 * GB})
    q = queues(fio, [a, b], SIZE, preallocate=False)
    q.load()
    for i in range(4):
        assert q.new_segment(i * SIZE).directory == b
    assert os.listdir(a) == []


def test_placement_skips_unwritable_directories(queues, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    fio = DiskFileIO({a: 5 * GB, b: 50 * GB})
    q = queues(fio, [a, b], SIZE, preallocate=False, placement=lambda: [a])
    q.load()
    assert q.new_segment(0).directory == a


def test_no_writable_directory_is_enospc(queues, tmp_path):
    a = str(tmp_path / "a")
    q = queues(DiskFileIO({a: 5 * GB}), [a], SIZE, preallocate=False, placement=lambda: [])
    q.load()
    with pytest.raises(OSError) as ei:
        q.new_segment(0)
    assert ei.value.errno == errno.ENOSPC


def test_no_room_for_a_segment_is_enospc(queues, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    q = queues(DiskFileIO({a: SIZE - 1, b: SIZE // 2}), [a, b], SIZE, preallocate=False)
    q.load()
    with pytest.raises(OSError) as ei:
        q.new_segment(0)
    assert ei.value.errno == errno.ENOSPC
    assert len(q) == 0
    assert os.listdir(a) == [] and os.listdir(b) == []


def test_preallocated_next_segment_is_used(queues, tmp_path):
    d = str(tmp_path / "cl")
    q = queues(OsFileIO(), [d], SIZE, preallocate=True)
    q.load()
    q.new_segment(0)
    wait_until(lambda: q._next is not None, "the next segment to be made ahead")
    premade = q._next
    assert premade.start_offset == SIZE
    assert os.path.exists(os.path.join(d, segment_name(SIZE)))
    assert q.new_segment(SIZE) is premade


def test_preallocated_segment_goes_where_its_own_placement_says(queues, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    fio = DiskFileIO({a: 50 * GB, b: 10 * GB})
    q = queues(fio, [a, b], SIZE, preallocate=True)
    q.load()
    fio.free[b] = 90 * GB
    first = q.new_segment(0)
    assert first.directory == b
    wait_until(lambda: q._next is not None, "the next segment to be made ahead")
    assert q._next.directory == b and q._next.start_offset == SIZE


def test_unused_preallocated_segment_is_removed_at_stop(tmp_path):
    d = str(tmp_path / "cl")
    q = SegmentQueue(OsFileIO(), [d], SIZE, preallocate=True)
    q.load()
    q.new_segment(0)
    wait_until(lambda: q._next is not None, "the next segment to be made ahead")
    q.close()
    assert os.listdir(d) == [segment_name(0)]


def test_truncate_in_the_middle_of_a_segment(queues, tmp_path):
    d = str(tmp_path / "cl")
    q = queues(OsFileIO(), [d], SIZE, preallocate=False)
    q.load()
    segs = [q.new_segment(i * SIZE) for i in range(3)]
    for m in segs[:2]:
        m.buf[:SIZE] = b"\x11" * SIZE
        m.wrote_pos = SIZE
    segs[2].buf[:500] = b"\x22" * 500
    segs[2].wrote_pos = 500
    cut = q.truncate(SIZE + 1000)
    assert cut == (SIZE - 1000) + 500
    assert len(q) == 2
    assert sorted(os.listdir(d)) == [segment_name(0), segment_name(SIZE)]
    assert q.max_offset == SIZE + 1000
    assert segs[1].wrote_pos == segs[1].flushed_pos == 1000
    assert bytes(segs[1].buf[:1000]) == b"\x11" * 1000
    assert bytes(segs[1].buf[1000:]) == bytes(SIZE - 1000)
    with open(os.path.join(d, segment_name(SIZE)), "rb") as f:
        data = f.read()
    assert data[:1000] == b"\x11" * 1000 and data[1000:] == bytes(SIZE - 1000)
    assert bytes(segs[0].buf[:SIZE]) == b"\x11" * SIZE          # earlier segment untouched
    # the log goes on from the cut
    assert q.new_segment(2 * SIZE).start_offset == 2 * SIZE


def test_truncate_at_a_segment_start_keeps_it_empty(queues, tmp_path):
    d = str(tmp_path / "cl")
    q = queues(OsFileIO(), [d], SIZE, preallocate=False)
    q.load()
    segs = [q.new_segment(i * SIZE) for i in range(3)]
    for m in segs:
        m.buf[:100] = b"\x33" * 100
        m.wrote_pos = SIZE
    q.truncate(SIZE)
    assert [m.start_offset for m in q.segments] == [0, SIZE]
    assert q.max_offset == SIZE
    assert bytes(segs[1].buf[:100]) == bytes(100)


def test_truncate_at_the_end_changes_nothing(queues, tmp_path):
    d = str(tmp_path / "cl")
    q = queues(OsFileIO(), [d], SIZE, preallocate=False)
    q.load()
    m = q.new_segment(0)
    m.buf[:10] = b"0123456789"
    m.wrote_pos = 10
    assert q.truncate(10) == 0
    assert bytes(m.buf[:10]) == b"0123456789"
    assert q.max_offset == 10


def test_remove_head(queues, tmp_path):
    d = str(tmp_path / "cl")
    q = queues(OsFileIO(), [d], SIZE, preallocate=False)
    q.load()
    segs = [q.new_segment(i * SIZE) for i in range(3)]
    q.remove_head(segs[1])            # not the head: ignored
    assert len(q) == 3
    q.remove_head(segs[0])
    segs[0].destroy(0, 0)
    assert q.min_offset == SIZE
    assert q.find(0) is None
    assert q.find(SIZE) is segs[1] and q.find(2 * SIZE + 7) is segs[2]
