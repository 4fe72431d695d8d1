"""MessageStore: the embedded storage engine's facade: lifecycle and wiring.

    store = MessageStore(StoreConfig(root_dir="data"))
    store.start()                      # recovers, then serves
    r = store.put(Message(topic="T", body=b"x"))
    g = store.get(group="G", topic="T", queue_id=r.queue_id, offset=0)
    store.shutdown()                   # flush, dispatch, checkpoint, remove the abort file

The parts (segments, commit log, consume queues, index, checkpoint, disk monitor,
cleaners, flush and background services) are built and recovered by ``start()`` and
closed by ``shutdown()``. The write path is writer.py (``StoreWriter``: validation,
encoding, the append under the put lock, the flush wait), the read path reader.py
(``StoreReader``); the store delegates to them. This module builds and closes the parts; the
store's calls are grouped by what they serve, each group a part of the class in its own module:
store_writes.py (puts), store_reads.py (reads, what readers may be served), store_topics.py
(topics), store_roles.py (replication: following, leading, confirm) and store_ops.py (disk space,
cleanup, settings at run time, statistics, the self-check).

Lifecycle (``StoreState``): NEW -> STARTING -> RUNNING -> STOPPING -> STOPPED, or FAILED
(start raised) or KILLED (kill(): a test's crash). Only a NEW store starts; shutdown()
and kill() do nothing unless it runs. One rule for every other call while the store is
not RUNNING: calls that answer with a status (put, put_batch, put_encoded, get,
get_raw) answer SERVICE_NOT_AVAILABLE (puts with PutReason.NOT_RUNNING or
SHUTTING_DOWN), and so does ``write_refusal()`` / ``put_refusal()`` (the puts' verdict);
every other call raises ``StoreNotRunning`` (a StoreError).
"""

from __future__ import annotations

import logging
import os

from ..config import MIB, StoreConfig
from ..io import Clock, FileIO, OsFileIO, SystemClock
from ..words import human_bytes
from .. import layout
from . import heal, remembered, sizing
from .archive import ArchiveGuard
from .backlog import BacklogGuard, Positions
from .checkpoint import AbortFile, Checkpoint
from .checkpointing import CheckpointRounds
from .cleaner import CommitLogCleaner, QueueCleaner
from .topic_retention import TopicRetention
from .commit_log import CommitLog
from .consume_queue import ConsumeQueueTable
from .disk import DiskMonitor
from .dispatch import Dispatcher
from .epochs import EpochFile
from .flush import AsyncFlushService, GroupCommitService, PeriodicService
from .index_file import IndexService
from .log_failure import LogFailureHandler
from .put_lock import PutLock
from .readable import ReadableEnd
from .reader import StoreReader
from .recovery import RecoveryReport, recover
from .replica import ReplicaLog
from .segment_queue import SegmentQueue
from .topics import TopicTable
from .store_ops import StoreOps
from .store_reads import StoreReads
from .store_roles import StoreRoles
from .store_topics import StoreTopics
from .store_writes import NOT_SERVING, StoreWrites
from .types import PutReason, StoreError, StoreNotRunning, StoreState
from .verify import CheckReport
from .warmer import SegmentWarmer
from .writer import StoreWriter, restore_topics

__all__ = ["MessageStore", "CheckReport"]

log = logging.getLogger("tidemq.store")


