"""SegmentWarmer: pages populated ahead of the writer, into the pre-made next segment, never
past what exists; off by setting; madvise failures fall back; segments deleted or the log cut
back meanwhile; a nearly full tmpfs.

Most tests drive ``warm_once()`` directly (no thread) over a real SegmentQueue, with a FileIO
that records what it was asked to populate."""

from __future__ import annotations

import errno
import mmap
import os

import pytest

from tidemq.config import KIB, MIB
from tidemq.io import MADV_POPULATE_WRITE, OsFileIO
from tidemq.store import Message, PutStatus, StoreConfig
from tidemq.store.segment_queue import SegmentQueue
from tidemq.store.warmer import BLOCKED_WAIT_S, SegmentWarmer
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.wait import patience, wait_until


SEG = 256 * KIB
AHEAD = 64 * KIB
CHUNK = 16 * KIB


class RecordingFileIO(OsFileIO):
    """OsFileIO that records every populate (segment path is not known here: offsets and lengths)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def populate(self, mapping, offset: int, length: int) -> int:
        self.calls.append((offset, length))
        return super().populate(mapping, offset, length)


@pytest.fixture
def queue(tmp_path):
    made: list[SegmentQueue] = []

    def make(fio=None, preallocate=False) -> SegmentQueue:
        q = SegmentQueue(fio or RecordingFileIO(), [str(tmp_path / "cl")], SEG, preallocate=preallocate)
        q.load()
        made.append(q)
        return q

    yield make
    for q in made:
        q.close()


def wait_premade(q: SegmentQueue) -> None:
    wait_until(lambda: q._next is not None, f"the next segment to be made ahead ({q.last_alloc_error})")


def test_runs_ahead_of_the_writer_and_stops_at_the_segment_end(queue):
    q = queue()
    mf = q.new_segment(0)
    w = SegmentWarmer(q, q.fio, AHEAD, CHUNK)
    assert w.warm_once() == AHEAD
    assert q.fio.calls == [(0, CHUNK), (CHUNK, CHUNK), (2 * CHUNK, CHUNK), (3 * CHUNK, CHUNK)]
    assert w.warmed_to == AHEAD and w.wake_offset == AHEAD // 2
    assert w.warm_once() == 0                   # nothing moved: nothing to do
    mf.wrote_pos = AHEAD // 2 + 100             # the writer used half the window: top it up
    assert w.warm_once() == AHEAD // 2
    assert w.overtaken_total == 0
    mf.wrote_pos = SEG - 10 * KIB               # the writer jumped past the warm pages
    q.fio.calls.clear()
    assert w.warm_once() == 12 * KIB            # the page it is in, to the end: no next segment
    assert q.fio.calls == [(SEG - 12 * KIB, 12 * KIB)]
    assert w.overtaken_total == 1 and w.overtaken_bytes_total == SEG - 10 * KIB - (AHEAD + AHEAD // 2)
    assert w.warmed_to == SEG and w._wait_s == BLOCKED_WAIT_S
    assert w.stats()["bytes_warmed_total"] == AHEAD + AHEAD // 2 + 12 * KIB


def test_window_goes_on_into_the_premade_segment(queue):
    q = queue(preallocate=True)
    mf = q.new_segment(0)
    wait_premade(q)
    nxt = q._next
    mf.wrote_pos = SEG - 16 * KIB
    w = SegmentWarmer(q, q.fio, AHEAD, CHUNK)
    w.warm_once()
    assert w.warmed_to == SEG - 16 * KIB + AHEAD
    assert q.fio.calls == [(SEG - 16 * KIB, CHUNK), (0, CHUNK), (CHUNK, CHUNK), (2 * CHUNK, CHUNK)]
    mf.wrote_pos = SEG                          # roll: the pre-made segment becomes the active one
    assert q.new_segment(SEG) is nxt
    nxt.wrote_pos = 40 * KIB
    w.warm_once()
    assert w.warmed_to == SEG + 40 * KIB + AHEAD and w.overtaken_total == 0


def test_an_empty_log_waits_for_the_first_append(queue):
    q = queue()
    w = SegmentWarmer(q, q.fio, AHEAD, CHUNK)
    assert w.warm_once() == 0 and q.fio.calls == [] and w._wait_s > BLOCKED_WAIT_S
    assert w.wake_offset <= 0                   # the first append wakes it
    q.new_segment(0)
    assert w.warm_once() == AHEAD


def test_ahead_is_at_most_a_segment_and_page_aligned(queue):
    q = queue()
    assert SegmentWarmer(q, q.fio, 10 * MIB).ahead_bytes == SEG
    assert SegmentWarmer(q, q.fio, 5000).ahead_bytes == 4096


def test_a_sealed_segment_is_skipped(queue):
    q = queue()
    mf = q.new_segment(0)
    mf.wrote_pos = SEG                          # full (sealed early, or the writer is about to roll)
    w = SegmentWarmer(q, q.fio, AHEAD, CHUNK)
    assert w.warm_once() == 0 and q.fio.calls == []


def test_a_segment_deleted_meanwhile_is_skipped(queue):
    q = queue()
    mf = q.new_segment(0)
    mf.destroy(0, 0)
    w = SegmentWarmer(q, q.fio, AHEAD, CHUNK)
    assert w.warm_once() == 0 and q.fio.calls == [] and w.errors_total == 0


def test_a_segment_deleted_while_being_warmed(queue, tmp_path):
    """A forced delete in the middle of a populate: the unmap waits for the call (the mapping
    is exported during it), the file goes, the next pass skips the segment."""
    q = queue()
    mf = q.new_segment(0)

    class DeletingFileIO(RecordingFileIO):
        def populate(self, mapping, offset, length):
            if offset == CHUNK:
                assert mf.destroy(0, 0)         # forced: the warmer holds it
                assert not os.path.exists(mf.path)
            return super().populate(mapping, offset, length)

    fio = DeletingFileIO()
    w = SegmentWarmer(q, fio, AHEAD, CHUNK)
    w.warm_once()
    assert fio.calls[:2] == [(0, CHUNK), (CHUNK, CHUNK)]
    assert mf.mapping is None and not mf.available
    before = len(fio.calls)
    w.warmed_to = CHUNK * 2
    w.warm_once()                               # hold() refuses: skipped, not populated
    assert len(fio.calls) == before


def test_log_cut_back_restarts_the_window(queue):
    q = queue()
    mf = q.new_segment(0)
    mf.wrote_pos = 100 * KIB
    w = SegmentWarmer(q, q.fio, AHEAD, CHUNK)
    w.warm_once()
    assert w.warmed_to == 100 * KIB - 100 * KIB % 4096 + AHEAD
    q.truncate(0)                               # recovery-like cut back to the start
    q.fio.calls.clear()
    w.warm_once()
    assert w.warmed_to == AHEAD and q.fio.calls[0] == (0, CHUNK) and w.overtaken_total == 0


def test_populate_errors_skip_the_chunk_and_are_counted(queue):
    q = queue()
    q.new_segment(0)

    class Efault(RecordingFileIO):
        def populate(self, mapping, offset, length):
            if offset == 0:
                raise OSError(errno.EFAULT, "Bad address")
            return super().populate(mapping, offset, length)

    w = SegmentWarmer(q, Efault(), AHEAD, CHUNK)
    assert w.warm_once() == AHEAD - CHUNK
    st = w.stats()
    assert st["errors_total"] == 1 and "Bad address" in st["last_error"] and w.warmed_to == AHEAD


class NoPopulateWrite(OsFileIO):
    """A kernel before 5.14: MADV_POPULATE_WRITE is EINVAL (the probe too)."""

    willneed_errno = 0

    def __init__(self) -> None:
        self.advice: list[int] = []

    def _madvise(self, address, length, advice):
        self.advice.append(advice)
        if advice == MADV_POPULATE_WRITE:
            return errno.EINVAL
        return self.willneed_errno or super()._madvise(address, length, advice)


def test_madvise_einval_falls_back_to_willneed(queue):
    fio = NoPopulateWrite()
    q = queue(fio)
    q.new_segment(0)
    w = SegmentWarmer(q, fio, AHEAD, CHUNK)
    assert w.warm_once() == AHEAD
    assert fio.populate_mode == "willneed" and w.stats()["populate_mode"] == "willneed"
    # the first call found out (probe included), the others use MADV_WILLNEED straight away
    assert fio.advice == [MADV_POPULATE_WRITE, MADV_POPULATE_WRITE] + [mmap.MADV_WILLNEED] * 4


def test_no_advice_works_turns_warming_off(queue):
    fio = NoPopulateWrite()
    fio.willneed_errno = errno.ENOSYS
    q = queue(fio)
    q.new_segment(0)
    w = SegmentWarmer(q, fio, AHEAD, CHUNK)
    assert w.warm_once() == 0
    assert fio.populate_mode == "none" and w.unsupported and not w.stats()["enabled"]


def test_einval_where_the_advice_works_is_an_error_not_a_fallback(tmp_path):
    class EinvalOnce(OsFileIO):
        def _madvise(self, address, length, advice):
            return errno.EINVAL if length > 4096 else super()._madvise(address, length, advice)

    fio = EinvalOnce()
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    os.posix_fallocate(fd, 0, 2 * 4096)
    mm = mmap.mmap(fd, 2 * 4096)
    try:
        with pytest.raises(OSError) as e:
            fio.populate(mm, 0, 2 * 4096)
        assert e.value.errno == errno.EINVAL and fio.populate_mode == "madvise"
    finally:
        mm.close()
        os.close(fd)


# Through the store ---------------------------------------------------------------------------
def small(tmp_path, **kw) -> StoreConfig:
    values = dict(root_dir=str(tmp_path / "store"), auto_create_topics=True, segment_size_bytes=SEG, index_enabled=False,
                  preallocate_next_segment=True, commitlog_warm_enabled=True, commitlog_warm_ahead_mib=1,
                  consume_queue_units_per_segment=1024)
    values.update(kw)
    return StoreConfig(**values)


def fill(store, n: int, body: bytes = b"x" * 1000) -> None:
    for _ in range(n):
        rs = store.put_batch([Message(topic="T", body=body) for _ in range(16)])
        assert all(r.status is PutStatus.PUT_OK for r in rs), rs[-1]


def test_the_store_warms_in_the_background_and_stops(tmp_path, open_store):
    s = open_store(small(tmp_path))
    fill(s, 40)                                 # ~650 KiB: rolls twice
    # the writer stops: the warmer gets a whole window ahead of the log's end (into the pre-made segment)
    wait_until(lambda: s.stats()["warm"]["warm_ahead_bytes"] > SEG - 4096, "the warmer to run a window ahead")
    st = s.stats()["warm"]
    assert st["bytes_warmed_total"] >= SEG - 4096
    assert st["enabled"] and st["populate_mode"] == "madvise" and st["errors_total"] == 0
    assert st["ahead_bytes"] == SEG             # 1 MiB asked, a segment at most
    report = s.check()
    assert report.ok, report.problems
    thread = s.warmer._thread
    s.shutdown()
    assert not thread.is_alive()


@pytest.mark.parametrize("explicit", [True, False])
def test_disabled_and_off_by_default(tmp_path, open_store, explicit):
    cfg = (small(tmp_path, commitlog_warm_enabled=False) if explicit else
           StoreConfig(root_dir=str(tmp_path / "store"), auto_create_topics=True, segment_size_bytes=SEG))
    s = open_store(cfg)
    fill(s, 4)
    assert s.warmer is None and s.commit_log.warmer is None
    assert s.stats()["warm"] == {"enabled": False}


def test_in_memory_file_io_turns_it_off(tmp_path, open_store):
    s = open_store(small(tmp_path, root_dir="/store"), fio=FaultyFileIO())
    fill(s, 4)
    s.warmer._thread.join(patience())            # it stops by itself: nothing to populate
    assert not s.warmer._thread.is_alive()
    assert s.warmer.unsupported and s.stats()["warm"]["populate_mode"] == "none"


def test_populate_on_a_full_tmpfs_fails_cleanly(env):
    """A page that cannot be backed (a hole of a sparse file on a full tmpfs) is an errno, not
    SIGBUS; a fallocated range populates on the same full tmpfs (segments are fallocated)."""
    d = env.tmpfs("full", 2)
    fio = OsFileIO()
    fd = os.open(os.path.join(d, "segment"), os.O_RDWR | os.O_CREAT, 0o644)
    sparse = os.open(os.path.join(d, "sparse"), os.O_RDWR | os.O_CREAT, 0o644)
    maps = []
    try:
        os.posix_fallocate(fd, 0, 256 * KIB)
        os.ftruncate(sparse, 1 * MIB)
        with open(os.path.join(d, "fill"), "wb") as f:
            with pytest.raises(OSError):
                f.write(b"x" * 2 * MIB)
        maps = [mmap.mmap(fd, 256 * KIB), mmap.mmap(sparse, 1 * MIB)]
        with pytest.raises(OSError) as e:
            fio.populate(maps[1], 0, 1 * MIB)
        assert e.value.errno in (errno.EFAULT, errno.ENOMEM, errno.ENOSPC)
        assert fio.populate(maps[0], 0, 256 * KIB) == 256 * KIB
        willneed = OsFileIO()
        willneed.populate_mode = "willneed"     # the fallback never touches a page either
        assert willneed.populate(maps[1], 0, 1 * MIB) == 1 * MIB
    finally:
        for m in maps:
            m.close()
        os.close(fd)
        os.close(sparse)


def test_store_on_a_nearly_full_tmpfs(env, tmp_path):
    """Writing a tmpfs to its end with warming on: segments are fallocated, so warming never
    fails there; puts are refused when no segment can be made, nothing crashes, all is readable."""
    d = env.tmpfs("cl", 2)
    s = env.open(small(tmp_path, commitlog_dirs=(d,), disk_space_warning_level_percent=90))
    ok = 0
    for _ in range(200):
        rs = s.put_batch([Message(topic="T", body=b"y" * 1000) for _ in range(16)])
        ok += sum(r.status is PutStatus.PUT_OK for r in rs)
        if rs[-1].status is not PutStatus.PUT_OK:
            break
    else:
        pytest.fail("a 2 MiB tmpfs took 3 MiB of messages")
    assert ok > 0
    st = s.stats()["warm"]
    assert st["errors_total"] == 0, st["last_error"]
    assert s.get("g", "T", 0, 0, 32).status.name == "FOUND"
