"""Cleanup: CommitLogCleaner built directly (config, segments, disk probe, manual clock) over
in-memory segments, and through the store: which trigger deletes what, from the head only,
never the active segment, a batch at a time, readers holding a segment, saying why nothing was
deleted; deletions that survive a power loss; QueueCleaner behind the log."""

from __future__ import annotations

import random

import pytest

from tidemq.io import ManualClock
from tidemq.store import GetStatus, Message, StoreError
from tidemq.store.cleaner import DeleteReason, NotFreed, QueueCleaner
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import memory_config

from ..support.cleaner import HOUR_S, SEG, World, other_hour


def test_no_trigger_no_deletion():
    w = World(file_reserved_time_hours=0)
    w.disk.refresh()
    rnd = w.cleaner.run_round()
    assert rnd.triggers == [] and rnd.deleted == [] and w.starts() == [0, SEG, 2 * SEG, 3 * SEG, 4 * SEG]


def test_at_the_delete_hour_expired_segments_go_from_the_head_never_the_active_one():
    w = World(file_reserved_time_hours=2.5, at_the_delete_hour=True)
    w.disk.refresh()
    # last written 5, 4, 3, 2 (sealed) and 1 h ago (active): those older than 2.5 h are expired
    rnd = w.cleaner.run_round()
    assert rnd.triggers == ["time"] and not rnd.clean_immediately
    assert w.deleted == [0, SEG, 2 * SEG] and w.starts() == [3 * SEG, 4 * SEG]
    assert rnd.deleted_bytes == 3 * SEG == w.cleaner.deleted_bytes_total
    assert "nothing expired" in rnd.why_not and "2.0 h old" in rnd.why_not
    w.clock.advance(10 * HOUR_S)
    w.cleaner.trigger_manual()
    rnd = w.cleaner.run_round()
    assert rnd.deleted and w.starts() == [4 * SEG], "the active segment stays, however old"
    assert w.cleaner.run_round().why_not == "only the active segment is left"


def test_space_short_deletes_expired_segments_and_says_why_when_none_is():
    w = World(file_reserved_time_hours=72)
    w.used(80)                                         # above disk_used_space_percent_max (75 %)
    rnd = w.cleaner.run_round()
    assert rnd.triggers == ["space"] and rnd.deleted == [] and not rnd.clean_immediately
    assert rnd.why_not.startswith("nothing expired: the oldest segment") and "file_reserved_time_hours=72" in rnd.why_not
    assert rnd.why_not_code is NotFreed.NOTHING_EXPIRED
    assert w.cleaner.last is rnd and w.cleaner.last_deleted is not rnd, "a no-op round is not the last cleanup"
    w.clock.advance(72 * HOUR_S)                       # all sealed ones expired now
    rnd = w.cleaner.run_round()
    assert rnd.triggers == ["space"] and w.deleted == [0, SEG, 2 * SEG, 3 * SEG]


def test_above_clean_forcibly_everywhere_deletes_even_unexpired_segments_a_batch_a_round():
    w = World(file_reserved_time_hours=72, delete_file_batch_max=3)
    w.used(86)                                         # above disk_space_clean_forcibly_percent (85 %)
    rnd = w.cleaner.run_round()
    assert rnd.triggers == ["space"] and rnd.clean_immediately
    assert w.deleted == [0, SEG, 2 * SEG], "at most delete_file_batch_max a round"
    w.cleaner.run_round()
    assert w.deleted == [0, SEG, 2 * SEG, 3 * SEG] and w.starts() == [4 * SEG]


def test_a_manual_trigger_forces_the_next_rounds_only():
    w = World(file_reserved_time_hours=1, manual_delete_rounds=2, delete_file_batch_max=1)
    w.disk.refresh()
    w.cleaner.trigger_manual()
    assert [w.cleaner.run_round().triggers for _ in range(3)] == [["manual"], ["manual"], []]
    assert w.deleted == [0, SEG]


