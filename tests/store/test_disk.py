"""Disk thresholds, flags, placement, cleanup and forecast with a fake disk and a fake clock."""

import errno
import os
import time

import pytest

from tidemq.io import DiskUsage, ManualClock, OsFileIO
from tidemq.store import GetStatus, Message, MessageStore, PutStatus, StoreConfig
from tidemq.store.disk import DirState
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import MEMORY_ROOT, memory_config

SEG = 64 * 1024
GB = 1 << 30


class FakeDisk(OsFileIO):
    """Real files; disk_usage answers what the test says per directory (percent used of 100 GB)."""

    def __init__(self) -> None:
        self.percent: dict[str, float] = {}

    def disk_usage(self, path: str) -> DiskUsage:
        for d, pct in self.percent.items():
            if os.path.normpath(path).startswith(os.path.normpath(d)):
                used = int(100 * GB * pct / 100)
                return DiskUsage(100 * GB, used, 100 * GB - used)
        return DiskUsage(100 * GB, 10 * GB, 90 * GB)


def local_ms(y, mo, d, h, mi=0):
    return int(time.mktime((y, mo, d, h, mi, 0, 0, 0, -1)) * 1000)


@pytest.fixture
def env(tmp_path):
    made = []

    def make(n_dirs=1, clock=None, **kw):
        fio = FakeDisk()
        dirs = [str(tmp_path / f"cl{i}") for i in range(n_dirs)]
        base = dict(root_dir=str(tmp_path / "root"), auto_create_topics=True, commitlog_dirs=dirs, segment_size_bytes=SEG,
                    preallocate_next_segment=False, index_slots=64, index_entries=1024,
                    consume_queue_units_per_segment=16, clean_resource_interval_ms=3_600_000,
                    delete_commit_log_files_interval_ms=0, topic_queues_default=1)
        base.update(kw)
        clock = clock or ManualClock(local_ms(2026, 11, 21, 12))
        s = MessageStore(StoreConfig(**base), fio=fio, clock=clock).start()
        made.append(s)
        return s, fio, clock, dirs

    yield make
    for s in made:
        s.shutdown()


def fill_segments(s, clock, n_segments, age_step_h=0.0):
    """Write until the log has n_segments + 1 segments; each sealed one is age_step_h older than the next."""
    body = b"x" * 3000
    while len(s.segments) < n_segments + 1:
        r = s.put(Message("T", body))
        assert r.ok, r
        clock.advance(age_step_h * 3600 / 20)
    return [mf.path for mf in s.segments.segments]


def test_nothing_triggers_nothing_is_deleted(env):
    s, fio, clock, _ = env()
    fill_segments(s, clock, 3)
    clock.advance(100 * 3600)          # expired, but it is not 04:00 and there is room
    s.clock._now_ms = local_ms(2026, 11, 25, 12)
    s.clean()
    assert len(s.segments) == 4
    assert s.cleaner.last.triggers == []


def test_delete_when_hour_deletes_expired_segments_only_from_the_head(env):
    clock = ManualClock(local_ms(2026, 11, 21, 10))
    s, fio, clock, _ = env(clock=clock, file_reserved_time_hours=72)
    paths = fill_segments(s, clock, 3)
    s.segments.segments[1].last_store_timestamp_ms = local_ms(2026, 11, 25, 3)   # the 2nd is young
    clock._now_ms = local_ms(2026, 11, 25, 3, 59)
    s.clean()
    assert len(s.segments) == 4, "03:59 is not delete time"
    clock._now_ms = local_ms(2026, 11, 25, 4, 0)
    s.clean()
    assert s.cleaner.last.triggers == ["time"]
    assert s.cleaner.last.deleted == [paths[0]], "stops at the first unexpired segment: never from the middle"
    assert "nothing expired" in s.cleaner.last.why_not
    assert not os.path.exists(paths[0])


def test_delete_when_list(env):
    s, fio, clock, _ = env(delete_when="04;16", file_reserved_time_hours=1)
    fill_segments(s, clock, 2)
    clock._now_ms = local_ms(2026, 11, 22, 16, 30)
    s.clean()
    assert len(s.cleaner.last.deleted) == 2


def test_manual_trigger_forces_twenty_rounds(env):
    s, fio, clock, _ = env(file_reserved_time_hours=1)
    s.trigger_delete_expired()
    for i in range(20):
        assert s.cleaner.manual_rounds == 20 - i
        s.clean()
        assert s.cleaner.last.triggers == ["manual"]
    s.clean()
    assert s.cleaner.last.triggers == []


