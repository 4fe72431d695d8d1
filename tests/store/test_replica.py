"""A follower's log: the leader's bytes copied frame by frame land byte-identical (same offsets,
same segment names, BLANKs included) and are dispatched; damaged or misplaced frames are refused
whole; a diverged tail is cut; a promoted follower writes on from the copied queue offsets."""

import os

import pytest

from tidemq.record import codec
from tidemq.store import Message, MessageStore
from tidemq.store.replica import ReplicaError

from tests.support.store import slices, small_config, topic_bodies


def _copy(leader: MessageStore, follower: MessageStore, frame_bytes: int = 5000) -> int:
    frames = 0
    while True:
        off, data = leader.replica.read(follower.replica.end, frame_bytes)
        if not data:
            return frames
        follower.replica.append(off, data)
        frames += 1


def _segments(root):
    d = os.path.join(root, "commitlog")
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d)) if n.isdigit()}


def test_copied_log_is_byte_identical_and_readable(tmp_path):
    with MessageStore(small_config(tmp_path / "l")).start() as leader, \
            MessageStore(small_config(tmp_path / "f")).start() as follower:
        follower.follow("a follower")
        bodies = [f"m{i:05d}".encode() * 40 for i in range(600)]       # ~230 KiB over 64 KiB segments
        for i in range(0, len(bodies), 50):
            leader.put_batch([Message("T", b, keys=[f"k{j + i}"]) for j, b in enumerate(bodies[i:i + 50])])
        assert _copy(leader, follower) > 6
        assert follower.replica.end == leader.commitlog_max_offset
        assert topic_bodies(follower, "T") == sorted(bodies)
        assert follower.queue_count("T") == leader.queue_count("T")
        assert [m.body for m in follower.query_by_key("T", "k77")] == [bodies[77]]
        assert follower.put(Message("T", b"x")).reason.name == "NOT_LEADER"
        lm, fm = leader.commitlog_max_offset, follower.commitlog_max_offset
    assert lm == fm
    a, b = _segments(str(tmp_path / "l")), _segments(str(tmp_path / "f"))
    assert list(a) == list(b) and len(a) >= 3
    assert a == b                    # every byte, the BLANKs ending the segments included


def _consume_queues(root):
    d = os.path.join(root, "consumequeue")
    return {os.path.relpath(os.path.join(dp, f), d): open(os.path.join(dp, f), "rb").read()
            for dp, _, fs in os.walk(d) for f in fs}


def test_frames_dispatched_after_their_confirmation_read_and_land_as_dispatched_at_once(tmp_path):
    """append(..., defer_dispatch=True) (the follower confirms a frame before dispatching it): the
    units and index entries wait in the put lock; any read dispatches them first, the next frame's
    append does before it checks where its queues go on; the consume queues end byte-identical to
    those of a follower that dispatched every frame at once."""
    with MessageStore(small_config(tmp_path / "l")).start() as leader, \
            MessageStore(small_config(tmp_path / "now")).start() as now, \
            MessageStore(small_config(tmp_path / "later")).start() as later:
        now.follow("a follower")
        later.follow("a follower")
        bodies = [f"m{i:04d}".encode() * 30 for i in range(300)]
        for i in range(0, len(bodies), 30):
            leader.put_batch([Message("T", b, keys=[f"k{j + i}"], tags="a" if j % 2 else "b")
                              for j, b in enumerate(bodies[i:i + 30])])
        off = 0
        while True:
            off, data = leader.replica.read(off, 3000)
            if not data:
                break
            now.replica.append(off, data)
            later.replica.append(off, data, defer_dispatch=True)
            assert later._put_lock.pending, "left for after the confirmation"
            off += len(data)
        assert [m.body for m in later.query_by_key("T", "k123")] == [bodies[123]], "a read dispatches first"
        assert not later._put_lock.pending
        assert topic_bodies(later, "T") == topic_bodies(now, "T") == sorted(bodies)
    assert _consume_queues(str(tmp_path / "later")) == _consume_queues(str(tmp_path / "now"))


