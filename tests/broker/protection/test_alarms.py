"""ResourceAlarms with fake readings and a manual clock: raise, clear, messages, adaptive interval."""

import pytest

from tidemq.broker.protection.alarms import (FAST_RATE_BYTES_PER_S, DiskReading, ResourceAlarms, human,
                                             read_rss_bytes, store_disk_reader, total_memory_bytes)
from tidemq.io import DiskUsage, ManualClock

MIB = 1 << 20
GIB = 1 << 30


class Readings:
    def __init__(self, rss=100 * MIB, free=None):
        self.rss = rss
        self.free = free if free is not None else {"/data": 50 * GIB}

    def memory(self):
        return self.rss

    def disk(self):
        return self.free


def make(r: Readings, memory_limit=1 * GIB, disk_limit=2 * GIB, lo=0.1, hi=10.0, clock=None):
    return ResourceAlarms(memory_limit, disk_limit, r.memory, r.disk, clock or ManualClock(), lo, hi,
                          memory_limit_doc="memory_high_watermark_ratio 0.4 of 2.5 GiB RAM")


def test_no_alarm_far_from_the_limits_checks_every_max_interval():
    r = Readings()
    a = make(r, memory_limit=4 * GIB)
    assert a.check() == 10.0
    assert a.refusal is None and not a.memory.raised and not a.disk.raised


def test_memory_alarm_raises_names_the_numbers_and_clears_by_itself():
    r = Readings(rss=1100 * MIB)
    a = make(r)
    a.check()
    assert a.memory.raised and not a.disk.raised
    assert a.refusal.startswith("memory alarm: broker resident memory 1.1 GiB > high watermark 1.0 GiB "
                                "(memory_high_watermark_ratio 0.4 of 2.5 GiB RAM)")
    r.rss = 900 * MIB
    a.check()
    assert not a.memory.raised and a.refusal is None and a.memory.raised_count == 1


def test_disk_alarm_names_the_directory_with_the_least_free_space():
    r = Readings(free={"/data": 5 * GIB, "/data/commitlog2": 1 * GIB})
    a = make(r)
    a.check()
    assert a.disk.raised and a.disk.where == "/data/commitlog2"
    assert "disk alarm: free 1.0 GiB < disk_free_limit_bytes 2.0 GiB under /data/commitlog2" in a.refusal
    r.free["/data/commitlog2"] = 3 * GIB
    a.check()
    assert not a.disk.raised and a.refusal is None


def test_both_alarms_are_named():
    a = make(Readings(rss=2 * GIB, free={"/d": 1}))
    a.check()
    assert "memory alarm" in a.refusal and "disk alarm" in a.refusal


def test_the_interval_shrinks_as_a_limit_nears_and_stays_within_bounds():
    r = Readings(rss=100 * MIB, free={"/d": 100 * GIB})
    a = make(r, memory_limit=1 * GIB)
    far = a.check()                       # 924 MiB away: 7.4 s
    r.rss = 10 * MIB
    a.memory_limit_bytes = 8 * GIB
    farther = a.check()
    a.memory_limit_bytes = 1 * GIB
    r.rss = 1 * GIB - 250 * MIB            # 250 MiB away: 2 s at the fast rate
    near = a.check()
    r.rss = 1 * GIB - 1                   # at the limit
    at = a.check()
    assert far == pytest.approx(2 * 924 * MIB / FAST_RATE_BYTES_PER_S) and farther == 10.0
    assert near == pytest.approx(2 * 250 * MIB / FAST_RATE_BYTES_PER_S)
    assert at == 0.1
    r.rss = 1 * GIB + 50 * MIB            # raised, close above: checked often, so it clears soon
    assert a.check() == pytest.approx(0.4)


def test_due_follows_the_clock():
    clock = ManualClock()
    a = make(Readings(), clock=clock)
    assert a.due()
    interval = a.check()
    assert not a.due()
    clock.advance(interval)
    assert a.due()