def test_batch_max_per_round(env):
    s, fio, clock, _ = env(file_reserved_time_hours=1, delete_file_batch_max=3)
    fill_segments(s, clock, 7)
    clock.advance(2 * 3600)
    s.trigger_delete_expired()
    s.clean()
    assert len(s.cleaner.last.deleted) == 3
    s.clean()
    assert len(s.cleaner.last.deleted) == 3
    s.clean()
    assert len(s.cleaner.last.deleted) == 1
    assert len(s.segments) == 1
    s.clean()
    assert s.cleaner.last.deleted == [] and s.cleaner.last.why_not == "only the active segment is left"


def test_held_segment_is_retried_then_destroyed_forcibly(env):
    s, fio, clock, _ = env(file_reserved_time_hours=1, destroy_mapped_file_interval_forcibly_ms=120_000)
    paths = fill_segments(s, clock, 2)
    clock.advance(2 * 3600)
    head = s.segments.segments[0]
    assert head.hold()
    s.trigger_delete_expired()
    s.clean()
    assert s.cleaner.last.deleted == []
    assert "held by 1 reader" in s.cleaner.last.why_not
    # out of service: its name is gone at once (the reader reads on through its mapping), the
    # log's list keeps it until it is released or forced
    assert not os.path.exists(paths[0]) and len(s.segments) == 3 and s.segments.segments[0] is head
    clock.advance(60)
    s.clean()
    assert s.cleaner.last.deleted == [], "before the forced-destroy interval the reader keeps it"
    clock.advance(61)
    s.clean()
    assert s.cleaner.last.deleted[0] == paths[0]
    head.release()


def test_space_above_max_used_deletes_expired_outside_delete_time(env):
    s, fio, clock, dirs = env(file_reserved_time_hours=1)
    fill_segments(s, clock, 3)
    clock.advance(2 * 3600)
    fio.percent[dirs[0]] = 80
    s.clean()
    assert s.cleaner.last.triggers == ["space"] and not s.cleaner.last.clean_immediately
    assert len(s.cleaner.last.deleted) == 3


def test_space_above_forcibly_deletes_unexpired(env):
    s, fio, clock, dirs = env(file_reserved_time_hours=72)
    fill_segments(s, clock, 3)
    fio.percent[dirs[0]] = 80
    s.clean()
    assert s.cleaner.last.deleted == [] and "nothing expired" in s.cleaner.last.why_not
    assert s.disk_status()["last_round"]["why_not_code"] == "nothing-expired", "the status says why nothing was deleted"
    fio.percent[dirs[0]] = 86
    s.clean()
    assert s.cleaner.last.clean_immediately and len(s.cleaner.last.deleted) == 3


def test_disk_full_refuses_puts_reads_go_on_and_the_flag_clears_by_itself(env):
    s, fio, clock, dirs = env()
    r0 = s.put(Message("T", b"before"))
    fio.percent[dirs[0]] = 91
    s.check_disk()
    r = s.put(Message("T", b"refused"))
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "disk full" in r.error and dirs[0] in r.error and "91.0%" in r.error
    g = s.get("g", "T", 0, 0)
    assert g.status is GetStatus.FOUND and g.messages[0].body == b"before"
    assert s.query_by_key("T", "none") == []
    fio.percent[dirs[0]] = 88             # below warning, above clean-forcibly: still full (hysteresis)
    s.check_disk()
    assert s.put(Message("T", b"still")).status is PutStatus.SERVICE_NOT_AVAILABLE
    fio.percent[dirs[0]] = 84
    s.check_disk()
    r2 = s.put(Message("T", b"again"))
    assert r2.ok, "no restart needed"
    assert r2.queue_offset == r0.queue_offset + 1


def test_consume_queue_directory_has_its_own_full_flag(env, tmp_path):
    s, fio, clock, dirs = env()
    fio.percent[str(tmp_path / "root")] = 95
    s.check_disk()
    r = s.put(Message("T", b"x"))
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and "consume-queue directory" in r.error


def test_placement_skips_a_directory_above_clean_forcibly(env):
    s, fio, clock, dirs = env(n_dirs=2)
    fio.percent[dirs[0]] = 20
    fio.percent[dirs[1]] = 86               # more free bytes? no: 14 GB free vs 80 GB, but skip it anyway
    s.check_disk()
    fill_segments(s, clock, 4)
    assert {mf.directory for mf in s.segments.segments} == {dirs[0]}
    st = {d["path"]: d for d in s.disk_status()["directories"]}
    assert st[dirs[1]]["state"] == DirState.NO_NEW_SEGMENTS.value


