"""Disk space on real, small file systems: tmpfs mounts of a few MiB.

The fake-disk tests (test_disk.py) check the rules; these check that the rules
hold on a real file system, where usage moves only because the store creates
and deletes segments: placement over directories of different sizes, a disk
written far past its size with short retention, a directory unmounted or made
read-only under a running store, and the consume-queue directory filling up.

Needs root (mount). Every mount is made under pytest's tmp_path and removed in
teardown, after the stores using it are shut down (``umount -l`` if busy).

The services run in the background as usual, but clean_resource_interval_ms is
large so the cleanup service never runs during a test: the tests call
``check_disk()`` and ``clean()`` themselves. (The disk-check service still
measures every second; it only measures.) Commit-log directories are the tmpfs
mounts; the store root (consume queues, config, checkpoint) is on the real disk,
except in the consume-queue test.
Segments are 1 MiB and are preallocated (posix_fallocate takes tmpfs pages), so
a directory's usage is its segments plus one page for the marker file.
"""

from __future__ import annotations

import json
import logging
import os
import random
import struct
import threading
import time
from collections import Counter

import pytest
from click.testing import CliRunner

from tidemq.cli.main import cli
from tidemq.config import MIB
from tidemq.io import ManualClock
from tidemq.store import GetStatus, Message, MessageStore, PutStatus, StoreConfig
from tidemq.store.disk import DirState
from tidemq.store.mapped_file import parse_segment_name

from ..support.tmpfs import mounted, run
from ..support.wait import patience

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="mounting tmpfs needs root")

SEG = 1 * MIB
BODY_PAD = b"p" * (1024 - 8)
TOPIC = "T"


# Helpers --------------------------------------------------------------------------------

def fs_usage(d: str) -> tuple[int, int, int, float]:
    """(capacity, used, free, used percent) as df and the store count them."""
    st = os.statvfs(d)
    free = st.f_bavail * st.f_frsize
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    return used + free, used, free, 100.0 * used / (used + free)


def not_now_hour(now_ms: float | None = None) -> str:
    """A delete_when hour the test cannot run in (by the store's clock): only the space trigger deletes."""
    t = time.time() if now_ms is None else now_ms / 1000
    return "%02d" % ((time.localtime(t).tm_hour + 12) % 24)


def store_config(root, dirs, **kw) -> StoreConfig:
    base = dict(root_dir=str(root), auto_create_topics=True, commitlog_dirs=tuple(dirs), segment_size_bytes=SEG,
                consume_queue_units_per_segment=1000, index_enabled=False, preallocate_next_segment=False,
                clean_resource_interval_ms=600_000, delete_commit_log_files_interval_ms=0,
                delete_when=not_now_hour(), topic_queues_default=4)
    base.update(kw)
    return StoreConfig(**base)


def body(seq: int) -> bytes:
    return struct.pack(">Q", seq) + BODY_PAD


def seq_of(b: bytes) -> int:
    return struct.unpack_from(">Q", b)[0]


class Writer:
    """Puts batches of 1 KiB messages; remembers (queue, queue offset) -> sequence number."""

    def __init__(self, s: MessageStore, batch: int = 64) -> None:
        self.s = s
        self.batch = batch
        self.seq = 0
        self.expected: dict[tuple[int, int], int] = {}
        self.statuses: Counter = Counter()
        self.ok_bytes = 0

    def put(self) -> list:
        msgs = [Message(TOPIC, body(self.seq + i)) for i in range(self.batch)]
        rs = self.s.put_batch(msgs)        # an exception (ENOSPC...) fails the test right here
        for i, r in enumerate(rs):
            self.statuses[r.status] += 1
            if r.ok:
                self.expected[(r.queue_id, r.queue_offset)] = self.seq + i
                self.ok_bytes += r.size
        self.seq += self.batch
        return rs

    def verify(self, g, strict: bool = True) -> None:
        """The messages are the ones put there (strict: and their put has returned)."""
        for m in g.messages:
            want = self.expected.get((m.queue_id, m.queue_offset))
            if want is None and not strict:
                continue              # another thread: the put of it has not returned yet
            assert want is not None and seq_of(m.body) == want, (m.queue_id, m.queue_offset, seq_of(m.body), want)
            assert m.body[8:] == BODY_PAD


