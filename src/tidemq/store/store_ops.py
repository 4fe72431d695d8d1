"""The store's operations calls (MessageStore's part for people and the background services): disk
space and cleanup rounds (disk.py, cleaner.py), settings changed at run time, consumer positions
for the space policy (backlog.py), statistics and the self-check (verify.py)."""

from __future__ import annotations

from typing import Callable

from ..config import StoreConfig
from .backlog import Positions
from .cleaner import log_deletion
from .disk import status_report
from .verify import CheckReport, check_store


class StoreOps:
    """MessageStore's operations calls (a part of its class: store.py builds what they use)."""

    # Disk space ----------------------------------------------------------------------
    def check_disk(self) -> None:
        """Measure every directory, update the flags and the forecast (the disk-check service)."""
        self._running("check_disk")
        self._check_disk()

    def _check_disk(self) -> None:
        self.disk.observe(self.segments.max_offset, self.cleaner.deleted_bytes_total)
        self.disk.refresh(self.segments.counts_by_dir())

    def clean(self) -> None:
        """One cleanup round: commit-log segments, then queues and index behind them."""
        self._running("clean")
        self._clean()

    def _clean(self) -> None:
        self._check_disk()
        rnd = self.cleaner.run_round()
        if rnd.deleted:
            self.queue_cleaner.run_round(self.segments.min_offset, rnd.lost)
            self.cleaner.account(rnd)
            self.topics.forget_deleted_before(self.segments.min_offset)
            self.commit_log.prune_sealed()
            self.epochs.prune_before(self.segments.min_offset)
            self._check_disk()
            log_deletion(rnd)

    def trigger_delete_expired(self) -> None:
        """The admin's 'delete expired commit log': the next manual_delete_rounds rounds delete."""
        self._running("trigger_delete_expired")
        self.cleaner.trigger_manual()

    def disk_status(self) -> dict:
        """Per directory: capacity, used, ratio, free, state, segments; the flags; what the last
        cleanup did and why not; the forecast (when the ratios are reached, retention possible)."""
        self._running("disk_status")
        return status_report(self.disk, self.cleaner, self.segments, {
            "write_refusal": self.write_refusal(), "disk_full": self.disk.refusal,
            "dispatch_error": self.dispatcher.error, "segment_error": self.writer.segment_error,
            "log_failures": [f.as_dict() for f in self.commit_log.failures],
            "failed_dirs": self.disk.failed()})

    def reconfigure(self, config: StoreConfig) -> None:
        """Settings changed at run time (broker/live_settings.py: the cleanup times and batch, the
        three ratios); the others of ``config`` must be this store's own (they are read at start)."""
        self.config = config
        self.disk.set_thresholds(config)
        cleaner = getattr(self, "cleaner", None)       # (made at start)
        if cleaner is not None:
            cleaner.reconfigure(config)

    # Consumers (backlog.py) ---------------------------------------------------------------
    def set_consumer_positions(self, positions: Positions | None) -> None:
        """How the store learns what consumer groups have consumed (store/backlog.py: ``positions(topic)``
        -> {group: {queue id: first offset not consumed}}), for the space policy and the report of
        what cleanup took from each group. The broker passes its own; None: no group is known."""
        self.consumer_positions = positions
        if self.backlog is not None:
            self.backlog.positions = positions

    # Introspection --------------------------------------------------------------------
    def stats(self) -> dict:
        self._reading("stats")
        flush = self.group_commit or self.async_flush
        return {
            "state": self._state.value,
            "commitlog_min_offset": self.segments.min_offset,
            "commitlog_max_offset": self.segments.max_offset,
            "commitlog_flushed_offset": self.commit_log.flushed_offset,
            "readable_end": self.readable_end(),
            "log_failures": len(self.commit_log.failures),
            "segments": len(self.segments),
            "topics": len(self.topics.topics),
            "queues": len(self.queues.all()),
            "dispatched_offset": self.dispatcher.dispatched_offset,
            "records_damaged": self.reader.damage.total,     # read but not served: they fail their CRC
            "write_refusal": self.write_refusal(),
            "fsyncs": flush.fsyncs if flush is not None else 0,
            "fsync_seconds": flush.fsync_seconds if flush is not None else 0.0,
            "warm": self.warmer.stats() if self.warmer is not None else {"enabled": False},
        }

    def observe_flushes(self, on_flush_s: Callable[[float], None] | None) -> None:
        """``on_flush_s(seconds)`` after every commit-log flush (the broker's flush-latency histogram)."""
        self._running("observe_flushes")
        flush = self.group_commit or self.async_flush
        if flush is not None:
            flush.on_flush_s = on_flush_s

    def check(self, progress: Callable[[int, int], None] | None = None) -> CheckReport:
        """Walk every segment (magic, lengths, CRC), every consume-queue unit and the index;
        returns what is wrong (nothing, on a healthy store)."""
        self._reading("check")
        return check_store(self, progress)