def test_the_pause_between_deletions_is_on_the_clock():
    w = World(file_reserved_time_hours=0, delete_commit_log_files_interval_ms=500)
    w.cleaner.trigger_manual()
    w.disk.refresh()
    t0 = w.clock.monotonic_s()
    assert len(w.cleaner.run_round().deleted) == 4
    assert w.clock.monotonic_s() - t0 == 4 * 0.5


def test_a_segment_held_by_a_reader_waits_then_goes_even_without_a_trigger():
    """Held: out of service, retried; released, the next round finishes its deletion whatever its
    triggers (else it would stay the log's head, unreadable)."""
    w = World(file_reserved_time_hours=0)
    head = w.segments.segments[0]
    assert head.hold()
    w.cleaner.trigger_manual()
    w.disk.refresh()
    rnd = w.cleaner.run_round()
    assert rnd.deleted == [] and "is held by 1 reader(s)" in rnd.why_not and not head.available
    head.release()
    w.cleaner.manual_rounds = 0
    rnd = w.cleaner.run_round()
    assert rnd.triggers == [] and rnd.deleted == [head.path] and w.starts()[0] == SEG


def test_a_held_segment_is_deleted_forcibly_after_the_interval():
    w = World(file_reserved_time_hours=0, destroy_mapped_file_interval_forcibly_ms=120_000)
    head = w.segments.segments[0]
    assert head.hold()
    w.cleaner.trigger_manual()
    w.disk.refresh()
    assert w.cleaner.run_round().deleted == []
    w.clock.advance(119)
    assert w.cleaner.run_round().deleted == []
    w.clock.advance(1)
    assert w.cleaner.run_round().deleted[0] == head.path
    head.release()


# Through the store ---------------------------------------------------------------------------

def test_a_segment_held_during_a_cleanup_is_later_deleted_or_readable(stores):
    """A head segment a reader held while the cleaner wanted it, released when space is no longer
    short: deleted, or still the readable head of the log, never in between."""
    clock = ManualClock()
    cfg = memory_config(segment_size_bytes=SEG, delete_when=other_hour(clock))
    fio = FaultyFileIO()
    s = stores(cfg, fio, clock)
    while len(s.segments) < 3:
        assert s.put(Message("T", b"x" * 1000)).ok
    head = s.segments.first
    assert head.hold()                                     # a reader is reading the head segment
    fio.capacity_bytes = int(fio.disk_usage("/").used_bytes / 0.87)   # above clean-forcibly, below warning
    s.clean()
    assert "held" in (s.cleaner.last.why_not or "")
    head.release()                                         # the reader is done
    fio.capacity_bytes = 1 << 40                           # space is no longer short
    s.clean()
    s.check_disk()
    deleted = s.segments.min_offset > 0
    g = s.get("g", "T", 0, 0)
    readable = bool(g.messages) and g.messages[0].queue_offset == 0
    assert deleted or readable, (f"segment {head.path} is still the head of the log but unreadable: "
                                 f"get(0) -> {g}, first queue offset returned "
                                 f"{g.messages[0].queue_offset if g.messages else None}")


def test_the_store_starts_after_a_power_loss_that_follows_a_cleanup(stores):
    """Deleted head segments stay deleted in order (the directory is fsynced after each): never a
    log with a hole that the store refuses to start with (seeded power losses)."""
    cfg = memory_config(segment_size_bytes=SEG, flush_disk_type="SYNC_FLUSH")
    refused = {}
    for seed in range(6):
        fio, clock = FaultyFileIO(), ManualClock()
        s = stores(cfg, fio, clock)
        while len(s.segments) < 5:
            assert s.put(Message("T", b"x" * 1000)).ok
        clock.advance(73 * HOUR_S)                    # every sealed segment expired
        s.trigger_delete_expired()
        s.clean()                                     # deletes the 4 sealed head segments
        assert len(s.segments) == 1
        s.kill()
        fio = fio.after_power_loss(random.Random(seed))
        try:
            stores(cfg, fio, clock).shutdown()
        except StoreError as e:
            refused[seed] = str(e)[:90]
    assert not refused, f"store refuses to start after a power loss: {refused}"