def dir_states(s: MessageStore) -> dict[str, str]:
    return {d["path"]: d["state"] for d in s.disk_status()["directories"]}


# (a) Placement over three sizes ---------------------------------------------------------

def test_placement_by_free_space_over_16_32_64_mib(env, tmp_path):
    """Three commit-log directories of 16, 32 and 64 MiB (112 MiB), filled with 1 KiB messages.

    Placement is "the allowed directory with the most free bytes", so what evens out is
    *free bytes*, not ratios: the 64 MiB disk takes every segment until its free space
    comes down to the 32 MiB disk's, then those two alternate, then all three. While every
    directory is below the clean-forcibly ratio (85 %) the free bytes of the directories
    differ by at most one segment (the bound checked at 70 % of the total), and the ratios
    differ a lot (about 30 / 65 / 82 % there): the big disk is fuller in percent.

    The ratios come together at the clean-forcibly ratio: a directory above it takes no new
    segment while another is below, so each directory stops at 85 % plus at most one
    segment, and when the last one gets there all ratios lie within one segment of the
    smallest directory (100 * 1 MiB / 16 MiB = 6.25 points). Above it on every directory,
    segments again go by free space until each reaches the warning ratio (90 %) and puts are
    refused with 'disk full'. Every new segment is checked against the rule at the moment
    it was made (the store's states and the measured free bytes just before the put).
    """
    dirs = [env.tmpfs("cl16", 16), env.tmpfs("cl32", 32), env.tmpfs("cl64", 64)]
    d16, d32, d64 = dirs
    s = env.open(store_config(tmp_path / "root", dirs))
    w = Writer(s)
    caps = {d: fs_usage(d)[0] for d in dirs}
    total_cap = sum(caps.values())
    placed: list[tuple[str, dict, dict]] = []      # (directory, states before, free bytes before)
    snap70 = snap85 = None
    skipped_full = 0
    for _ in range(5000):
        states = {d: s.disk.dirs[d].state for d in dirs}
        free = {d: fs_usage(d)[2] for d in dirs}
        n = len(s.segments)
        rs = w.put()
        assert all(r.status in (PutStatus.PUT_OK, PutStatus.SERVICE_NOT_AVAILABLE) for r in rs), \
            {r.status for r in rs}
        new = s.segments.segments[n:]
        assert len(new) <= 1, "a 64 KiB batch makes at most one segment"
        for mf in new:
            placed.append((mf.directory, states, free))
            writable = [d for d in dirs if states[d] is DirState.WRITABLE]
            allowed = writable or [d for d in dirs if states[d] is DirState.NO_NEW_SEGMENTS]
            assert mf.directory in allowed, (mf.directory, states)
            assert free[mf.directory] == max(free[d] for d in allowed), (mf.directory, free, states)
            if writable and len(writable) < len(dirs):
                skipped_full += 1
        s.check_disk()
        usage = {d: fs_usage(d) for d in dirs}
        total = 100.0 * sum(u[1] for u in usage.values()) / total_cap
        if snap70 is None and total >= 70:
            snap70 = usage
        if snap85 is None and all(s.disk.dirs[d].state is not DirState.WRITABLE for d in dirs):
            snap85 = usage
        if not rs[-1].ok:
            break
    else:
        pytest.fail("the directories never filled up")

    # at 70 % of the total: equal free bytes (within one segment), ratios far apart
    assert snap70 is not None
    free70 = [u[2] for u in snap70.values()]
    ratios70 = [round(u[3], 1) for u in snap70.values()]
    assert max(free70) - min(free70) <= SEG, free70
    assert ratios70[0] < ratios70[1] < ratios70[2], "most free bytes: the big disk is the fullest in percent"
    # all at clean-forcibly: the ratios within one segment of the smallest directory
    assert snap85 is not None
    ratios85 = [round(u[3], 2) for u in snap85.values()]
    bound = 100.0 * SEG / caps[d16] + 0.1
    assert all(85 <= r < 85 + 100.0 * SEG / caps[d] + 0.1 for r, d in zip(ratios85, dirs)), ratios85
    assert max(ratios85) - min(ratios85) <= bound, (ratios85, bound)
    assert skipped_full > 0, "segments were placed while a directory above clean-forcibly was skipped"
    # a directory above clean-forcibly took nothing while another was writable: checked per segment above;
    # and the 64 MiB one got there first
    first_nns = next(i for i, (_d, st, _f) in enumerate(placed) if DirState.NO_NEW_SEGMENTS in st.values())
    assert placed[first_nns][1][d64] is DirState.NO_NEW_SEGMENTS

    # the end: every directory at the warning ratio, puts refused with a clear reason
    final = {d: fs_usage(d)[3] for d in dirs}
    refusal = s.write_refusal()
    assert refusal and "disk full" in refusal and all(d in refusal for d in dirs)
    assert all(dir_states(s)[d] == "full" for d in dirs)
    for d in dirs:
        assert 90 <= final[d] < 90 + 100.0 * SEG / caps[d] + 0.1, (d, final[d])
    assert w.statuses[PutStatus.CREATE_MAPPED_FILE_FAILED] == 0
    assert s.put(Message(TOPIC, b"x")).status is PutStatus.SERVICE_NOT_AVAILABLE
    g = s.get("g", TOPIC, 0, 0, max_count=8)
    assert g.status is GetStatus.FOUND, "reads go on when the disks are full"
    w.verify(g)
    rep = s.check()
    assert rep.ok, rep.problems[:5]
    counts = Counter(mf.directory for mf in s.segments.segments)
    print(f"\n[placement] at 70% of 112 MiB: free MiB {[round(f / MIB, 2) for f in free70]}, "
          f"ratios % {ratios70}; all at clean-forcibly: ratios % {ratios85} "
          f"(spread {max(ratios85) - min(ratios85):.2f} points, bound {bound:.2f}); "
          f"final ratios % {[round(final[d], 2) for d in dirs]}; "
          f"segments 16/32/64: {[counts[d] for d in dirs]}; "
          f"segments placed while a directory was skipped: {skipped_full}")