def test_limits_change_at_run_time_and_the_check_is_due_at_once():
    clock = ManualClock()
    r = Readings(rss=300 * MIB)
    a = make(r, memory_limit=200 * MIB, clock=clock)
    a.check()
    assert a.memory.raised and not a.due()
    a.set_limits(memory_limit_bytes=400 * MIB, memory_limit_doc="memory_high_watermark_bytes")
    assert a.due()
    a.check()
    assert not a.memory.raised


def test_a_failing_reading_is_skipped_not_fatal():
    def broken():
        raise OSError("no /proc")
    a = ResourceAlarms(1, 2 * GIB, broken, lambda: {"/d": 1}, ManualClock())
    a.check()
    assert not a.memory.raised and a.disk.raised


def test_real_readings_are_plausible(tmp_path):
    rss = read_rss_bytes()
    assert 1 * MIB < rss < total_memory_bytes()
    (tmp_path / "a").mkdir()
    read = store_disk_reader(lambda: [], [str(tmp_path), str(tmp_path / "a"), str(tmp_path / "missing")],
                             lambda p: DiskUsage(100, 50, 50), lambda d: (85, 90))
    assert read() == [DiskReading(str(tmp_path), 50, 15)]   # one per file system, missing ones skipped


def test_one_commit_log_directory_with_room_is_enough(tmp_path):
    """The issue's case: of two commit-log directories one is nearly full, the other has room for
    new segments: no alarm (it used to hold, then refuse, every send for good). Which directories
    can take a new segment is judged from the same reading as their free space (the store's own
    view, a moment older, once raised the alarm for a directory that had just filled past 85 %
    while the other had room)."""
    da, db = str(tmp_path / "a"), str(tmp_path / "b")
    for d in (da, db):
        (tmp_path / d).mkdir()
    free = {da: 4 * MIB, db: 30 * MIB}
    cap = {da: 64 * MIB, db: 128 * MIB}
    online = [da, db]
    read = store_disk_reader(lambda: online, [], lambda p: DiskUsage(cap[p], cap[p] - free[p], free[p]),
                             lambda d: (85, 90))
    a = ResourceAlarms(1 * GIB, 16 * MIB, lambda: 1, read, ManualClock())     # capped: 9.6 MiB for a
    a.check()                                          # a at 94 %: takes no new segment; b has room
    assert not a.disk.raised and a.disk.where == db
    free[da] = 12 * MIB                                # a back under 85 %: both count, one with room is enough
    a.check()
    assert not a.disk.raised
    free[db] = 6 * MIB                                 # b at 95 %, a at 81 % with 12 MiB: a counts alone
    a.check()
    assert not a.disk.raised and a.disk.where == da
    free[da] = 7 * MIB                                 # both past 85 %, under 90 %: both count, both short
    free[db] = 13 * MIB
    a.check()
    assert a.disk.raised
    online.remove(db)                                  # b offline or read-only: a alone
    free[da] = 40 * MIB
    a.check()
    assert not a.disk.raised


def test_the_limit_is_capped_where_cleanup_frees_space():
    """A small disk and a large limit: the alarm holds only above the clean-forcibly ratio, where
    segments are deleted for space (below it nothing would ever clear it)."""
    r = [DiskReading("/small", 30 * MIB, cap_bytes=64 * MIB * 15 // 100, group="commitlog")]
    a = ResourceAlarms(1 * GIB, 32 * MIB, lambda: 1, lambda: r, ManualClock())
    a.check()
    assert not a.disk.raised, "at 53 % used, nothing would ever free space"
    r[0] = DiskReading("/small", 9 * MIB, cap_bytes=64 * MIB * 15 // 100, group="commitlog")
    a.check()
    assert a.disk.raised and a.disk.limit_bytes == 64 * MIB * 15 // 100
    assert "capped at the clean-forcibly ratio" in a.disk.message


def test_cgroup_limit_below_ram_counts(tmp_path):
    (tmp_path / "memory.max").write_text("1048576\n")
    assert total_memory_bytes(str(tmp_path)) == 1048576
    (tmp_path / "memory.max").write_text("max\n")
    assert total_memory_bytes(str(tmp_path)) > 1048576


def test_human():
    assert human(512) == "512 B" and human(1536) == "1.5 KiB" and human(3 * GIB) == "3.0 GiB"