def test_damaged_or_misplaced_frames_are_refused_whole(tmp_path):
    with MessageStore(small_config(tmp_path / "l")).start() as leader, \
            MessageStore(small_config(tmp_path / "f")).start() as follower:
        leader.put_batch([Message("T", b"x" * 100) for _ in range(10)])
        off, data = leader.replica.read(0, 1 << 20)
        bad = bytearray(data)
        bad[2] ^= 0x01                                  # the first record's length
        with pytest.raises(ReplicaError, match="lengths|whole"):
            follower.replica.append(off, bytes(bad))
        with pytest.raises(ReplicaError, match="whole"):
            follower.replica.append(off, data[:-7])                  # a torn last record
        with pytest.raises(ReplicaError):
            follower.replica.append(off + 100, data)                 # not where it says it is
        assert follower.replica.end == 0
        follower.replica.append(off, data)
        with pytest.raises(ReplicaError, match="ends at"):
            follower.replica.append(off, data)                      # twice: not at the log's end
        assert follower.replica.end == leader.commitlog_max_offset


def test_diverged_tail_is_cut_and_a_promoted_follower_goes_on(tmp_path):
    with MessageStore(small_config(tmp_path / "l")).start() as leader, \
            MessageStore(small_config(tmp_path / "f")).start() as old:
        leader.put_batch([Message("T", f"a{i}".encode(), queue_id=0) for i in range(100)])
        old.follow("x")
        _copy(leader, old)
        agreed = old.replica.end
        old.lead(1)
        # the old leader wrote on (never replicated), then lost its lease
        old.put_batch([Message("T", f"diverged{i}".encode(), queue_id=0, keys=[f"d{i}"]) for i in range(300)])
        leader.lead(2)
        leader.put_batch([Message("T", f"b{i}".encode(), queue_id=0) for i in range(50)])
        old.follow("y")
        assert old.replica.truncate(agreed) > 0
        assert old.epochs.entries == [] or old.epochs.entries[-1][1] < agreed
        assert old.max_offset("T", 0) == 100
        assert old.query_by_key("T", "d5") == []
        _copy(leader, old)
        assert topic_bodies(old, "T") == topic_bodies(leader, "T")
        assert not any(b.startswith(b"diverged") for b in topic_bodies(old, "T"))
        old.lead(3)
        r = old.put(Message("T", b"after", queue_id=0))
        assert r.ok and r.queue_offset == 150


def test_whole_log_diverged_starts_again_empty(tmp_path):
    with MessageStore(small_config(tmp_path / "l")).start() as leader, \
            MessageStore(small_config(tmp_path / "f")).start() as old:
        old.put_batch([Message("T", b"mine" * 50) for _ in range(400)])
        leader.put_batch([Message("T", b"theirs" * 50) for _ in range(30)])
        old.follow("z")
        old.replica.truncate(0)
        assert old.commitlog_max_offset == 0
        _copy(leader, old)
        assert topic_bodies(old, "T") == topic_bodies(leader, "T")


def test_puts_without_a_queue_go_to_the_queues_this_group_owns(tmp_path):
    with MessageStore(small_config(tmp_path / "s")).start() as s:
        s.create_topic("T", 6)
        s.set_write_queues("T", [1, 4])
        rs = s.put_batch([Message("T", b"x") for _ in range(10)])
        assert sorted({r.queue_id for r in rs}) == [1, 4]
        assert s.put_encoded("T", [(b"y", b"")])[0].queue_id in (1, 4)
        # the SendRecords path (slices; record_loop's compiled loop or its Python twin) too, in turn
        data, fields = slices([b"i%d" % k for k in range(4)], [b"z"] * 4)
        cols = s.put_slices("T", data, fields)
        qids = [r.queue_id for r in cols]
        assert all(r.ok for r in cols) and sorted(qids) == [1, 1, 4, 4] and qids[0] != qids[1]
        with pytest.raises(ValueError):
            s.set_write_queues("T", [9])
        s.create_topic("T", 8)                    # an owned set stays as it was when the topic grows
        assert s.write_queues("T") == (1, 4)
        s.set_write_queues("T", None)
        assert s.write_queues("T") == range(8)
        assert sorted(r.queue_id for r in s.put_batch([Message("T", b"w") for _ in range(8)])) == list(range(8))