# (b) Four times the disk, short retention -----------------------------------------------

class Reader(threading.Thread):
    """Gets at random offsets of random queues while the writer and the cleaner run."""

    def __init__(self, s: MessageStore, w: Writer) -> None:
        super().__init__(daemon=True)
        self.s, self.w = s, w
        self.stop = threading.Event()
        self.statuses: Counter = Counter()
        self.errors: list[str] = []
        self.rng = random.Random(5)

    def run(self) -> None:
        ok = {GetStatus.FOUND, GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_ONE,
              GetStatus.OFFSET_OVERFLOW_BADLY, GetStatus.MESSAGE_WAS_REMOVING, GetStatus.NO_MESSAGE_IN_QUEUE,
              GetStatus.OFFSET_FOUND_NULL}
        while not self.stop.is_set():
            try:
                q = self.rng.randrange(4)
                mn, mx = self.s.min_offset(TOPIC, q), self.s.max_offset(TOPIC, q)
                off = self.rng.randint(max(0, mn - 50), mx + 1)
                g = self.s.get("r", TOPIC, q, off, max_count=8)
                self.statuses[g.status] += 1
                if g.status not in ok:
                    self.errors.append(f"get {q}@{off}: {g}")
                self.w.verify(g, strict=False)
            except Exception as e:  # noqa: BLE001
                self.errors.append(repr(e))
            time.sleep(0.0005)