def test_queue_files_and_index_files_behind_the_log_go_and_minimums_follow(stores):
    clock = ManualClock()
    s = stores(memory_config(segment_size_bytes=SEG, consume_queue_units_per_segment=16, index_slots=16,
                             index_entries=16, delete_when=other_hour(clock)), FaultyFileIO(), clock)
    for i in range(60):
        assert s.put(Message("T", b"m%02d" % i + b"x" * 400, keys=[f"k{i}"])).ok
    cq = s.queues.get("T", 0)
    assert len(cq.file_starts()) == 4 and len(s.index.files) > 1
    clock.advance(73 * HOUR_S)
    s.trigger_delete_expired()
    s.clean()                                           # the commit log first, then what lies behind it
    log_min = s.segments.min_offset
    assert log_min > 0
    assert QueueCleaner(s.queues, s.index).run_round(log_min) == 0, "the store's round did it already"
    assert len(cq.file_starts()) < 4
    mn = s.min_offset("T", 0)
    assert mn > 0 and s.get("g", "T", 0, 0).status is GetStatus.OFFSET_TOO_SMALL
    g = s.get("g", "T", 0, mn)
    assert g.status is GetStatus.FOUND and g.messages[0].commitlog_offset >= log_min
    assert s.query_by_key("T", "k59") and not s.query_by_key("T", "k0")


@pytest.mark.parametrize("then", ["round", "restart"])
@pytest.mark.parametrize("held", [0, 1])
def test_a_queues_minimum_never_points_at_a_segment_out_of_service(stores, held, then):
    """A segment a reader holds when the cleaner deletes it goes out of service at once (DELETING: no
    read may hold it) and is deleted after the reader's release, by the next round or the shutdown.
    The queues' minimum follows the log as readers see it: its first segment in service, from the
    round that took the segment out; never records no read can serve (a consumer starting at the
    minimum would be told MESSAGE_WAS_REMOVING until the next round), and the next start does not
    bring them back. ``held``: the head segment, or the one after it (the head is deleted, the round
    stops there)."""
    clock, fio = ManualClock(), FaultyFileIO()
    cfg = memory_config(segment_size_bytes=SEG, consume_queue_units_per_segment=16,
                        delete_when=other_hour(clock), delete_file_batch_max=10)
    s = stores(cfg, fio, clock)
    for i in range(60):
        assert s.put(Message("T", b"m%02d" % i + b"x" * 400)).ok
    assert len(s.segments) >= 4
    reader = s.segments.segments[held]
    assert reader.hold()                                   # a reader is reading this segment
    clock.advance(73 * HOUR_S)
    s.trigger_delete_expired()
    s.clean()
    assert not reader.available and reader.refs == 1       # out of service, still held
    assert len(s.cleaner.last.deleted) == held and s.cleaner.last.out_of_service == [reader.path]
    mn = s.min_offset("T", 0)
    g = s.get("g", "T", 0, mn)
    assert g.status is GetStatus.FOUND and g.messages[0].queue_offset == mn, (
        f"the queue's minimum {mn} points at a record of {reader.path} (out of service): {g.status}")
    assert g.messages[0].commitlog_offset >= reader.end_offset
    assert s.get("g", "T", 0, mn - 1).status is GetStatus.OFFSET_TOO_SMALL
    reader.release()                                       # the reader is done
    if then == "round":
        s.clean()
    else:
        s.shutdown()
        s = stores(cfg, fio, clock)
        assert s.recovery.queues_rebuilt == []
    assert reader.path not in [m.path for m in s.segments.segments] and s.commitlog_min_offset >= reader.end_offset
    # (the manual trigger's next round may delete more: expired)
    assert s.min_offset("T", 0) >= mn if then == "round" else s.min_offset("T", 0) == mn, "records came back"
    mn = s.min_offset("T", 0)
    g = s.get("g", "T", 0, mn)
    assert g.status is GetStatus.FOUND and g.messages[0].queue_offset == mn


