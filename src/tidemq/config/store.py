"""The embedded store's settings (``[store]``): StoreConfig."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import ClassVar, Mapping

from .. import layout      # the store root's names, spelled once (StoreConfig's derived locations)
from .loading import GIB, KIB, MIB, ConfigError, Loadable, coerce
from .loading import setting as _f

@dataclass(frozen=True)
class StoreConfig(Loadable):
    """The embedded store (tidemq/store/): where its files live, the disks' three ratios and
    cleanup, segment, queue and index sizes, flushing, reads. Commands on a stopped store read
    these too (and what the store remembers of them: ``<root>/config/store.json``)."""

    SECTION: ClassVar[str] = "store"
    RENAMED: ClassVar[Mapping[str, str]] = {
        "disk_max_used_space_ratio": "disk_used_space_percent_max",
        "disk_space_clean_forcibly_ratio": "disk_space_clean_forcibly_percent",
        "disk_space_warning_level_ratio": "disk_space_warning_level_percent",
        "max_message_size_bytes": "message_body_bytes_max",
        "default_queue_count": "topic_queues_default",
        "pull_max_count_in_memory": "pull_in_memory_count_max",
        "pull_max_bytes_in_memory": "pull_in_memory_bytes_max",
        "pull_max_count_from_disk": "pull_from_disk_count_max",
        "pull_max_bytes_from_disk": "pull_from_disk_bytes_max",
        "access_message_in_memory_ratio_max_percent": "access_message_in_memory_percent_max",
    }
    MOVED_IN: ClassVar[Mapping[str, tuple[str, str]]] = {
        "auto_create_topics": ("broker", "auto_create_topics"),
        "default_queue_count": ("broker", "topic_queues_default"),
    }

    root_dir: str = _f("./data", "store root: commitlog/, consumequeue/, index/, config/, checkpoint, abort")
    commitlog_dirs: tuple[str, ...] = _f((), "commit-log directories (empty: <root>/commitlog); 'a:b' or 'a,b' accepted")

    readonly_commitlog_dirs: tuple[str, ...] = _f((), "commit-log directories read but never written (old disks being drained)")
    per_dir_thresholds: tuple[str, ...] = _f((), "per-directory ratios 'DIR=max,forcibly,warning' (percent); "
                                                 "';' separates entries in an environment variable")

    # Disk space (RocketMQ's three ratios, in percent of each directory's file system)
    disk_used_space_percent_max: int = _f(75, "percent: above it, expired commit-log segments are deleted "
                                              "(RocketMQ diskMaxUsedSpaceRatio)", 10, 95)
    disk_space_clean_forcibly_percent: int = _f(85, "percent: a directory above it takes no new segments; above it "
                                                    "on every writable directory, unexpired segments are deleted "
                                                    "too (RocketMQ diskSpaceCleanForciblyRatio)", 30, 85)
    disk_space_warning_level_percent: int = _f(90, "percent: DISK_FULL, puts are refused (reads go on) "
                                                   "(RocketMQ diskSpaceWarningLevelRatio)", 35, 90)
    clean_resource_interval_ms: int = _f(10_000, "period of the cleanup services and disk checks", 10, 3_600_000)
    delete_when: str = _f("04", "hours (local time) when expired segments are deleted, e.g. '04;16'")
    file_reserved_time_hours: float = _f(72.0, "retention: a commit-log segment whose newest message is older than "
                                            "this is expired (RocketMQ fileReservedTime); expired segments are "
                                            "deleted at delete_when, or above disk_used_space_percent_max",
                                        0.0, 24 * 365 * 10)
    delete_file_batch_max: int = _f(10, "segments deleted per cleanup round at most", 1, 10_000)
    delete_commit_log_files_interval_ms: int = _f(100, "pause between two segment deletions", 0, 60_000)
    destroy_mapped_file_interval_forcibly_ms: int = _f(120_000, "a deleted segment a reader still holds (its name "
                                                                "goes at once) is unmapped anyway after this, "
                                                                "its space freed", 0, 3_600_000)
    manual_delete_rounds: int = _f(20, "rounds a manual 'delete expired commit log' forces", 1, 1_000)

    archive_before_delete: bool = _f(False, "delete only commit-log segments `tidemq archive` has copied out "
                                            "(<root>/archive/manifest.json)")
    on_unarchived_full: str = _f("refuse", "archive_before_delete at the disk's warning level: 'refuse' writes "
                                           "(nothing is lost) or 'delete' unarchived segments and record the gap "
                                           "in <root>/archive/gaps.json", choices=("refuse", "delete"))
    segment_size_bytes: int = _f(1 * GIB, "commit-log segment size (RocketMQ mappedFileSizeCommitLog)", 4 * KIB, 2 * GIB - 1)
    preallocate_next_segment: bool = _f(True, "create the next commit-log segment in the background before it is needed")
    commitlog_warm_enabled: bool = _f(False, "a background thread takes the page faults of the commit log's next "
                                             "commitlog_warm_ahead_mib ahead of the writer (madvise "
                                             "MADV_POPULATE_WRITE; RocketMQ warmMapedFileEnable). Off: batches and "
                                             "a follower's copies are pwritten, not written through the mapping, "
                                             "and warm pages only cost their zeroing (bench/README.md)")
    commitlog_warm_ahead_mib: int = _f(32, "MiB after the log's end kept warm, into the pre-made next segment at a "
                                           "segment's end (at most the segment size; warm pages are dirty: an "
                                           "fsync writes out those the writer has not reached yet)", 1, 1024)
    consume_queue_units_per_segment: int = _f(300_000, "20-byte units per consume-queue file", 16, 10_000_000)
    consume_queue_open_files_max: int = _f(1024, "open consume-queue file handles kept at most (LRU)", 8, 1_000_000)
    index_slots: int = _f(5_000_000, "hash slots per index file", 16, 50_000_000)
    index_entries: int = _f(20_000_000, "entries per index file", 16, 200_000_000)
    index_enabled: bool = _f(True, "build the key / unique-key hash index")

    message_body_bytes_max: int = _f(4 * MIB, "largest accepted message body", 1, 128 * MIB)
    topic_queues_default: int = _f(8, "queues of a topic created without a queue count (auto-creation, "
                                      "topic create without --queues)", 1, 1024)
    topic_queues_max: int = _f(1024, "queues a topic may have at most (CreateTopic asking for more is refused: a "
                                  "million queues cost gigabytes of memory at every start)", 1, 65_536)
    auto_create_topics: bool = _f(False, "a put, send or route query for an unknown topic creates it with "
                                         "topic_queues_default queues (off: TOPIC_NOT_FOUND); the demo `./tidemq` "
                                         "and `tidemq serve --auto-create-topics` turn it on")
    topic_tag_cache_max: int = _f(4_096, "distinct tags per topic whose record encoding is remembered by the "
                                         "write path", 0, 10_000_000)
    store_host: str = _f("127.0.0.1:10911", "ipv4:port written as STOREHOST and used in offset message ids")

    flush_disk_type: str = _f("ASYNC_FLUSH", "SYNC_FLUSH: put returns once durable; ASYNC_FLUSH: flushed in the background",
                              choices=("ASYNC_FLUSH", "SYNC_FLUSH"))
    flush_interval_ms: int = _f(500, "async flush period of the commit log", 1, 60_000)
    flush_least_pages: int = _f(4, "async flush waits for this many dirty 4 KiB pages", 0, 1_000_000)
    flush_thorough_interval_ms: int = _f(10_000, "async flush flushes everything at least this often", 1, 600_000)
    sync_flush_timeout_ms: int = _f(5_000, "a SYNC_FLUSH put not durable by then answers FLUSH_DISK_TIMEOUT", 1, 600_000)
    sync_flush_gather_us_max: int = _f(0, "SYNC_FLUSH group commit: before an fsync, wait at most this long (and at "
                                          "most half the last fsync) for the writers the last one released to "
                                          "append again, so one fsync covers them all (fewer fsyncs per message; "
                                          "on a disk busy with fsyncs no faster: off by default; 0: fsync at once)",
                                   0, 100_000)
    flush_consume_queue_interval_ms: int = _f(1_000, "flush period of consume queues and index", 1, 60_000)
    checkpoint_interval_ms: int = _f(1_000, "the checkpoint file is flushed at least this often", 10, 60_000)

    pull_in_memory_count_max: int = _f(32, "messages per get when the data is likely in the page cache", 1, 100_000)
    pull_in_memory_bytes_max: int = _f(256 * KIB, "bytes per get when the data is likely in the page cache", 1, 1 * GIB)
    pull_from_disk_count_max: int = _f(8, "messages per get when the data is likely on disk", 1, 100_000)
    pull_from_disk_bytes_max: int = _f(64 * KIB, "bytes per get when the data is likely on disk", 1, 1 * GIB)
    access_message_in_memory_percent_max: int = _f(40, "data within this % of RAM of the log's end counts as in memory", 1, 100)

    recovery_scan_segments_normal: int = _f(3, "segments checked at the log's end after a clean shutdown", 1, 1_000)
    dispatch_write_retries_max: int = _f(3, "retries of a failed consume-queue / index write before writes are refused", 0, 100)
    dispatch_deferred_max: int = _f(1024, "puts whose dispatch may wait for after their answer (store/put_lock.py); "
                                    "a put beyond it dispatches at once, with those before it", 1, 1_000_000)

    def __post_init__(self) -> None:
        for name in ("commitlog_dirs", "readonly_commitlog_dirs"):
            v = getattr(self, name)
            object.__setattr__(self, name, coerce(name, "tuple", v) if isinstance(v, str) else tuple(v))
        if isinstance(self.per_dir_thresholds, str):
            object.__setattr__(self, "per_dir_thresholds",
                               tuple(p.strip() for p in self.per_dir_thresholds.split(";") if p.strip()))
        self._check()
        if self.topic_queues_default > self.topic_queues_max:
            raise ConfigError(f"topic_queues_default ({self.topic_queues_default}) is above topic_queues_max "
                              f"({self.topic_queues_max})")
        self.delete_hours()
        self.dir_thresholds()

    def delete_hours(self) -> frozenset[int]:
        """delete_when as a set of hours: '04', '04;16', '4,16'."""
        hours = set()
        for part in self.delete_when.replace(",", ";").split(";"):
            part = part.strip()
            if not part:
                continue
            if not (part.isascii() and part.isdigit()) or not 0 <= int(part) <= 23:     # ("²" isdigit: int() refuses it)
                raise ConfigError(f"delete_when: {part!r} is not an hour 00-23")
            hours.add(int(part))
        return frozenset(hours)

    def thresholds(self) -> tuple[int, int, int]:
        """(max used, clean forcibly, warning) in percent, in a sane order (a lower warning level
        pulls the other two down with it)."""
        w = self.disk_space_warning_level_percent
        f = min(self.disk_space_clean_forcibly_percent, w)
        return min(self.disk_used_space_percent_max, f), f, w

    def dir_thresholds(self) -> dict[str, tuple[int, int, int]]:
        """Per-directory (max used, clean forcibly, warning) overrides, in the global ones' bounds and
        put in the same sane order."""
        out: dict[str, tuple[int, int, int]] = {}
        for entry in self.per_dir_thresholds:
            path, sep, vals = entry.rpartition("=")
            try:
                a, b, c = (int(x) for x in vals.split(","))
            except ValueError:
                raise ConfigError(f"per_dir_thresholds: {entry!r} is not DIR=max,forcibly,warning") from None
            if not sep or not path:
                raise ConfigError(f"per_dir_thresholds: {entry!r} is not DIR=max,forcibly,warning")
            for v, name in ((a, "disk_used_space_percent_max"), (b, "disk_space_clean_forcibly_percent"),
                            (c, "disk_space_warning_level_percent")):
                meta = _FIELDS_BY_NAME[name].metadata
                if not meta["min"] <= v <= meta["max"]:
                    raise ConfigError(f"per_dir_thresholds: {entry!r}: {v} is outside [{meta['min']}, "
                                      f"{meta['max']}], the bounds of {name}")
            b = min(b, c)
            out[os.path.normpath(path)] = (min(a, b), b, c)
        return out

    # Derived locations (the store root's layout: tidemq/layout.py) -----------
    @property
    def commitlog_paths(self) -> tuple[str, ...]:
        return self.commitlog_dirs or (layout.commitlog_dir(self.root_dir),)

    @property
    def consumequeue_path(self) -> str:
        return layout.consumequeue_dir(self.root_dir)

    @property
    def index_path(self) -> str:
        return layout.index_dir(self.root_dir)

    @property
    def config_path(self) -> str:
        return layout.config_dir(self.root_dir)

    @property
    def checkpoint_path(self) -> str:
        return layout.checkpoint_path(self.root_dir)

    @property
    def abort_path(self) -> str:
        return layout.abort_path(self.root_dir)

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == "SYNC_FLUSH"


_FIELDS_BY_NAME = {f.name: f for f in fields(StoreConfig)}