class MessageStore(StoreWrites, StoreReads, StoreTopics, StoreRoles, StoreOps):
    """The store: its parts, built by start() and closed by shutdown(); its calls are grouped by what
    they serve in store_writes.py, store_reads.py, store_topics.py, store_roles.py and store_ops.py."""

    def __init__(self, config: StoreConfig, fio: FileIO | None = None, clock: Clock | None = None,
                 stepped_flush: bool = False) -> None:
        """``stepped_flush``: SYNC_FLUSH's group commit has no thread; its owner runs each one
        (``group_commit.step()``: a simulation on one thread decides when an fsync ends, tests/sim)."""
        self.config = config
        self.stepped_flush = stepped_flush
        self.fio: FileIO = fio or OsFileIO()
        self.clock: Clock = clock or SystemClock()
        # with the dispatches puts left for after their answer (put_lock.py)
        self._put_lock = PutLock(deferred_max=config.dispatch_deferred_max)
        self._state = StoreState.NEW
        self.start_phase = "not started"    # what start() is doing (start_progress: for people)
        self._lock_handle = None                       # FileIO.lock's handle on <root>/lock
        self.recovery: RecoveryReport | None = None
        self.archive: ArchiveGuard | None = None        # archive_before_delete (set at start)
        self._memory_budget_bytes = sizing.total_memory_bytes() * config.access_message_in_memory_percent_max // 100
        self._services: list = []
        self.group_commit: GroupCommitService | None = None
        self.async_flush: AsyncFlushService | None = None
        self.queue_flush: PeriodicService | None = None
        self.reader: StoreReader | None = None        # the read path (reader.py), once started
        self.writer: StoreWriter | None = None        # the write path (writer.py), once started
        self.warmer: SegmentWarmer | None = None      # commitlog_warm_enabled (warmer.py)
        self.read_counts: dict[str, list[int]] = {}   # topic -> [messages, bytes] read since start
        self.consumer_positions: Positions | None = None   # the broker's (set_consumer_positions)
        self.backlog: BacklogGuard | None = None
        self.log_failure: LogFailureHandler | None = None     # log_failure.py (set at start)
        self.rounds: CheckpointRounds | None = None     # the checkpoint's rounds (checkpointing.py, set at start)
        # what readers may be served, and the long polls waiting for more (readable.py)
        self.readable = ReadableEnd(lambda: self._state is StoreState.RUNNING, lambda: self.group_commit is not None)

    @property
    def state(self) -> StoreState:
        return self._state

    def _running(self, call: str) -> None:
        """The lifecycle rule for calls without a status: StoreNotRunning unless RUNNING."""
        if self._state is not StoreState.RUNNING:
            raise StoreNotRunning(self._state, call)

    def _reading(self, call: str) -> None:
        """``_running`` of a call that reads the consume queues, the index or the log: what puts
        left to dispatch (put_lock.py) is dispatched first, so a read sees every answered put."""
        self._running(call)
        self._put_lock.drain()

    def drain_dispatch(self) -> None:
        """Dispatch now what puts left pending (``put_batch(..., defer_dispatch=True)``; put_lock.py)."""
        self._put_lock.drain()

    # Lifecycle -----------------------------------------------------------------------
    def start(self) -> "MessageStore":
        if self._state is not StoreState.NEW:
            raise StoreError(f"store already {self._state.value}")
        self._state = StoreState.STARTING
        try:
            return self._start()
        except BaseException:
            self._abandon_start()
            raise

    def start_progress(self) -> str:
        """What a start is doing and how far it got, for a person waiting on a long recovery:
        "recovering: ..., 1.2 GiB of 4.0 GiB of log walked (30 %)"."""
        phase = self.start_phase
        log_ = getattr(self, "commit_log", None)
        if not phase.startswith("recovering") or log_ is None or self._state is not StoreState.STARTING:
            return phase
        lo, hi = self.segments.min_offset, self.segments.max_offset
        done = min(max(0, log_.walked_offset - lo), max(0, hi - lo))
        pct = 100.0 * done / (hi - lo) if hi > lo else 100.0
        return f"{phase}, {human_bytes(done)} of {human_bytes(hi - lo)} of log walked ({pct:.0f} %)"

    def _abandon_start(self) -> None:
        """A start that failed releases what it took (threads, files, mappings, the root lock)."""
        self._state = StoreState.FAILED
        if self.writer is not None:
            self.writer.stopped = NOT_SERVING[StoreState.FAILED]
        for s in self._services:
            try:
                s.stop()
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
        for name in ("segments", "queues", "index", "checkpoint"):
            part = getattr(self, name, None)
            if part is not None:
                try:
                    part.close()
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass
        self._unlock_root()

    def _start(self) -> "MessageStore":
        cfg, fio = self.config, self.fio
        self.start_phase = "opening the store"
        fio.makedirs(cfg.root_dir)
        self._lock_handle = fio.lock(layout.lock_path(cfg.root_dir))
        self.topics = TopicTable(fio, cfg.config_path)
        self.topics.load()
        remembered.remember(fio, cfg)
        self.epochs = EpochFile(fio, cfg.root_dir)
        self.epochs.load()
        self.checkpoint = Checkpoint(fio, cfg.checkpoint_path)
        cp_state = self.checkpoint.open()
        self.abort_file = AbortFile(fio, cfg.abort_path, cfg.root_dir)
        abnormal = self.abort_file.exists()
        if abnormal:
            # a killed process leaves its writes in the page cache: make them durable before
            # recovery trusts them (a power loss later must not take back what recovery kept)
            for d in dict.fromkeys((cfg.root_dir,) + tuple(cfg.commitlog_paths)):
                if fio.is_dir(d):
                    fio.sync_filesystem(d)

        sizing.check_sizes(cfg, fio)
        self.disk = DiskMonitor(cfg, fio, self.clock)
        self.segments = SegmentQueue(fio, cfg.commitlog_paths, cfg.segment_size_bytes,
                                     readonly_dirs=cfg.readonly_commitlog_dirs,
                                     preallocate=cfg.preallocate_next_segment,
                                     placement=self.disk.placement_candidates,
                                     on_dir_error=self.disk.report_error, on_dir_ok=self.disk.note_success)
        self.segments.load()
        readonly = {os.path.normpath(d) for d in cfg.readonly_commitlog_dirs}
        self.commit_log = CommitLog(cfg, fio, self.segments, dir_offline=lambda d: self.disk.is_offline(d)
                                    or (bool(readonly) and os.path.normpath(d) in readonly))
        self.readable.attach(self.segments, self.commit_log)
        self.commit_log.load_sealed()
        queues_lost = not fio.is_dir(cfg.consumequeue_path) or not fio.listdir(cfg.consumequeue_path)
        self.queues = ConsumeQueueTable(fio, cfg.consumequeue_path, cfg.consume_queue_units_per_segment,
                                        cfg.consume_queue_open_files_max)
        self.queues.load()
        self.index: IndexService | None = None
        index_lost = False
        if cfg.index_enabled:
            had_dir = fio.is_dir(cfg.index_path)
            slots, entries = sizing.index_size(cfg, fio)
            self.index = IndexService(fio, cfg.index_path, slots, entries, self.clock)
            bad = self.index.load()
            # lost: no index/ at all, an index/ emptied of its files (marker gone), or files unreadable
            index_lost = not had_dir or self.index.was_lost or bool(bad)
            if bad:
                log.warning("unreadable index files removed (rebuilt from the log): %s", ", ".join(bad))
        self.dispatcher = Dispatcher(self.queues, self.index, cfg.dispatch_write_retries_max)
        self._put_lock.dispatch = self.dispatcher.dispatch_many
        self.dispatcher.is_dead = self.topics.is_dead
        self.reader = StoreReader(cfg, self.segments, self.commit_log, self.queues, self.topics, self.index,
                                  self._memory_budget_bytes, lambda: self._state is StoreState.RUNNING,
                                  self.readable.limit)
        self.start_phase = ("recovering: the last run did not stop cleanly, checking the log"
                            if abnormal else "recovering: checking the end of the log")
        self.recovery = recover(self.commit_log, self.queues, self.index, self.dispatcher,
                                cp_state if self.checkpoint.valid else None, abnormal,
                                cfg.recovery_scan_segments_normal, queues_lost, index_lost)
        self.start_phase = "checking the consume queues"
        self.queue_summary = heal.QueueSummary(fio, cfg.root_dir)
        self.recovery.queues_rebuilt += heal.heal(self.queues, self.topics, self.dispatcher, self.commit_log,
                                                  self.queue_summary.load())
        self.start_phase = "starting services"
        self.segments.settle()
        restore_topics(self.topics, self.queues)
        if self.epochs.entries:
            self.epochs.truncate_after(self.segments.max_offset)    # recovery may have cut the log
        if self.index is not None:
            self.index.mark_present()
        self.rounds = CheckpointRounds(self.checkpoint, self.queue_summary, self.segments, self.commit_log,
                                       self.queues, self.index, self.dispatcher, self.disk, self._put_lock,
                                       self.clock.monotonic_s, cfg.consumequeue_path, cfg.index_path)
        self.rounds.write()
        self.abort_file.create()
        self.archive = (ArchiveGuard(self.fio, cfg.root_dir, cfg.on_unarchived_full)
                        if cfg.archive_before_delete else None)
        self.backlog = BacklogGuard(self.topics, self.queues, self.consumer_positions)
        self.cleaner = CommitLogCleaner(cfg, self.segments, self.disk, self.clock, self.archive,
                                        backlog=self.backlog, retention=TopicRetention(self.topics, self.queues))
        self.queue_cleaner = QueueCleaner(self.queues, self.index)
        self.log_failure = LogFailureHandler(self.commit_log, self.queues, self.topics, self.dispatcher, self.disk,
                                             self._put_lock, self.clock.now_ms, self._stop_writes,
                                             lambda where, what, e: self.rounds.derived_failed(
                                                 self.config.consumequeue_path, what, e))
        self.commit_log.on_failure = self.log_failure
        self.log_failure.listeners.append(lambda failure: self.readable_advanced())
        self.disk.write_markers()
        self._check_disk()
        self._start_services()
        self.writer = StoreWriter(cfg, self.topics, self.queues, self.commit_log, self.segments, self.dispatcher,
                                  self.disk, self.index, self.clock, self._put_lock, self.group_commit,
                                  self.archive, self._check_disk, self.cleaner)
        self.replica = ReplicaLog(self.segments, self.commit_log, self.queues, self.index, self.dispatcher,
                                  self.topics, self.epochs, self._put_lock,
                                  lambda: restore_topics(self.topics, self.queues),
                                  cfg.sync_flush, self.rounds.below)
        self._state = StoreState.RUNNING
        self.start_phase = "running"
        return self

    def _unlock_root(self) -> None:
        if self._lock_handle is not None:
            self.fio.unlock(self._lock_handle)
            self._lock_handle = None

    def _start_services(self) -> None:
        cfg = self.config
        if cfg.commitlog_warm_enabled:
            # first: stopped before the segments close (a pre-made segment it holds is deleted then)
            self.warmer = SegmentWarmer(self.segments, self.fio, cfg.commitlog_warm_ahead_mib * MIB)
            self.commit_log.warmer = self.warmer
            self._services.append(self.warmer)
        if cfg.sync_flush:
            self.group_commit = GroupCommitService(self.commit_log.flush, lambda: self.commit_log.flushed_offset,
                                                   cfg.sync_flush_gather_us_max / 1e6, self.commit_log.failed_for,
                                                   stepped=self.stepped_flush)
            self.log_failure.listeners.append(self.group_commit.log_failed)
            self.group_commit.on_durable = self.readable_advanced
            self._services.append(self.group_commit)
        else:
            self.async_flush = AsyncFlushService(self.commit_log.flush, self.commit_log.dirty_bytes, self.clock,
                                                 cfg.flush_interval_ms, cfg.flush_least_pages,
                                                 cfg.flush_thorough_interval_ms)
            self._services.append(self.async_flush)
        self.queue_flush = PeriodicService("queue-flush", self._flush_queues,
                                           min(cfg.flush_consume_queue_interval_ms, cfg.checkpoint_interval_ms))
        self._services.append(self.queue_flush)
        self._services.append(PeriodicService("disk-check", self._check_disk,
                                              min(1000, cfg.clean_resource_interval_ms)))
        self._services.append(PeriodicService("clean", self._clean, cfg.clean_resource_interval_ms))
        for s in self._services:
            s.start()

    def flush_queues(self) -> None:
        """Heal a failed dispatch, fsync queues and index, write the checkpoint (one round)."""
        self._running("flush_queues")
        self._flush_queues()                # (which dispatches what puts left pending first)

    def _flush_queues(self) -> None:
        self._put_lock.drain()           # dispatches puts left for after their answer (put_lock.py)
        if self.dispatcher.error is not None:
            self.dispatcher.heal(self.commit_log, self._put_lock)     # in steps: the lock is free between them
        self.rounds.write()


    def _stop_writes(self, text: str) -> None:
        """Refuse every put (WRITE_ERROR) until a restart: the commit log failed and cannot go on."""
        if self.writer is not None:
            self.writer.stopped = (PutReason.WRITE_ERROR, text)

    def shutdown(self) -> None:
        """Flush, dispatch, checkpoint; remove the abort file only if all of that succeeded.
        Does nothing unless the store runs (twice is harmless)."""
        if self._state is not StoreState.RUNNING:
            return
        self._state = StoreState.STOPPING
        self.writer.stopped = NOT_SERVING[StoreState.STOPPING]
        with self._put_lock:
            pass                      # wait for the put in progress
        for s in self._services:
            s.stop()
        self.reader.repair.stop()     # a damaged unit's walk aside (unit_repair.py)
        clean = True
        try:
            # head segments out of service whose readers are done are finished now (their names went
            # when they left service: one still held does not come back at the next start either)
            self.cleaner.finish_pending(self.clock.now_ms())
            self.commit_log.flush()
            if self.dispatcher.error is not None:
                self.dispatcher.heal(self.commit_log)
            self.rounds.write(summary=True)
            clean = self.dispatcher.error is None and self.commit_log.flushed_offset >= self.segments.max_offset \
                and not self.commit_log.failures and self.rounds.derived_frozen is None
        except OSError as e:
            clean = False
            log.error("shutdown could not flush everything (%s): the next start recovers", e)
        for part in (self.segments, self.queues, self.index, self.checkpoint):
            if part is None:
                continue
            try:
                part.close()
            except OSError as e:      # keep closing the rest; the next start recovers
                clean = False
                log.error("shutdown: closing %s failed: %s", type(part).__name__, e)
        if clean:
            self.abort_file.remove()
        self._unlock_root()
        self.writer.stopped = NOT_SERVING[StoreState.STOPPED]
        self._state = StoreState.STOPPED

    def install_signal_handlers(self) -> None:
        """SIGTERM / SIGINT shut the store down cleanly (flush, dispatch, checkpoint, remove
        the abort file), then end the process. Call from the main thread."""
        import signal

        def handler(signum, _frame):
            log.warning("signal %d: shutting the store down", signum)
            try:
                self.shutdown()
            finally:
                raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def kill(self) -> None:
        """Stop like a killed process (tests): background threads end, nothing is flushed,
        the abort file and the root lock stay. The next start recovers. Does nothing unless
        the store runs."""
        if self._state is not StoreState.RUNNING:
            return
        self._state = StoreState.KILLED
        self.writer.stopped = NOT_SERVING[StoreState.KILLED]
        for s in self._services:
            s.stop()
        self.reader.repair.stop()
        self.segments.stop()

    def __enter__(self) -> "MessageStore":
        return self.start() if self._state is StoreState.NEW else self

    def __exit__(self, *exc) -> None:
        self.shutdown()