def _held_out_of_service(stores, fio, clock, held=0):
    """A store over ``fio`` whose segment ``held`` a reader holds while a cleanup deletes every
    expired head segment (all written is durable before): (store, config, the held segment, the
    queue's minimum after the round)."""
    cfg = memory_config(segment_size_bytes=SEG, consume_queue_units_per_segment=16,
                        delete_when=other_hour(clock), delete_file_batch_max=10)
    s = stores(cfg, fio, clock)
    for i in range(60):
        assert s.put(Message("T", b"m%02d" % i + b"x" * 400)).ok
    s.commit_log.flush()
    s.flush_queues()
    reader = s.segments.segments[held]
    assert reader.hold()
    clock.advance(73 * HOUR_S)
    s.trigger_delete_expired()
    s.clean()
    assert s.cleaner.last.out_of_service == [reader.path] and reader.refs == 1
    return s, cfg, reader, s.min_offset("T", 0)


@pytest.mark.parametrize("end", ["shutdown", "kill"] + [f"power-loss-{seed}" for seed in range(4)])
def test_a_segment_still_held_when_the_store_stops_does_not_come_back(stores, end):
    """A head segment out of service (DELETING) that a reader still holds when the store stops
    (shutdown, kill -9, power loss right after the round: seeded) stays gone at the next start: its
    name went when it left service (the holder reads on through its mapping) and the directory was
    fsynced, so neither a clean stop nor a crash loads it again under queues already past it."""
    clock, fio = ManualClock(), FaultyFileIO()
    s, cfg, reader, mn = _held_out_of_service(stores, fio, clock)
    assert mn > 0
    assert not fio.exists(reader.path), "a segment out of service keeps its name until its reader releases it"
    assert reader.mapping[:4] != b"\0\0\0\0", "the holder no longer reads the segment's records"
    if end == "shutdown":
        s.shutdown()
    else:
        s.kill()
        fio = fio.after_crash() if end == "kill" else fio.after_power_loss(random.Random(int(end.split("-")[-1])))
    s = stores(cfg, fio, clock)
    assert reader.path not in [m.path for m in s.segments.segments], "the segment came back"
    assert s.commitlog_min_offset >= reader.end_offset
    assert s.min_offset("T", 0) == mn, f"the queue's minimum went from {mn} to {s.min_offset('T', 0)}"
    g = s.get("g", "T", 0, mn)
    assert g.status is GetStatus.FOUND and g.messages[0].queue_offset == mn
    report = s.check()
    assert report.ok, report.problems[:5]
    if end == "shutdown":
        reader.release()                                   # the old reader is done (after its store)


def test_a_held_segment_out_of_service_keeps_its_space_until_released():
    """The name goes at once, the space only when the last holder closes it (as on Linux: an
    unlinked file that is still open or mapped keeps its blocks)."""
    clock, fio = ManualClock(), FaultyFileIO()
    made = []

    def stores(cfg, fio, clock):
        from tidemq.store import MessageStore
        made.append(MessageStore(cfg, fio=fio, clock=clock).start())
        return made[-1]

    try:
        s, _cfg, reader, _mn = _held_out_of_service(stores, fio, clock, held=1)
        used = fio.disk_usage("/").used_bytes
        reader.release()
        s.clean()
        assert reader.path in s.cleaner.last.deleted
        assert fio.disk_usage("/").used_bytes <= used - reader.size
    finally:
        for m in made:
            m.shutdown()