def test_a_record_damaged_on_the_leader_is_copied_and_never_served(tmp_path):
    """Transit damage is the frame CRC's (protocol/replication.py); a record whose body went bad on
    the leader's disk is copied as it is, and the follower's reads skip it like the leader's."""
    with MessageStore(small_config(tmp_path / "l")).start() as leader, \
            MessageStore(small_config(tmp_path / "f")).start() as follower:
        leader.put_batch([Message("T", b"m%02d" % i + b"x" * 100, queue_id=0) for i in range(10)])
        off, data = leader.replica.read(0, 1 << 20)
        bad = bytearray(data)
        bad[codec.OFF_BODY + 50] ^= 0xFF                 # inside the first record's body
        follower.replica.append(off, bytes(bad))
        got = topic_bodies(follower, "T")
        assert len(got) == 9 and all(b in topic_bodies(leader, "T") for b in got)


def test_a_frame_the_disk_refuses_is_not_taken_and_comes_again(tmp_path):
    """The follower writes a frame with pwrite: an error (here EIO, part of the bytes written) leaves
    its log's end where it was; the same frame sent again lands whole."""
    import errno

    from tidemq.testing.faulty_io import FaultyFileIO
    fio = FaultyFileIO()
    with MessageStore(small_config(tmp_path / "l")).start() as leader, \
            MessageStore(small_config("/f"), fio=fio).start() as follower:
        follower.follow("a follower")
        bodies = [f"m{i:05d}".encode() * 40 for i in range(100)]
        leader.put_batch([Message("T", b) for b in bodies])
        off, data = leader.replica.read(0, 5000)
        fio.fail("pwrite", errno.EIO, path_contains="/f/commitlog/", written=len(data) // 2)
        with pytest.raises(OSError):
            follower.replica.append(off, data)
        assert follower.replica.end == 0
        assert _copy(leader, follower) > 1
        assert follower.replica.end == leader.commitlog_max_offset
        assert topic_bodies(follower, "T") == sorted(bodies)


def _copy_spans(leader: MessageStore, follower: MessageStore, frame_bytes: int = 5000) -> int:
    """Copy as the replication stream does: whole records (DATA), or a damaged stretch as it is (RAW)."""
    raws = 0
    while True:
        off, data, raw, _next = leader.replica.read_span(follower.replica.end, frame_bytes)
        if not data:
            return raws
        if raw:
            follower.replica.append_raw(off, data)
            raws += 1
        else:
            follower.replica.append(off, data)


def test_a_damaged_stretch_of_the_leaders_log_is_copied_as_it_is_and_replication_goes_on(tmp_path):
    """A record whose header went bad on the leader's disk (so no frame of whole records can carry
    it): read_span gives the stretch up to the next valid record (recovery's rule,
    codec.next_valid_record) as raw bytes; the follower writes them as they are, never dispatches
    them, and the records after them are copied, dispatched and served as on the leader. The logs
    stay byte-identical; a restart of the follower keeps the damage in the middle (not a torn tail)."""
    with MessageStore(small_config(tmp_path / "l")).start() as leader:
        leader.put_batch([Message("T", b"m%02d" % i + b"x" * 100, queue_id=0) for i in range(30)])
        victim = leader.get("g", "T", 0, 10, 1).messages[0].commitlog_offset
        seg = leader.segments.segments[0]
        seg.mapping[victim + 4:victim + 8] = b"\x00\x00\x00\x00"      # its magic: not a record any more
        with MessageStore(small_config(tmp_path / "f")).start() as follower:
            follower.follow("a follower")
            assert _copy_spans(leader, follower) == 1
            assert follower.replica.raw_regions == 1 and follower.replica.raw_bytes > 0
            assert follower.replica.end == leader.replica.end
            assert topic_bodies(follower, "T") == topic_bodies(leader, "T") and len(topic_bodies(leader, "T")) == 29
            leader.put_batch([Message("T", b"after", queue_id=0)])
            _copy_spans(leader, follower)
            assert b"after" in topic_bodies(follower, "T")
        end = leader.commitlog_max_offset
    assert _segments(str(tmp_path / "l")) == _segments(str(tmp_path / "f"))
    with MessageStore(small_config(tmp_path / "f")).start() as again:
        assert again.replica.end == end, "the damage is in the middle: nothing is cut"
        assert len(topic_bodies(again, "T")) == 30


@pytest.mark.parametrize("frame_bytes", [300, 5000])
def test_a_record_whose_topic_went_bad_on_the_leaders_disk_is_copied_as_it_is(tmp_path, frame_bytes):
    """A record whose topic is not ASCII any more (a bit flipped on the leader's disk; every topic is
    ASCII) is not one the follower's check takes: read_span sends it as raw bytes, the follower writes
    it as it is, and the copy goes on after it (it is never served: its CRC fails, here and there)."""
    with MessageStore(small_config(tmp_path / "l")).start() as leader:
        leader.put_batch([Message("T", b"m%02d" % i + b"x" * 100, queue_id=0) for i in range(30)])
        victim = leader.get("g", "T", 0, 10, 1).messages[0]
        seg = leader.segments.segments[0]
        t0 = victim.commitlog_offset + codec.OFF_BODY + len(victim.body) + 1
        seg.mapping[t0] |= 0x80
        with MessageStore(small_config(tmp_path / "f")).start() as follower:
            follower.follow("a follower")
            assert _copy_spans(leader, follower, frame_bytes) == 1
            assert follower.replica.raw_regions == 1
            assert follower.replica.end == leader.replica.end
            assert topic_bodies(follower, "T") == topic_bodies(leader, "T") and len(topic_bodies(leader, "T")) == 29
    assert _segments(str(tmp_path / "l")) == _segments(str(tmp_path / "f"))


def test_a_cut_whose_wipe_fails_still_ends_the_log_at_the_cut(tmp_path):
    """The wipe of a cut tail fsyncs the segment; when that fails the log still ends at the cut (a wipe
    that began zeroed bytes the old end would count) and the error is raised."""
    import errno

    from tidemq.testing.faulty_io import FaultyFileIO
    fio = FaultyFileIO()
    with MessageStore(small_config("/f"), fio=fio).start() as s:
        s.put_batch([Message("T", b"m%02d" % i + b"x" * 100, queue_id=0) for i in range(10)])
        cut_at = s.get("g", "T", 0, 6, 1).messages[0].commitlog_offset
        fio.fail("fsync", errno.EIO, path_contains="/f/commitlog/0")
        with pytest.raises(OSError):
            s.replica.truncate(cut_at)
        assert s.replica.end == cut_at and s.max_offset("T", 0) == 6
        s.put_batch([Message("T", b"new", queue_id=0)])
        assert topic_bodies(s, "T")[-1] == b"new" or b"new" in topic_bodies(s, "T")
        assert len(topic_bodies(s, "T")) == 7


def test_a_segment_the_leader_sealed_early_ends_there_on_the_follower_and_the_copy_goes_on(stores):
    """The leader's commit-log fsync failed: its first segment is sealed at the durable end (store/
    log_failure.py) and its log goes on at the next segment, in its other directory. read_span gives
    the seal as a BLANK's 8-byte header; the follower writes it, its segment ends there too, the
    records after it land at the leader's offsets, and a restart of the follower reads the same."""
    import errno

    from tidemq.store import PutStatus
    from tidemq.testing.faulty_io import FaultyFileIO

    from tests.support.store import memory_config
    seg = 32 * 1024
    fio = FaultyFileIO(seed=1)
    leader = stores(memory_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=600_000,
                                  segment_size_bytes=seg, commitlog_dirs=("/l/a", "/l/b")), fio)
    ok = [leader.put(Message("T", b"ok%d" % i + b"x" * 500)) for i in range(5)]
    fio.fail("fsync", errno.EIO, "/l/a/")
    assert leader.put(Message("T", b"failed")).status is PutStatus.FLUSH_DISK_FAILED
    after = leader.put(Message("T", b"after"))
    assert after.ok and after.commitlog_offset == seg
    sealed_at = ok[-1].commitlog_offset + ok[-1].size
    at, data, raw, nxt = leader.replica.read_span(sealed_at, 5000)
    assert (at, raw, nxt) == (sealed_at, False, seg) and data == codec.encode_blank(seg - sealed_at)[:8]
    ffio = FaultyFileIO()
    cfg = memory_config(root_dir="/f", segment_size_bytes=seg)
    follower = stores(cfg, ffio)
    follower.follow("a follower")
    assert _copy_spans(leader, follower) == 0
    assert follower.replica.end == leader.replica.end == after.commitlog_offset + after.size
    assert follower.segments.segments[0].wrote_pos == seg, "its first segment ended at the seal"
    want = [b[:5] for b in topic_bodies(leader, "T")]
    assert [b[:5] for b in topic_bodies(follower, "T")] == want and b"faile" not in want and b"after" in want
    follower.kill()
    again = stores(cfg, ffio.after_crash())
    assert again.replica.end == leader.replica.end
    assert [b[:5] for b in topic_bodies(again, "T")] == want