def test_placement_picks_most_free_space_and_all_above_forcibly_still_writes(env):
    s, fio, clock, dirs = env(n_dirs=2)
    fio.percent[dirs[0]] = 50
    fio.percent[dirs[1]] = 30
    s.check_disk()
    s.put(Message("T", b"x" * 3000))
    assert s.segments.last.directory == dirs[1]
    fio.percent[dirs[0]] = 87
    fio.percent[dirs[1]] = 88
    s.check_disk()
    assert s.write_refusal() is None, "writes are refused only at the warning ratio"
    fill_segments(s, clock, 3)
    assert s.segments.last.directory == dirs[0], "all above clean-forcibly: the one with most free space"


def test_per_directory_thresholds(env):
    s, fio, clock, dirs = env(n_dirs=2)
    cfg = s.config
    s.shutdown()
    cfg = cfg.replace(per_dir_thresholds=(f"{dirs[0]}=50,60,70",))
    s = MessageStore(cfg, fio=fio, clock=clock).start()
    try:
        fio.percent[dirs[0]] = 72
        fio.percent[dirs[1]] = 72
        s.check_disk()
        st = {d["path"]: d for d in s.disk_status()["directories"]}
        assert st[dirs[0]]["state"] == "full" and st[dirs[1]]["state"] == "writable"
        assert s.write_refusal() is None, "another directory can still take writes"
    finally:
        s.shutdown()


def test_missing_directory_goes_offline_once_and_the_store_serves_from_the_other(env, caplog):
    import shutil
    s, fio, clock, dirs = env(n_dirs=2)
    fio.percent[dirs[0]] = 10
    fio.percent[dirs[1]] = 50
    s.check_disk()
    s.put(Message("T", b"a" * 3000))
    assert s.segments.last.directory == dirs[0]
    shutil.rmtree(dirs[0])
    with caplog.at_level("ERROR"):
        for _ in range(5):
            s.check_disk()
    offline = [r for r in caplog.records if "offline" in r.getMessage()]
    assert len(offline) == 1, "reported once, not in a loop"
    st = {d["path"]: d for d in s.disk_status()["directories"]}
    assert st[dirs[0]]["state"] == "offline" and st[dirs[0]]["offline_reason"]
    r = s.put(Message("T", b"b" * 3000))
    assert r.ok and s.segments.last.directory == dirs[1], "the active segment moved to the other directory"
    g = s.get("g", "T", 0, 0, max_count=10)
    assert [m.body[:1] for m in g.messages] == [b"a", b"b"], "the old segment is still mapped and readable"


def test_queue_cleanup_corrects_min_offset(env):
    s, fio, clock, dirs = env(file_reserved_time_hours=1)
    rs = []
    while len(s.segments) < 6:
        rs.append(s.put(Message("T", b"y" * 3000)))
    clock.advance(2 * 3600)
    s.trigger_delete_expired()
    s.clean()
    log_min = s.segments.min_offset
    first_live = next(r.queue_offset for r in rs if r.commitlog_offset >= log_min)
    assert s.min_offset("T", 0) == first_live
    g = s.get("g", "T", 0, 0)
    assert g.status is GetStatus.OFFSET_TOO_SMALL and g.next_offset == first_live
    g = s.get("g", "T", 0, first_live)
    assert g.status is GetStatus.FOUND and g.messages[0].commitlog_offset >= log_min
    cq = s.queues.get("T", 0)
    assert cq.file_starts()[0] > 0, "consume-queue files wholly before the log were deleted"
    assert s.check().ok


def test_forecast_answers_when_to_add_disk(env):
    s, fio, clock, dirs = env(file_reserved_time_hours=72)
    fio.percent[dirs[0]] = 40
    s.check_disk()
    for _ in range(10):
        s.put_batch([Message("T", b"z" * 1000) for _ in range(10)])
        clock.advance(1.0)
        s.check_disk()
    st = s.disk_status()
    f = st["forecast"]
    assert f["ingest_bytes_per_s"] > 5000
    eta = f["seconds_until_percent"]
    assert set(eta) == {"75", "85", "90"} and 0 < eta["75"] < eta["85"] < eta["90"]
    assert f["retention_hours_possible"] is not None and f["retention_hours_possible"] > 72
    fio.percent[dirs[0]] = 76
    s.check_disk()
    assert s.disk_status()["forecast"]["seconds_until_percent"]["75"] == 0