def test_the_log_minimum_everyone_reads_is_the_first_segment_in_service(stores):
    """While a head segment waits out of service for its reader, the log's minimum offset the store
    shows (commitlog_min_offset, stats, disk status) is the first segment in service, as the queues'."""
    clock, fio = ManualClock(), FaultyFileIO()
    s, _cfg, reader, _mn = _held_out_of_service(stores, fio, clock)
    assert s.segments.segments[0] is reader                # still in the log's list, DELETING
    assert s.commitlog_min_offset == reader.end_offset == s.cleaner.last.log_min_offset
    assert s.stats()["commitlog_min_offset"] == reader.end_offset
    assert s.disk_status()["commitlog"]["min_offset"] == reader.end_offset
    off, data = s.replica.read(0, 1 << 16)                 # a follower starting before it
    assert off == reader.end_offset and data, f"a follower asking from 0 gets {len(data)} bytes at {off}"
    report = s.check()
    assert report.ok, report.problems[:5]
    reader.release()

# What an operator is told -------------------------------------------------------------------

def test_space_short_is_logged_when_it_changes_not_every_round(caplog):
    w = World(file_reserved_time_hours=72)
    w.used(80)
    with caplog.at_level("WARNING", logger="tidemq.store"):
        for _ in range(5):
            assert w.cleaner.run_round().why_not_code is NotFreed.NOTHING_EXPIRED
    said = [r for r in caplog.records if "space is short" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    assert w.cleaner.not_freed_rounds[NotFreed.NOTHING_EXPIRED] == 5, "every such round counts in the metrics"
    caplog.clear()
    w.fio.capacity_bytes = 1 << 40                     # space is no longer short
    w.disk.refresh()
    with caplog.at_level("WARNING", logger="tidemq.store"):
        w.cleaner.run_round()
        w.cleaner.run_round()
    assert [r.getMessage() for r in caplog.records] == ["space is no longer blocked: usage fell"]


def test_segments_deleted_are_counted_by_reason_and_the_last_deletion_stays_visible():
    w = World(n_sealed=4, file_reserved_time_hours=2.5, at_the_delete_hour=True)
    w.disk.refresh()
    rnd = w.cleaner.run_round()                        # 5, 4, 3 h old: expired; 2 h old: not yet
    assert rnd.reasons == [DeleteReason.EXPIRED] * 3 and len(rnd.deleted) == 3, rnd.as_dict()
    w.cleaner.hours = set()                            # past the delete hour
    w.used(86)                                         # above clean-forcibly: the unexpired one goes
    rnd2 = w.cleaner.run_round()
    assert rnd2.reasons == [DeleteReason.SPACE], rnd2.as_dict()
    assert w.cleaner.deleted_segments == {DeleteReason.EXPIRED: 3, DeleteReason.SPACE: 1}
    w.fio.capacity_bytes = 1 << 40
    w.disk.refresh()
    w.cleaner.run_round()                              # a round with nothing to do
    assert w.cleaner.last_deleted is rnd2, "a no-op round does not hide the last deletion"


def test_a_deletion_is_logged_at_warning_with_the_messages_it_took(stores, caplog):
    clock = ManualClock()
    s = stores(memory_config(segment_size_bytes=SEG, consume_queue_units_per_segment=16,
                             delete_when=other_hour(clock)), FaultyFileIO(), clock)
    s.create_topic("T", 2)
    for i in range(40):
        assert s.put(Message("T", b"x" * 400, queue_id=i % 2)).ok
    clock.advance(73 * HOUR_S)
    s.trigger_delete_expired()
    with caplog.at_level("WARNING", logger="tidemq.store"):
        s.clean()
    rnd = s.cleaner.last
    assert rnd.deleted and rnd.lost
    lost = {(r.topic, r.queue_id): (r.first, r.end) for r in rnd.lost}
    for q in (0, 1):
        assert lost[("T", q)] == (0, s.min_offset("T", q)), lost
    said = [r.getMessage() for r in caplog.records if "cleanup deleted" in r.getMessage()]
    assert len(said) == 1 and f"T/0 0..{s.min_offset('T', 0) - 1}" in said[0] and "expired" in said[0], said
    assert s.disk_status()["last_cleanup"]["lost"][0]["topic"] == "T"