@pytest.mark.parametrize("where", ["header short of the segment's end", "header then more bytes"])
def test_a_blank_header_that_does_not_end_the_segment_is_refused(where):
    from tidemq.store.replica import check_frame
    seg = 32 * 1024
    blank = codec.encode_blank(seg - 100)[:8] if where.startswith("header short") else codec.encode_blank(seg)[:8]
    data = blank if where.startswith("header short") else blank + b"\0" * 8
    with pytest.raises(ReplicaError):
        check_frame(data, 0, seg)
    assert check_frame(codec.encode_blank(seg)[:8], 0, seg) == (0, True)


@pytest.mark.parametrize("cut_to", ["a record in the middle", "nothing (the copy starts over)"])
def test_a_cut_below_the_checkpoint_survives_a_crash(stores, cut_to):
    """The checkpoint said the log was durable up to its end; a follower cuts below that (a diverged
    tail, or its whole log) and is killed before any later checkpoint: its next start finds the log
    ending at the cut (the checkpoint was lowered first), never refuses to start, never keeps the cut
    stretch as damage, and the copy goes on from there."""
    from tidemq.testing.faulty_io import FaultyFileIO

    from tests.support.store import memory_config
    fio = FaultyFileIO()
    cfg = memory_config(root_dir="/f", segment_size_bytes=32 * 1024)
    s = stores(cfg, fio)
    s.put_batch([Message("T", b"m%02d" % i + b"x" * 700) for i in range(60)])     # two segments
    s.commit_log.flush()
    s.flush_queues()                                     # the checkpoint: everything on disk
    end = s.replica.end
    assert s.checkpoint.state.physic_offset == end
    at = s.get("g", "T", 0, 20, 1).messages[0].commitlog_offset if cut_to.startswith("a record") else 0
    s.replica.truncate(at)
    s.kill()
    again = stores(cfg, fio.after_crash())
    assert again.replica.end == at < end
    assert len(topic_bodies(again, "T")) == (20 if at else 0)
    assert again.check().ok
