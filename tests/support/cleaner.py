"""A CommitLogCleaner over in-memory segments on a manual clock (the World of the cleaner's and the
space policy's tests): sealed segments written an hour apart, an active one, a disk whose fullness
a test sets."""

from __future__ import annotations

import time

from tidemq.io import ManualClock
from tidemq.store.cleaner import CommitLogCleaner
from tidemq.store.disk import DiskMonitor
from tidemq.store.segment_queue import SegmentQueue
from tidemq.testing.faulty_io import FaultyFileIO

from .store import memory_config

SEG = 8 * 1024
HOUR_S = 3600


def hour_of(ms: float, later_h: int = 0) -> str:
    return "%02d" % ((time.localtime(ms / 1000).tm_hour + later_h) % 24)


def other_hour(clock: ManualClock) -> str:
    """A delete_when hour the clock is not in (nor in the next few hours): the time trigger stays off."""
    return hour_of(clock.now_ms(), 12)


class World:
    """An in-memory disk, a manual clock, ``n_sealed`` sealed segments written an hour apart and
    an active one written an hour before the cleaner is made, and a CommitLogCleaner over them.
    ``at_the_delete_hour``: delete_when is the hour the cleaner starts in."""

    def __init__(self, n_sealed: int = 4, at_the_delete_hour: bool = False, **cfg) -> None:
        self.clock = ManualClock()
        start = self.clock.now_ms()
        cfg["delete_when"] = hour_of(start + (n_sealed + 1) * HOUR_S * 1000) if at_the_delete_hour else \
            hour_of(start, 12)
        cfg.setdefault("delete_commit_log_files_interval_ms", 0)
        self.cfg = memory_config(segment_size_bytes=SEG, **cfg)
        self.fio = FaultyFileIO()
        for d in (*self.cfg.commitlog_paths, self.cfg.consumequeue_path):
            self.fio.makedirs(d)
        self.segments = SegmentQueue(self.fio, self.cfg.commitlog_paths, SEG, preallocate=False)
        self.segments.load()
        for i in range(n_sealed + 1):
            mf = self.segments.new_segment(i * SEG)
            mf.wrote_pos = SEG if i < n_sealed else 100
            mf.last_store_timestamp_ms = self.clock.now_ms()
            self.clock.advance(HOUR_S)
        self.disk = DiskMonitor(self.cfg, self.fio, self.clock)
        self.deleted: list[int] = []
        self.cleaner = CommitLogCleaner(self.cfg, self.segments, self.disk, self.clock,
                                        on_deleted=lambda mf: self.deleted.append(mf.start_offset))

    def used(self, ratio_percent: float) -> None:
        """Make the disk that full (FaultyFileIO: capacity moved around what the files use)."""
        used = self.fio.disk_usage("/").used_bytes
        self.fio.capacity_bytes = int(used * 100 / ratio_percent)
        self.disk.refresh()

    def starts(self) -> list[int]:
        return [mf.start_offset for mf in self.segments.segments]