@pytest.mark.parametrize("preallocate", [False, True], ids=["no-prealloc", "prealloc"])
def test_four_times_the_disk_with_short_retention(env, tmp_path, preallocate):
    """One 64 MiB directory takes 256 MiB of 1 KiB messages at full speed, with retention 0 h
    (every sealed segment is expired at once; the hour trigger is off, so space alone makes
    the cleaner delete). clean() runs every 256 batches (about 18 MiB), more than one round
    deletes (delete_file_batch_max=10 MiB), so the directory reaches the warning ratio again
    and again. Checked:

    * no exception ever comes out of a put; every result is PUT_OK or SERVICE_NOT_AVAILABLE
      (CREATE_MAPPED_FILE_FAILED would mean the disk ran out before the flag was set);
    * SERVICE_NOT_AVAILABLE only while the directory is full: the store says 'disk full' and
      the directory's state is full; the first refusal of an episode sees at least 90 % on the
      file system, later ones at least 85 % (the flag clears below clean-forcibly: hysteresis);
    * the directory never goes beyond the warning ratio by more than the segments allocated
      ahead (one, plus the pre-made one);
    * puts succeed again after a cleanup, without a restart;
    * gets at a consumer's cursor: FOUND with the right bodies, OFFSET_TOO_SMALL below the
      queue's minimum (the consumer then jumps to it), OFFSET_OVERFLOW_ONE at the end; a
      reader thread gets at random offsets meanwhile and only ever sees proper statuses;
    * store.check() is ok at the end and after a restart.
    """
    d = env.tmpfs("cl64", 64)
    cfg = store_config(tmp_path / "root", [d], file_reserved_time_hours=0.0, delete_file_batch_max=10,
                       preallocate_next_segment=preallocate)
    s = env.open(cfg)
    s.create_topic(TOPIC, 4)
    w = Writer(s)
    reader = Reader(s, w)
    reader.start()
    cap = fs_usage(d)[0]
    seg_pct = 100.0 * SEG / cap
    ahead = 2 if preallocate else 1
    clean_every = 256
    peak = 0.0
    refused = 0
    episodes: list[float] = []            # seconds from the first refusal to the next success
    refused_since: float | None = None
    high_since_writable = 0.0             # the highest ratio seen since the directory was last not full
    cursor = 0
    cursor_statuses: Counter = Counter()
    batches = 0
    try:
        while w.ok_bytes < 4 * cap:
            batches += 1
            assert batches < 20_000, f"bounded: {batches} batches, {w.ok_bytes / MIB:.0f} MiB accepted, {w.statuses}"
            rs = w.put()
            kinds = {r.status for r in rs}
            assert kinds <= {PutStatus.PUT_OK, PutStatus.SERVICE_NOT_AVAILABLE}, \
                [r for r in rs if r.status not in (PutStatus.PUT_OK, PutStatus.SERVICE_NOT_AVAILABLE)][:1]
            ratio = fs_usage(d)[3]
            peak = max(peak, ratio)
            high_since_writable = max(high_since_writable, ratio)
            assert ratio < 90 + ahead * seg_pct + 0.1, f"{ratio:.2f}% used: writes were not refused in time"
            now = time.monotonic()
            bad = [r for r in rs if not r.ok]
            if bad:
                refused += len(bad)
                assert all("disk full" in r.error and d in r.error for r in bad), bad[0].error
                assert s.disk.refusal is not None
                assert s.disk.dirs[d].state is DirState.FULL
                if refused_since is None:
                    refused_since = now
                    # the flag is set by the disk check at >= 90 %: what the file system held at its
                    # highest since the directory was last seen not full (a reader releasing a head
                    # segment out of service frees it at once, also between the flag and this look)
                    assert max(ratio, high_since_writable) >= 90, \
                        f"refused at {ratio:.2f}% (at most {high_since_writable:.2f}% since it was writable)"
                else:
                    assert ratio >= 85, f"still refused at {ratio:.2f}%"
            if rs[-1].ok and refused_since is not None:
                episodes.append(now - refused_since)
                refused_since = None
            if s.disk.dirs[d].state is not DirState.FULL:
                high_since_writable = ratio
            # a consumer on queue 0
            g = s.get("c", TOPIC, 0, cursor, max_count=8)   # slower than the writer: falls behind
            cursor_statuses[g.status] += 1
            if g.status is GetStatus.FOUND:
                w.verify(g)
                assert [m.queue_offset for m in g.messages] == list(range(cursor, cursor + len(g.messages)))
                cursor = g.next_offset
            elif g.status is GetStatus.OFFSET_TOO_SMALL:
                assert cursor < g.min_offset
                cursor = g.min_offset
            elif g.status is GetStatus.MESSAGE_WAS_REMOVING:
                # only while a deleted segment is still held by the reader thread
                assert not s.segments.segments[0].available, g
                cursor = g.next_offset
            else:
                assert g.status is GetStatus.OFFSET_OVERFLOW_ONE, g
            if batches % clean_every == 0:
                s.clean()
                rnd = s.cleaner.last
                if rnd.triggers:
                    assert rnd.triggers == ["space"], rnd.triggers
    finally:
        reader.stop.set()
        reader.join(patience())
    assert not reader.is_alive() and reader.statuses, "the reader ran and stopped"
    assert not reader.errors, reader.errors[:5]
    assert w.statuses[PutStatus.CREATE_MAPPED_FILE_FAILED] == 0
    assert refused > 0 and episodes, "the test must reach the warning ratio"
    assert refused_since is None, "the last refusal was followed by a success"
    assert s.cleaner.deleted_bytes_total >= 2 * cap
    assert cursor_statuses[GetStatus.OFFSET_TOO_SMALL] > 0
    rep = s.check()
    assert rep.ok, rep.problems[:5]
    st = s.disk_status()
    assert st["flags"]["write_refusal"] is None or "disk full" in st["flags"]["write_refusal"]
    min_off = s.segments.min_offset
    print(f"\n[4x disk, prealloc={preallocate}] {batches} batches, {w.ok_bytes / MIB:.0f} MiB accepted, "
          f"{s.cleaner.deleted_bytes_total / MIB:.0f} MiB deleted; peak used {peak:.2f}% "
          f"(warning 90%, one segment = {seg_pct:.2f} points); refused puts {refused} in {len(episodes)} "
          f"episode(s); first refusal -> next success: max {max(episodes) * 1000:.1f} ms, "
          f"median {sorted(episodes)[len(episodes) // 2] * 1000:.1f} ms (bounded by the test's cleanup "
          f"cadence); consumer gets {dict((k.name, v) for k, v in cursor_statuses.items())}; "
          f"reader gets {dict((k.name, v) for k, v in reader.statuses.items())}")

    # after a restart: the log is whole, reads and writes go on
    s.shutdown()
    s2 = env.open(cfg)
    rep = s2.check()
    assert rep.ok, rep.problems[:5]
    assert s2.segments.min_offset == min_off
    g = s2.get("c", TOPIC, 0, s2.min_offset(TOPIC, 0), max_count=4)
    assert g.status is GetStatus.FOUND
    w.verify(g)
    g = s2.get("c", TOPIC, 0, 0)
    assert g.status is GetStatus.OFFSET_TOO_SMALL
    if s2.write_refusal() is not None:
        s2.clean()
    assert s2.put(Message(TOPIC, body(10**9))).ok