def test_a_change_of_rate_shows_in_the_forecast_within_a_minute(env):
    s, fio, clock, dirs = env(file_reserved_time_hours=72)
    fio.percent[dirs[0]] = 40
    s.check_disk()

    def write(seconds: int, batches_per_s: int) -> float:
        for _ in range(seconds):
            for _ in range(batches_per_s):
                s.put_batch([Message("T", b"z" * 1000) for _ in range(10)])
            clock.advance(1.0)
            s.check_disk()
        return s.disk_status()["forecast"]["ingest_bytes_per_s"]

    slow = write(300, 1)                 # five minutes at one rate
    fast = write(60, 4)                  # then a minute at four times the rate
    assert 3.5 * slow <= fast <= 4.5 * slow, (slow, fast)
    assert write(61, 0) == 0, "a stop shows as no ingest"
    assert s.disk_status()["forecast"]["advice"].startswith("nothing written")


def test_while_writes_are_refused_the_forecast_says_now(env):
    s, fio, clock, dirs = env(file_reserved_time_hours=72)
    for p in dirs:
        fio.percent[p] = 91              # every commit-log directory at the warning level
    s.check_disk()
    assert s.write_refusal() is not None
    st = s.disk_status()
    assert st["forecast"]["seconds_until_percent"]["90"] == 0
    assert st["forecast"]["advice"].startswith("writes are refused now")
    per = {d["path"]: d["seconds_until_percent"] for d in st["directories"]}
    assert all(per[p]["90"] == 0 for p in dirs)


def test_one_transient_eio_does_not_refuse_writes_until_a_restart(stores):
    """A single EIO while a segment is made fails that put; the directory passes the next disk
    checks and writes go on, no restart."""
    fio = FaultyFileIO()
    s = stores(memory_config(segment_size_bytes=8 * 1024), fio)
    for _ in range(100):
        fio.fail("fsync_dir", errno.EIO, MEMORY_ROOT + "/commitlog", times=1)   # armed for the next segment
        r = s.put(Message("T", b"x" * 1000))
        fio.clear_faults()
        if not r.ok:
            break
    assert not r.ok, "a segment creation met the EIO"
    for _ in range(3):
        s.check_disk()                          # the disk-check service runs: the directory is fine
    r = s.put(Message("T", b"y"))
    assert r.ok, r.error


def test_overall_and_per_directory_forecasts_agree_when_something_else_fills_the_disk(env):
    """The log writes little, something else (another program, a log file) fills the file
    system fast: the overall forecast and the directory's are one and the same measure (how fast
    the file system fills), and the advice says what fills it."""
    s, fio, clock, dirs = env(file_reserved_time_hours=72)
    pct = 40.0
    fio.percent[dirs[0]] = pct
    s.check_disk()
    for _ in range(90):                  # 90 s: 10 KB/s to the log, 0.1 % of 100 GB a second besides
        s.put_batch([Message("T", b"z" * 1000) for _ in range(10)])
        pct += 0.1
        fio.percent[dirs[0]] = pct
        clock.advance(1.0)
        s.check_disk()
    st = s.disk_status()
    f = st["forecast"]
    per = {d["path"]: d for d in st["directories"]}[dirs[0]]
    assert f["fill_bytes_per_s"] == pytest.approx(per["growth_bytes_per_s"], rel=0.01)
    assert f["fill_bytes_per_s"] > 100 * f["ingest_bytes_per_s"] > 0
    for ratio in ("75", "85", "90"):
        assert f["seconds_until_percent"][ratio] == pytest.approx(per["seconds_until_percent"][ratio], rel=0.01)
    # 75 % of 100 GB from 49 % at ~100 MB/s: about 4 min, not the months the log's 10 KB/s would take
    assert 200 < f["seconds_until_percent"]["75"] < 450, f
    assert "something else fills them too" in f["advice"] and "75% in" in f["advice"], f["advice"]
    assert "levels off" not in f["advice"], "the log is not what fills the disk: its expiry does not stop it"


