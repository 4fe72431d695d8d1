"""The commit log through MessageStore with 64 KiB segments: roll with a BLANK
record, records never span segments, reads across segment boundaries, read by
commit-log offset."""

from __future__ import annotations

import errno
import os
import struct
import zlib

import pytest

from tidemq.io import DiskUsage, OsFileIO
from tidemq.record import codec
from tidemq.store import GetStatus, Message, PutReason, PutStatus
from tidemq.record.codec import FIXED_OVERHEAD, REC_BLANK, REC_OK, check_record, record_size
from tidemq.store.mapped_file import segment_name
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import memory_config, slices, topic_messages

SEG = 64 * 1024
# tidemq appends a record CRC to every record's properties (see codec.py)
TAIL = len(getattr(codec, "RECORD_CRC_TAIL", b""))
BLANK_MAGIC_BYTES = bytes.fromhex("CBD43194")


def body_for(i: int, n: int) -> bytes:
    return (b"%08d|" % i * (n // 9 + 1))[:n]


@pytest.fixture
def s(make_config, open_store):
    return open_store(make_config(segment_size_bytes=SEG))


def fill(store, count: int, size: int, topic: str = "T", queue_id: int = 0):
    rs = store.put_batch([Message(topic, body_for(i, size), queue_id=queue_id) for i in range(count)])
    assert all(r.status is PutStatus.PUT_OK for r in rs), rs
    return rs


def test_records_are_contiguous_within_a_segment(s):
    rs = fill(s, 10, 100)
    expected = 0
    for r in rs:
        assert r.commitlog_offset == expected
        assert r.size == record_size(100, 1, TAIL) == FIXED_OVERHEAD + 100 + 1 + TAIL
        expected += r.size
    assert s.commitlog_max_offset == expected
    assert s.commitlog_min_offset == 0


def test_roll_writes_a_blank_record_and_continues_at_the_next_segment(s, make_config):
    rs = fill(s, 200, 1000)          # ~200 KB: several segments
    assert len(s.segments) >= 3
    rec = rs[0].size
    per_seg = (SEG - 8) // rec                    # records that fit, keeping 8 bytes for BLANK
    first_in_seg1 = rs[per_seg]
    assert first_in_seg1.commitlog_offset == SEG
    last_in_seg0 = rs[per_seg - 1]
    blank_at = last_in_seg0.commitlog_offset + last_in_seg0.size
    remaining = SEG - blank_at
    assert 8 <= remaining < rec + 8
    # the bytes of the BLANK record, in memory and on disk after shutdown
    seg0 = s.segments.segments[0]
    assert bytes(seg0.buf[blank_at:blank_at + 8]) == struct.pack(">i", remaining) + BLANK_MAGIC_BYTES
    assert check_record(seg0.buf, blank_at, SEG) == (REC_BLANK, remaining)
    path0 = seg0.path
    s.shutdown()
    with open(path0, "rb") as f:
        raw = f.read()
    assert len(raw) == SEG
    assert raw[blank_at:blank_at + 4] == struct.pack(">i", remaining)
    assert raw[blank_at + 4:blank_at + 8] == BLANK_MAGIC_BYTES
    assert os.path.basename(path0) == segment_name(0)


def test_no_record_spans_two_segments(s):
    sizes = [37, 1500, 9000, 3, 20000, 777, 12345, 64, 30000, 5]
    msgs = [Message("T", body_for(i, sizes[i % len(sizes)]), queue_id=0) for i in range(60)]
    rs = s.put_batch(msgs)
    assert all(r.ok for r in rs)
    for r in rs:
        assert r.commitlog_offset // SEG == (r.commitlog_offset + r.size - 1) // SEG, r
        # a record is followed either by the next record or by a BLANK that ends its segment
    for a, b in zip(rs, rs[1:]):
        end = a.commitlog_offset + a.size
        if b.commitlog_offset != end:
            assert b.commitlog_offset % SEG == 0
            mf = s.segments.find(a.commitlog_offset)
            pos = end - mf.start_offset
            assert bytes(mf.buf[pos + 4:pos + 8]) == BLANK_MAGIC_BYTES
            assert struct.unpack_from(">i", mf.buf, pos)[0] == SEG - pos
    # every segment but the last ends with a BLANK
    for mf in s.segments.segments[:-1]:
        assert mf.wrote_pos == SEG
    assert s.check().ok


def test_record_exactly_filling_a_segment_leaves_an_8_byte_blank(s):
    body_len = SEG - 8 - FIXED_OVERHEAD - 1 - TAIL      # topic "T", no user properties
    r1 = s.put(Message("T", b"\xab" * body_len, queue_id=0))
    assert r1.ok and r1.commitlog_offset == 0 and r1.size == SEG - 8
    r2 = s.put(Message("T", b"next", queue_id=0))
    assert r2.ok and r2.commitlog_offset == SEG
    seg0 = s.segments.segments[0]
    assert bytes(seg0.buf[SEG - 8:SEG]) == struct.pack(">i", 8) + BLANK_MAGIC_BYTES
    g = s.get("G", "T", 0, 0)
    assert [m.body for m in g.messages] == [b"\xab" * body_len, b"next"]


def test_record_larger_than_a_segment_is_refused(s):
    body_len = SEG - 8 - FIXED_OVERHEAD - 1 - TAIL + 1
    before = s.commitlog_max_offset
    r = s.put(Message("T", b"x" * body_len, queue_id=0))
    assert r.status is PutStatus.MESSAGE_ILLEGAL
    assert r.commitlog_offset == -1
    assert s.commitlog_max_offset == before
    assert s.max_offset("T", 0) == 0


def test_batch_that_crosses_a_boundary(s):
    first = fill(s, 40, 1000)
    assert all(r.commitlog_offset < SEG for r in first)
    rs = fill(s, 40, 1000)        # the second batch crosses the boundary to segment 1
    offs = [r.commitlog_offset for r in rs]
    assert offs == sorted(offs)
    assert any(o < SEG for o in offs) and any(o >= SEG for o in offs)
    assert [r.queue_offset for r in rs] == list(range(40, 80))


def test_reads_across_segment_boundaries(s):
    rs = fill(s, 150, 1000)
    boundary = next(i for i, r in enumerate(rs) if r.commitlog_offset >= SEG)
    start = boundary - 10
    g = s.get("G", "T", 0, start, max_count=20)
    assert g.status is GetStatus.FOUND
    assert [m.queue_offset for m in g.messages] == list(range(start, start + 20))
    assert [m.body for m in g.messages] == [body_for(i, 1000) for i in range(start, start + 20)]
    assert g.messages[9].commitlog_offset < SEG <= g.messages[10].commitlog_offset
    # and the whole queue reads back in order, page by page
    got = []
    off = 0
    while True:
        g = s.get("G", "T", 0, off)
        if g.status is not GetStatus.FOUND:
            assert g.status is GetStatus.OFFSET_OVERFLOW_ONE
            break
        got += [m.body for m in g.messages]
        off = g.next_offset
    assert got == [body_for(i, 1000) for i in range(150)]


def test_get_by_commitlog_offset(s):
    rs = fill(s, 100, 1000)
    for i in (0, 1, 63, 64, 65, 99):
        r = rs[i]
        m = s.get_by_commitlog_offset(r.commitlog_offset)
        assert m is not None
        assert m.commitlog_offset == r.commitlog_offset
        assert m.queue_offset == r.queue_offset == i
        assert m.body == body_for(i, 1000)
        assert m.body_crc == zlib.crc32(m.body) & 0x7FFFFFFF
        m2 = s.get_by_commitlog_offset(r.commitlog_offset, r.size)
        assert m2 is not None and m2.body == m.body


def test_get_by_commitlog_offset_outside_records(s):
    rs = fill(s, 100, 1000)
    last = rs[-1]
    assert s.get_by_commitlog_offset(last.commitlog_offset + last.size) is None   # the log's end
    assert s.get_by_commitlog_offset(10 * SEG) is None                            # no such segment
    assert s.get_by_commitlog_offset(-1) is None
    # the BLANK at the end of segment 0 is not a message
    seg0_last = [r for r in rs if r.commitlog_offset < SEG][-1]
    assert s.get_by_commitlog_offset(seg0_last.commitlog_offset + seg0_last.size) is None
    # a size that runs past the written data is refused
    assert s.get_by_commitlog_offset(last.commitlog_offset, last.size + 1) is None


def test_data_survives_restart_across_segments(make_config, open_store):
    cfg = make_config(segment_size_bytes=SEG)
    s1 = open_store(cfg)
    rs = fill(s1, 150, 1000)
    end = s1.commitlog_max_offset
    s1.shutdown()
    s2 = open_store(cfg)
    assert s2.commitlog_max_offset == end
    assert s2.max_offset("T", 0) == 150
    for r in (rs[0], rs[70], rs[-1]):
        assert s2.get_by_commitlog_offset(r.commitlog_offset).queue_offset == r.queue_offset
    r = s2.put(Message("T", b"after restart", queue_id=0))
    assert r.ok and r.commitlog_offset == end and r.queue_offset == 150
    assert s2.check().ok


def test_iter_records_walks_records_and_blanks(s):
    rs = fill(s, 100, 1000)
    kinds = [(k, off) for k, off, _size, _mf, _pos in s.commit_log.iter_records(0)]
    oks = [off for k, off in kinds if k == REC_OK]
    assert oks == [r.commitlog_offset for r in rs]
    blanks = [off for k, off in kinds if k == REC_BLANK]
    assert len(blanks) == len(s.segments) - 1


class NoRoomFileIO(OsFileIO):
    """Reports a full disk once ``full`` is set."""

    full = False

    def disk_usage(self, path):
        u = super().disk_usage(path)
        return DiskUsage(u.total_bytes, u.total_bytes, 0) if self.full else u


def test_segment_that_cannot_be_created_fails_the_put_cleanly(make_config, open_store):
    fio = NoRoomFileIO()
    s = open_store(make_config(segment_size_bytes=SEG), fio=fio)
    rec = s.put(Message("T", body_for(0, 1000), queue_id=0)).size
    per_seg = (SEG - 8) // rec
    first = fill(s, per_seg - 4, 1000)        # segment 0 is nearly full
    n0 = per_seg - 3
    fio.full = True
    rs = s.put_batch([Message("T", body_for(n0 + i, 1000), queue_id=0) for i in range(10)])
    ok = [r for r in rs if r.ok]
    failed = [r for r in rs if not r.ok]
    assert failed, "the roll should have failed"
    assert len(ok) == 3
    # no room for a segment is a refusal (clients retry elsewhere), saying the disk is full
    assert all(r.status is PutStatus.SERVICE_NOT_AVAILABLE for r in failed)
    assert all("disk full" in r.error for r in failed)
    assert rs[:len(ok)] == ok                 # the ones that fitted went first
    assert s.max_offset("T", 0) == n0 + 3
    assert len(s.segments) == 1
    fio.full = False
    s.check_disk()            # what the disk-check service does every second: the full flag clears
    r = s.put(Message("T", b"later", queue_id=0))
    assert r.ok and r.commitlog_offset == SEG
    assert r.queue_offset == n0 + 3                # the failed ones did not use queue offsets
    g = s.get("G", "T", 0, n0, max_count=100)
    assert [m.body for m in g.messages] == [body_for(n0 + i, 1000) for i in range(3)] + [b"later"]
    assert s.check().ok
    assert first[0].ok


def test_roll_with_preallocation(make_config, open_store):
    cfg = make_config(segment_size_bytes=SEG, preallocate_next_segment=True)
    s = open_store(cfg)
    rs = fill(s, 200, 1000)
    starts = [mf.start_offset for mf in s.segments.segments]
    assert starts == [i * SEG for i in range(len(starts))]
    assert len(starts) >= 3
    assert rs[-1].commitlog_offset // SEG == len(starts) - 1
    assert s.check().ok
    s.shutdown()
    # an unused pre-made segment is not left behind as part of the log
    names = sorted(n for n in os.listdir(cfg.commitlog_paths[0]) if n.isdigit())   # .tidemq-dir is the marker
    assert names == [segment_name(x) for x in starts]
    s2 = open_store(cfg)
    assert s2.max_offset("T", 0) == 200
    r = s2.put(Message("T", b"more", queue_id=0))
    assert r.ok and r.queue_offset == 200
    assert s2.check().ok


def test_restart_after_a_segment_filled_exactly(make_config, open_store):
    cfg = make_config(segment_size_bytes=SEG)
    s = open_store(cfg)
    body_len = SEG - 8 - FIXED_OVERHEAD - 1 - TAIL
    assert s.put(Message("T", b"\x01" * body_len, queue_id=0)).size == SEG - 8
    s.shutdown()
    s2 = open_store(cfg)
    assert s2.commitlog_max_offset == SEG - 8
    r = s2.put(Message("T", b"next", queue_id=0))
    assert r.ok and r.commitlog_offset == SEG and r.queue_offset == 1
    assert bytes(s2.segments.segments[0].buf[SEG - 8:SEG]) == struct.pack(">i", 8) + BLANK_MAGIC_BYTES
    assert [m.body[:1] for m in s2.get("G", "T", 0, 0).messages] == [b"\x01", b"n"]
    assert s2.check().ok


def test_the_last_segment_in_a_readonly_directory_is_not_written(stores):
    """readonly_commitlog_dirs are read, never written: when the log's last segment lies in one,
    the next append starts a segment in a writable directory."""
    fio = FaultyFileIO()
    s = stores(memory_config(commitlog_dirs=("/old",)), fio)
    assert s.put(Message("T", b"a")).ok
    s.shutdown()
    s = stores(memory_config(commitlog_dirs=("/new",), readonly_commitlog_dirs=("/old",)), fio)
    r = s.put(Message("T", b"b"))
    assert r.ok
    assert s.segments.find(r.commitlog_offset).directory == "/new"


# Batches are written with pwrite ---------------------------------------------------------------

class CommitLogWrites(FaultyFileIO):
    """Records the commit log's pwrites (offset, length); ``tear_at`` (bytes): the next one is torn
    there by a crash (FaultyFileIO.crash_after(torn_bytes=))."""

    def __init__(self) -> None:
        super().__init__()
        self.log_writes: list[tuple[int, int]] = []
        self.tear_at: int | None = None

    def pwrite(self, handle, data, offset):
        if "/commitlog/" in handle.path and os.path.basename(handle.path).isdigit():    # a segment
            self.log_writes.append((offset, len(data)))
            if self.tear_at is not None:
                self.crash_after(1, torn_bytes=self.tear_at)
        return super().pwrite(handle, data, offset)


def log_bodies(s, topic="T"):
    """Every body of ``topic``, every queue, in log order."""
    return [b for _, b in topic_messages(s, topic)]


def test_a_batch_is_one_pwrite_a_single_put_goes_into_the_mapping(stores):
    fio = CommitLogWrites()
    s = stores(memory_config(), fio)
    rs = s.put_batch([Message("T", body_for(i, 300)) for i in range(20)])
    end = rs[-1].commitlog_offset + rs[-1].size
    assert fio.log_writes == [(0, end)]
    assert s.put(Message("T", b"one")).ok
    assert fio.log_writes == [(0, end)], "a single put is copied into the mapping"
    assert log_bodies(s) == [body_for(i, 300) for i in range(20)] + [b"one"]   # read through the mapping
    assert s.check().ok


@pytest.mark.parametrize("path", ["put_batch", "put_slices"])
def test_a_batch_bigger_than_the_buffer_goes_in_several_pwrites(stores, monkeypatch, path):
    from tidemq.store import commit_log
    monkeypatch.setattr(commit_log, "SCRATCH_BYTES", 2048)
    monkeypatch.setattr(commit_log, "SCRATCH_BYTES_MAX", 4096)
    fio = CommitLogWrites()
    s = stores(memory_config(), fio)                       # 32 KiB segments
    sizes = [100, 3000, 9000, 50, 5000, 700]               # records bigger than the buffer too
    msgs = [Message("T", body_for(i, sizes[i % len(sizes)])) for i in range(30)]
    if path == "put_batch":
        rs = s.put_batch(msgs)
    else:                                                  # the SendRecords path
        rs = s.put_slices("T", *slices([b"i%d" % i for i in range(30)], [m.body for m in msgs]))
    assert all(r.ok for r in rs)
    assert len(fio.log_writes) > 3 and len(s.segments) > 1
    assert log_bodies(s) == [m.body for m in msgs]
    assert [r.queue_offset for r in rs] == list(range(30))
    assert s.check().ok
    s.shutdown()
    s = stores(memory_config(), fio)
    assert log_bodies(s) == [m.body for m in msgs]


@pytest.mark.parametrize("tear_at", [0, 1, 200, 1000, 5000])
@pytest.mark.parametrize("crash", ["kill", "power"])
def test_a_crash_in_the_middle_of_a_pwritten_batch_cuts_only_the_torn_tail(stores, tear_at, crash):
    """The records of an unacknowledged batch are torn by the crash: nothing damaged is served,
    recovery cuts the log only after the last whole record, what was flushed stays."""
    import random
    from tidemq.testing.faulty_io import SimulatedCrash
    fio = CommitLogWrites()
    cfg = memory_config(segment_size_bytes=64 * 1024)
    s = stores(cfg, fio)
    first = [Message("T", b"a%03d" % i + b"x" * 400) for i in range(30)]
    assert all(r.ok for r in s.put_batch(first))
    flushed = s.commit_log.flush()
    s.flush_queues()
    fio.tear_at = tear_at
    with pytest.raises(SimulatedCrash):
        s.put_batch([Message("T", b"b%03d" % i + b"y" * 400) for i in range(30)])
    s.kill()
    fio = fio.after_crash() if crash == "kill" else fio.after_power_loss(random.Random(tear_at))
    s = stores(cfg, fio)
    got = log_bodies(s)
    assert got[:30] == [m.body for m in first]
    record = FIXED_OVERHEAD + 404 + 1 + TAIL
    whole = tear_at // record if crash == "kill" else len(got) - 30     # whole records of the torn batch
    assert got[30:] == [b"b%03d" % i + b"y" * 400 for i in range(whole)], "only whole records, in order"
    assert s.commit_log.max_offset == flushed + whole * record, "the log ends after the last whole record"
    assert s.check().ok
    r = s.put(Message("T", b"after"))
    assert r.ok and r.queue_offset == 30 + whole
    assert log_bodies(s)[-1] == b"after"


@pytest.mark.parametrize("err", [errno.ENOSPC])
@pytest.mark.parametrize("written", [0, 700, 5000])
def test_a_failed_pwrite_refuses_the_batch_and_leaves_nothing_of_it(stores, err, written):
    """ENOSPC on the commit log's pwrite: the batch is refused with a typed outcome (disk full:
    SERVICE_NOT_AVAILABLE / DISK_FULL), every acknowledged message is kept, the refused ones took no
    queue offset, round-robin slot or consume-queue unit, and what part of them reached the file is
    wiped (not found after a crash). (Any other error of a pwrite is a failure of the log, final for
    what the last flush did not cover: tests/store/test_log_failure.py.)"""
    fio = CommitLogWrites()
    cfg = memory_config(topic_queues_default=3, segment_size_bytes=64 * 1024)
    s = stores(cfg, fio)
    acked = [Message("T", b"a%03d" % i + b"x" * 300) for i in range(10)]
    ok = s.put_batch(acked)
    assert all(r.ok for r in ok)
    fio.fail("pwrite", err, path_contains="/commitlog/", written=written)
    rs = s.put_batch([Message("T", b"n%03d" % i + b"x" * 300) for i in range(20)])
    reason = PutReason.DISK_FULL if err == errno.ENOSPC else PutReason.WRITE_ERROR
    assert [r.reason for r in rs] == [reason] * 20
    assert all(r.status is reason.status and "commit log" in r.error for r in rs)
    assert log_bodies(s) == [m.body for m in acked]
    assert [s.max_offset("T", q) for q in range(3)] == [4, 3, 3]
    again = [Message("T", b"c%03d" % i + b"x" * 300) for i in range(4)]
    rs = s.put_batch(again)
    assert [(r.ok, r.queue_id, r.queue_offset) for r in rs] == [(True, 1, 3), (True, 2, 3), (True, 0, 4),
                                                                (True, 1, 4)], "round-robin goes on where it was"
    assert rs[0].commitlog_offset == ok[-1].commitlog_offset + ok[-1].size
    assert log_bodies(s) == [m.body for m in acked + again]
    assert s.check().ok
    s.kill()
    s = stores(cfg, fio.after_crash())
    assert log_bodies(s) == [m.body for m in acked + again], "nothing of the refused batch came back"
    assert s.check().ok


def test_a_failed_pwrite_of_slices_refuses_the_batch_and_undoes_it(stores):
    """The SendRecords path (put_slices) on the same failure: refused, its queue offsets,
    round-robin slots, units and index items taken back, the next batch goes on where it was."""
    fio = CommitLogWrites()
    cfg = memory_config(topic_queues_default=3, segment_size_bytes=64 * 1024, index_enabled=True)
    s = stores(cfg, fio)
    ok = s.put_slices("T", *slices([b"a%d" % i for i in range(5)], [b"a%03d" % i + b"x" * 300 for i in range(5)]))
    assert all(r.ok for r in ok)
    fio.fail("pwrite", errno.ENOSPC, path_contains="/commitlog/", written=700)
    ids = [b"n%d" % i for i in range(8)]
    rs = s.put_slices("T", *slices(ids, [b"n" * 300] * 8, keys=[b"key"] * 8))
    assert [r.reason for r in rs] == [PutReason.DISK_FULL] * 8
    assert [s.max_offset("T", q) for q in range(3)] == [2, 2, 1]
    assert s.query_by_key("T", "n0") == [] and s.query_by_key("T", "key") == []
    again = s.put_slices("T", *slices([b"c0", b"c1"], [b"c0", b"c1"]))
    assert [(r.queue_id, r.queue_offset) for r in again] == [(2, 1), (0, 2)], "round-robin goes on where it was"
    assert again[0].commitlog_offset == ok[-1].commitlog_offset + ok[-1].size
    assert [x.body for x in s.query_by_key("T", "c1")] == [b"c1"]
    assert s.check().ok
    s.kill()
    s = stores(cfg, fio.after_crash())
    assert log_bodies(s) == [b"a%03d" % i + b"x" * 300 for i in range(5)] + [b"c0", b"c1"]
    assert s.check().ok


def test_a_failed_pwrite_that_cannot_be_wiped_seals_the_segment_there(stores):
    fio = CommitLogWrites()
    cfg = memory_config(segment_size_bytes=64 * 1024)
    s = stores(cfg, fio)
    acked = [Message("T", b"a%03d" % i + b"x" * 300) for i in range(10)]
    ok = s.put_batch(acked)
    end = ok[-1].commitlog_offset + ok[-1].size
    fio.fail("pwrite", errno.ENOSPC, path_contains="/commitlog/", written=3000)
    fio.fail("zero_range", errno.EIO, path_contains="/commitlog/")
    rs = s.put_batch([Message("T", b"n%03d" % i + b"x" * 300) for i in range(20)])
    assert [r.reason for r in rs] == [PutReason.DISK_FULL] * 20
    assert s.commit_log.sealed == {0: end}
    again = s.put_batch([Message("T", b"c%03d" % i + b"x" * 300) for i in range(3)])
    assert all(r.ok for r in again) and again[0].commitlog_offset == 64 * 1024    # the next segment
    want = [m.body for m in acked] + [b"c%03d" % i + b"x" * 300 for i in range(3)]
    assert log_bodies(s) == want
    s.kill()
    s = stores(cfg, fio.after_crash())
    assert log_bodies(s) == want, "nothing of the refused batch came back"
    assert s.check().ok