# (c) A directory unmounted or made read-only under a running store ----------------------

def _make_read_only(d: str) -> str:
    """Remount read-only. A plain `remount,ro` is refused (EBUSY) while the store holds
    segments open for writing, so then a read-only bind mount goes on top of the directory:
    every new open through the path fails with EROFS, the open segments stay mapped."""
    r = run("mount", "-o", "remount,ro", d)
    if r.returncode == 0:
        return "remount,ro"
    assert run("mount", "--bind", d, d).returncode == 0
    r = run("mount", "-o", "remount,bind,ro", d)
    assert r.returncode == 0, r.stderr
    return "read-only bind mount"


@pytest.mark.parametrize("how", ["umount-lazy", "read-only"])
def test_directory_lost_under_a_running_store_goes_offline_once(env, tmp_path, caplog, how):
    """Two 16 MiB commit-log directories; the one holding the active segment is unmounted
    (``umount -l``: the mapped segments stay readable, the path now shows the empty directory
    under the old mount point) or made read-only. check_disk() takes it offline with a reason,
    logged once however many checks follow; the active segment there is sealed and the log
    goes on in the other directory; every message is still readable; nothing else fails and
    nothing loops. A cleanup then deletes through the lost directory's segments without
    getting stuck (a read-only directory keeps the files: a warning names them). After a
    read-only disk is writable again and those files are removed, a restart takes it back."""
    a, b = env.tmpfs("cla", 16), env.tmpfs("clb", 16)
    # retention 0 h, but no trigger (not the delete hour, no space pressure) until the manual one below
    cfg = store_config(tmp_path / "root", [a, b], file_reserved_time_hours=0.0)
    s = env.open(cfg)
    w = Writer(s)
    while len(s.segments) < 5:
        assert all(r.ok for r in w.put())
    lost = s.segments.last.directory          # the active segment's directory
    other = b if lost == a else a
    old_in_lost = [mf.start_offset for mf in s.segments.segments if mf.directory == lost]
    assert old_in_lost
    if how == "umount-lazy":
        r = run("umount", "-l", lost)
        assert r.returncode == 0, r.stderr
        detail = "lazy unmount"
    else:
        detail = _make_read_only(lost)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tidemq"):
        for _ in range(5):
            s.check_disk()
        st = {x["path"]: x for x in s.disk_status()["directories"]}
        assert st[lost]["state"] == "offline", (detail, st[lost])
        assert st[lost]["offline_reason"]
        reason = st[lost]["offline_reason"]
        assert st[other]["state"] == "writable"
        assert s.write_refusal() is None, "the other directory takes the writes"
        n = len(s.segments)
        for _ in range(200):                   # the sealed segment and new ones, all in the other directory
            if len(s.segments) >= n + 3:
                break
            rs = w.put()
            assert all(r.ok for r in rs), rs[0]
        assert len(s.segments) >= n + 3
        for _ in range(3):
            s.check_disk()                     # what every round of the disk-check service does
            s.clean()
            assert s.cleaner.last.deleted == [], s.cleaner.last.as_dict()
    lines = [r for r in caplog.records if r.levelno >= logging.ERROR and lost in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert "offline" in lines[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and lost not in r.getMessage()], \
        [r.getMessage() for r in caplog.records]
    new = [mf for mf in s.segments.segments if mf.start_offset >= s.segments.segments[n - 1].end_offset]
    assert new and all(mf.directory == other for mf in new)
    if how == "umount-lazy":
        assert not [f for f in os.listdir(lost) if parse_segment_name(f) is not None], \
            "nothing written into the directory under the old mount point"
    # every message is still readable: the segments in the lost directory stay mapped
    for q in range(4):
        off, mx = 0, s.max_offset(TOPIC, q)
        while off < mx:
            g = s.get("g", TOPIC, q, off, max_count=32)
            assert g.status is GetStatus.FOUND, (q, off, g)
            w.verify(g)
            off = g.next_offset
    rep = s.check()
    assert rep.ok, rep.problems[:5]
    assert all(s.segments.find(o) is not None for o in old_in_lost)
    print(f"\n[offline, {how} by {detail}] reason: {reason}; error lines: 1; "
          f"segments after it: {len(new)}, all in the other directory")

    # a cleanup deletes through the lost directory's segments: no exception, not stuck
    caplog.clear()
    s.trigger_delete_expired()
    with caplog.at_level(logging.WARNING, logger="tidemq"):
        s.clean()
    rnd = s.cleaner.last
    assert len(s.segments) == 1 and rnd.why_not is None, rnd.as_dict()
    assert {os.path.dirname(p) for p in rnd.deleted} == {a, b}
    assert s.get("g", TOPIC, 0, 0).status is GetStatus.OFFSET_TOO_SMALL
    assert all(r.ok for r in w.put())
    rep = s.check()
    assert rep.ok, rep.problems[:5]
    left = sorted(f for f in os.listdir(lost) if parse_segment_name(f) is not None)
    warned = [r.getMessage() for r in caplog.records if "could not be deleted" in r.getMessage()]
    assert len(warned) == len(left) and all(any(f in m for m in warned) for f in left), (left, warned)
    if how == "umount-lazy":
        assert left == []                      # the path shows the directory under the old mount point
    else:
        assert left, "a read-only directory keeps its files"
        # the disk is writable again; the files the warnings name are removed: a restart takes it back
        s.shutdown()
        if detail == "remount,ro":
            assert run("mount", "-o", "remount,rw", lost).returncode == 0
        else:
            assert run("umount", lost).returncode == 0      # the read-only bind mount on top
        assert mounted(lost) and "rw" in _mount_options(lost)
        for f in left:
            os.unlink(os.path.join(lost, f))
        s2 = env.open(cfg)
        assert dir_states(s2)[lost] == "writable"
        rep = s2.check()
        assert rep.ok, rep.problems[:5]


def _mount_options(d: str) -> list[str]:
    d = os.path.realpath(d)
    with open("/proc/self/mounts") as f:
        opts = [line.split()[3] for line in f if line.split()[1] == d]
    return opts[-1].split(",") if opts else []


# The consume-queue directory --------------------------------------------------------------

def refused_while_full_then_cleared(s: MessageStore, w: "Writer", mount: str, watched: str, name: str) -> None:
    """Fill the file system at ``mount`` past 90 % with another file: puts are refused naming
    ``name`` (the directory ``watched`` full), reads go on; once the file is gone the next check
    clears the flag and puts succeed, no restart."""
    cap, used, _free, _ = fs_usage(mount)
    ballast = os.path.join(mount, "ballast")
    fd = os.open(ballast, os.O_CREAT | os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, int(cap * 0.93) - used)
    finally:
        os.close(fd)
    s.check_disk()
    rs = w.put()
    assert all(r.status is PutStatus.SERVICE_NOT_AVAILABLE for r in rs), rs[0]
    assert name in rs[0].error and "disk full" in rs[0].error, rs[0].error
    assert dir_states(s)[watched] == "full"
    g = s.get("g", TOPIC, 0, 0)
    assert g.status is GetStatus.FOUND
    w.verify(g)
    os.unlink(ballast)
    s.check_disk()
    assert s.write_refusal() is None
    assert all(r.ok for r in w.put())
    assert s.check().ok


def test_full_consume_queue_directory_refuses_puts_and_clears_by_itself(env, tmp_path):
    """The store root (consume queues) on its own 8 MiB tmpfs, filled past 90 % by another file."""
    cl = env.tmpfs("cl", 16)
    root = env.tmpfs("root", 8)
    s = env.open(store_config(root, [cl]))
    w = Writer(s)
    assert all(r.ok for r in w.put())
    refused_while_full_then_cleared(s, w, root, os.path.join(root, "consumequeue"), "consume-queue directory")


def test_full_index_directory_refuses_puts_and_clears_by_itself(env, tmp_path):
    """The index directory on its own 4 MiB tmpfs, filled past 90 % by another file: refused
    naming the index directory (never an 'index write failed' that stays), cleared by itself."""
    cl = env.tmpfs("cl", 16)
    root = str(tmp_path / "root")
    index = env.tmpfs(os.path.join(root, "index"), 4)          # an absolute name: mounted there
    s = env.open(store_config(root, [cl], index_enabled=True, index_slots=1000, index_entries=4000))
    w = Writer(s)
    assert all(r.ok for r in w.put())
    s.check_disk()
    assert dir_states(s)[index] == "writable"
    refused_while_full_then_cleared(s, w, index, index, "index directory")


# disk_status() and `tidemq disk` ----------------------------------------------------------

def test_disk_status_fields_and_cli(env, tmp_path):
    """disk_status() on two 16 MiB tmpfs: per directory capacity, used, ratio, free, state,
    segments and their bytes (equal to what statvfs and the segment list say); the flags;
    the last cleanup and why it deleted nothing; the forecast (seconds until 75/85/90 %,
    hours of retention possible). Then `tidemq disk --json` on the stopped store prints it."""
    a, b = env.tmpfs("cla", 16), env.tmpfs("clb", 16)
    root = tmp_path / "root"
    clock = ManualClock()                # the forecast's rates: measured over the clock's time
    cfg = store_config(root, [a, b], delete_when=not_now_hour(clock.now_ms()))
    s = env.open(cfg, clock=clock)
    w = Writer(s)
    while len(s.segments) < 4:           # two segments in each directory
        w.put()
    s.check_disk()                       # (the disk-check service measures too: on this clock, at the same time)
    for _ in range(8):                   # 64 batches of 64 KiB in 1.6 s: ~2.6 MB/s, the ratios are seconds away
        w.put()
    clock.advance(1.6)
    s.check_disk()
    st = s.disk_status()
    dirs = {d["path"]: d for d in st["directories"]}
    assert set(dirs) == {a, b, os.path.join(str(root), "consumequeue")}
    for d in (a, b):
        x = dirs[d]
        cap, used, free, ratio = fs_usage(d)
        assert x["role"] == "commitlog" and x["state"] == "writable"
        assert x["capacity_bytes"] == cap and x["used_bytes"] == used and x["free_bytes"] == free
        assert abs(x["used_ratio_percent"] - ratio) < 0.01
        assert x["thresholds_percent"] == {"max_used": 75, "clean_forcibly": 85, "warning": 90}
        n = sum(1 for mf in s.segments.segments if mf.directory == d)
        assert n > 0 and x["segments"] == n and x["segment_bytes"] == n * SEG
        assert x["offline_reason"] is None
    assert set(st["flags"]) >= {"write_refusal", "disk_full", "dispatch_error", "segment_error"}
    assert st["flags"]["write_refusal"] is None
    assert set(st["last_cleanup"]) >= {"at_ms", "triggers", "deleted", "deleted_bytes", "why_not"}
    f = st["forecast"]
    assert f["ingest_bytes_per_s"] > 0
    eta = f["seconds_until_percent"]
    assert set(eta) == {"75", "85", "90"} and 0 < eta["75"] < eta["85"] < eta["90"]
    # the two tmpfs are two file systems (of equal size and usage): both count
    cap = sum(fs_usage(d)[0] for d in (a, b))
    used = sum(fs_usage(d)[1] for d in (a, b))
    want = (0.75 * cap - used) / f["ingest_bytes_per_s"]
    assert abs(eta["75"] - want) <= 0.02 * want + 0.2, (eta["75"], want)
    assert f["retention_hours_possible"] is not None and f["retention_hours_possible"] < 72
    assert f["file_reserved_time_hours"] == 72
    assert "deleted before they expire" in f["advice"] and "add " in f["advice"] and "0.0 h" not in f["advice"]
    for d in (a, b):                     # per directory: its own growth over the window, its own ratios
        per = dirs[d]["seconds_until_percent"]
        assert set(per) == {"75", "85", "90"}
        assert dirs[d]["growth_bytes_per_s"] > 0 and 0 < per["75"] < per["85"] < per["90"], dirs[d]

    # space short, nothing expired (72 h): the status says why nothing was deleted
    while fs_usage(a)[3] < 80 or fs_usage(b)[3] < 80:
        assert all(r.ok for r in w.put())
    s.clean()
    lc = s.disk_status()["last_round"]
    assert lc["triggers"] == ["space"] and lc["deleted"] == []
    assert lc["why_not_code"] == "nothing-expired" and "nothing expired" in lc["why_not"]
    segs = len(s.segments)
    s.shutdown()

    toml = tmp_path / "tidemq.toml"
    toml.write_text("[store]\n"
                    f"commitlog_dirs = [{json.dumps(a)}, {json.dumps(b)}]\n"
                    f"segment_size_bytes = {SEG}\n"
                    "consume_queue_units_per_segment = 1000\n"
                    "index_enabled = false\n")
    r = CliRunner().invoke(cli, ["disk", "--root", str(root), "--config", str(toml), "--json"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output[r.output.index("{"):])
    cl = {d["path"]: d for d in doc["directories"] if d["role"] == "commitlog"}
    assert set(cl) == {a, b}
    assert sum(d["segments"] for d in cl.values()) == segs
    for d in (a, b):
        assert cl[d]["capacity_bytes"] == fs_usage(d)[0] and cl[d]["used_ratio_percent"] >= 75
    assert set(doc) >= {"directories", "flags", "last_cleanup", "forecast"}
    assert set(doc["forecast"]["seconds_until_percent"]) == {"75", "85", "90"}