def test_a_preallocated_segment_is_not_the_disk_filling_in_a_jump(env):
    """The segments are allocated whole when made: the usage of the file system jumps by a
    segment at a roll; the forecast takes off what is allocated but not written yet, so its rate
    is the rate of the writes."""
    s, fio, clock, dirs = env(file_reserved_time_hours=72, segment_size_bytes=4 << 20)

    class Allocated(type(fio)):
        """Usage: 40 GB plus every byte allocated in the commit-log directory."""

        def disk_usage(self, path):
            used = 40 * GB + sum(os.path.getsize(os.path.join(dirs[0], n)) for n in os.listdir(dirs[0]))
            return DiskUsage(100 * GB, used, 100 * GB - used)
    fio.__class__ = Allocated
    s.check_disk()
    rates = []
    for _ in range(200):                 # 200 s at 50 KB/s: a 4 MiB segment made every ~80 s
        s.put_batch([Message("T", b"z" * 1000) for _ in range(50)])
        clock.advance(1.0)
        s.check_disk()
        rates.append(s.disk_status()["forecast"])
    assert len(s.segments) >= 3
    for f in rates[70:]:                 # (the window of the first minute holds the usage before the fake's)
        assert f["fill_bytes_per_s"] == pytest.approx(f["ingest_bytes_per_s"], rel=0.1), f
    last = rates[-1]
    assert "levels off" in last["advice"] and "something else" not in last["advice"], last["advice"]


def test_while_the_disk_alarm_holds_sends_the_forecast_says_now(env):
    s, fio, clock, dirs = env(file_reserved_time_hours=72)
    fio.percent[dirs[0]] = 86
    s.check_disk()
    assert s.write_refusal() is None
    s.disk.writes_held = "disk alarm: free 14.0 GiB < disk_free_limit_bytes 15.0 GiB under x"
    st = s.disk_status()
    assert st["forecast"]["seconds_until_percent"]["90"] == 0
    assert st["forecast"]["advice"].startswith("sends are held now (disk alarm")
    per = {d["path"]: d["seconds_until_percent"] for d in st["directories"]}
    assert per[dirs[0]]["90"] == 0 and per[dirs[0]]["85"] == 0
    s.disk.writes_held = None
    assert s.disk_status()["forecast"]["seconds_until_percent"]["90"] != 0


@pytest.mark.parametrize("err", [errno.EMFILE, errno.ENFILE, errno.ENOMEM])
def test_an_error_that_is_not_the_disks_never_takes_a_directory_offline(stores, caplog, err):
    """Out of file descriptors (or memory) while the directory is checked or a segment made: the
    directory keeps its state, said in one warning; writes go on once the process has them again."""
    fio = FaultyFileIO()
    s = stores(memory_config(segment_size_bytes=8 * 1024), fio)
    cl = MEMORY_ROOT + "/commitlog"
    with caplog.at_level("WARNING"):
        for op in ("open", "disk_usage", "is_dir"):
            fio.fail(op, err, cl, times=5)
            for _ in range(5):
                s.check_disk()
            fio.clear_faults()
        for _ in range(50):                     # segments made while the descriptors are out
            fio.fail("open", err, cl, times=1)
            s.put(Message("T", b"x" * 1000))
            fio.clear_faults()
    st = {d["path"]: d for d in s.disk_status()["directories"]}
    assert st[cl]["state"] == "writable" and st[cl]["offline_reason"] is None
    assert not [r for r in caplog.records if "offline" in r.getMessage()]
    assert len([r for r in caplog.records if "not the disk" in r.getMessage()]) == 1, "once a minute at most"
    assert s.put(Message("T", b"after")).ok


def test_an_offline_directory_comes_back_by_itself_once_it_works(stores, caplog):
    """EIO on its marker: offline, puts refused (its only directory); the fault gone, the next check
    brings it back, said once, and puts go on, no restart."""
    fio = FaultyFileIO()
    s = stores(memory_config(segment_size_bytes=8 * 1024), fio)
    cl = MEMORY_ROOT + "/commitlog"
    assert s.put(Message("T", b"before")).ok
    fio.fail("pwrite", errno.EIO, cl + "/.tidemq-dir", times=1000)
    s.check_disk()
    st = {d["path"]: d for d in s.disk_status()["directories"]}
    assert st[cl]["state"] == "offline"
    for _ in range(3):
        s.check_disk()                          # still failing: still offline, nothing said again
    fio.clear_faults()
    with caplog.at_level("WARNING"):
        s.check_disk()
        s.check_disk()
    st = {d["path"]: d for d in s.disk_status()["directories"]}
    assert st[cl]["state"] == "writable" and st[cl]["offline_reason"] is None
    assert len([r for r in caplog.records if "is back" in r.getMessage()]) == 1
    rs = [s.put(Message("T", b"y" * 1000)) for _ in range(30)]     # new segments go there again
    assert all(r.ok for r in rs), [r.error for r in rs if not r.ok][:3]
