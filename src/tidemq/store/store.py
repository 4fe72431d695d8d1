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
(``StoreReader``); the store delegates to them.

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
from typing import Callable, Iterable, Sequence

from ..config import MIB, StoreConfig
from ..io import Clock, FileIO, OsFileIO, SystemClock
from ..words import human_bytes
from ..record import codec
from .. import layout
from . import heal, remembered, sizing
from .archive import ArchiveGuard
from .backlog import BacklogGuard, Positions
from .checkpoint import AbortFile, Checkpoint
from .checkpointing import CheckpointRounds
from .cleaner import CommitLogCleaner, QueueCleaner, log_deletion
from .topic_retention import TopicRetention
from .commit_log import CommitLog
from .consume_queue import ConsumeQueueTable
from .disk import DiskMonitor, status_report
from .dispatch import Dispatcher
from .epochs import EpochFile
from .flush import AsyncFlushService, GroupCommitService, PeriodicService
from .index_file import IndexService
from .log_failure import LogFailure, LogFailureHandler
from .put_lock import PutLock
from .readable import ReadableEnd
from .reader import StoreReader
from .record_loop import SLICE_FIELDS
from .recovery import RecoveryReport, recover
from .replica import ReplicaLog
from .segment_queue import SegmentQueue
from .topics import TopicTable
from .types import (GetResult, GetStatus, Message, PutReason, PutResult, PutResults, StoreError, StoreNotRunning,
                    StoreState)
from .verify import CheckReport, check_store
from .warmer import SegmentWarmer
from .writer import StoreWriter, restore_topics

log = logging.getLogger("tidemq.store")

# why puts are refused in a state without a writer or once it stopped (reason, text)
_NOT_SERVING = {
    StoreState.NEW: (PutReason.NOT_RUNNING, "store not started"),
    StoreState.STARTING: (PutReason.NOT_RUNNING, "store is starting"),
    StoreState.STOPPING: (PutReason.SHUTTING_DOWN, "store is shutting down"),
    StoreState.STOPPED: (PutReason.NOT_RUNNING, "store is stopped"),
    StoreState.KILLED: (PutReason.NOT_RUNNING, "store was killed"),
    StoreState.FAILED: (PutReason.NOT_RUNNING, "store failed to start"),
}


class MessageStore:
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
            self.writer.stopped = _NOT_SERVING[StoreState.FAILED]
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
        self.writer.stopped = _NOT_SERVING[StoreState.STOPPING]
        with self._put_lock:
            pass                      # wait for the put in progress
        for s in self._services:
            s.stop()
        clean = True
        try:
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
        self.writer.stopped = _NOT_SERVING[StoreState.STOPPED]
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
        self.writer.stopped = _NOT_SERVING[StoreState.KILLED]
        for s in self._services:
            s.stop()
        self.segments.stop()

    def __enter__(self) -> "MessageStore":
        return self.start() if self._state is StoreState.NEW else self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # Replication (replica.py, epochs.py) -----------------------------------------------
    def follow(self, why: str) -> None:
        """Refuse puts with NOT_LEADER and ``why`` (naming the leader): the log is written only by
        ``replica.append`` from here on (a follower, or a leader fenced off its coordinator)."""
        self._running("follow")
        self.writer.role_refusal = (PutReason.NOT_LEADER, why)

    def lead(self, epoch: int) -> None:
        """Take puts again, as the leader of ``epoch`` (0: no epoch, a group without them) from the
        log's end: the queues' next offsets follow what was copied, the epoch file says where it began."""
        self._running("lead")
        self.replica.writable()
        if epoch:
            self.epochs.begin(epoch, self.segments.max_offset)
        self.writer.role_refusal = None

    @property
    def puts_may_wait(self) -> bool:
        """Whether a put may keep its caller waiting on the disk or on other members: SYNC_FLUSH
        (the group commit's fsync) or SYNC replication (the followers' confirmations, while this
        store leads). The one rule a caller on an event loop follows: such puts are made with
        ``wait=False`` and what they wait for is awaited (``when_durable``, the followers' acks),
        or they run on a thread; the others inline (they wait only for the put lock, which others
        hold for short, bounded work: a put, a dispatch, a topic's creation, one step of healing:
        dispatch.HEAL_STEP_RECORDS)."""
        if self.config.sync_flush:
            return True
        rep = self.writer.replicas if self.writer is not None else None
        return rep is not None and rep.sync

    @property
    def following(self) -> bool:
        return self.writer is not None and self.writer.role_refusal is not None

    def confirm(self, end: int) -> PutReason | None:
        """Whether everything before ``end`` is where a put's acknowledgement needs it now (on disk
        with SYNC_FLUSH, on enough followers with SYNC replication): None, or the PutReason it
        is not (no wait: a resend's answer). FLUSH_FAILED, in every flush mode, is final: a commit-log
        fsync or write that covered the record failed, the record was taken out of the log
        (log_failure.py) and a resend must store the message again; FLUSH_TIMEOUT and the replication
        reasons may still turn into None."""
        self._running("confirm")
        if self.commit_log.failed_for(end) is not None:
            return PutReason.FLUSH_FAILED          # final: taken out of the log (log_failure.py)
        if self.group_commit is not None and self.group_commit.flushed < end:
            return PutReason.FLUSH_TIMEOUT
        if self.writer.role_refusal is not None:
            return self.writer.role_refusal[0]      # no longer the leader: it cannot tell (NOT_LEADER)
        rep = self.writer.replicas
        return rep.wait(end, 0.0) if rep is not None else None

    # Log failures (log_failure.py) -----------------------------------------------------------
    def on_log_failed(self, callback: Callable[[LogFailure], None]) -> None:
        """``callback(failure)`` after every failure of the commit log (a failed fsync or write), once
        the log was cut back to its durable end, from the thread that found it (the flush thread, or a
        put's): the hook for a leader with followers, which steps down instead of writing on.
        ``log_failures`` is the same to poll."""
        self._running("on_log_failed")
        self.log_failure.listeners.append(callback)

    @property
    def log_failures(self) -> list[LogFailure]:
        """The commit log's failures in this run, oldest first (empty: none); answered in every state
        (after a stop too: a post-mortem)."""
        return list(self.commit_log.failures) if getattr(self, "commit_log", None) is not None else []

    # What readers may be served (reader.py says which readers are limited) ------------------
    def readable_end(self) -> int:
        """The commit-log offset before which records may be served to readers: what cannot be taken
        back (readable.py: in each flush mode, after a failure of the log, under ``set_commit_limit``)."""
        self._running("readable_end")
        return self.readable.end()

    def set_commit_limit(self, fn: Callable[[], int] | None) -> None:
        """Serve readers no record ending after ``fn()`` (a commit-log offset; None: no such limit),
        besides readable_end's own rule: the broker's SYNC replication sets the group's high
        watermark. ``fn`` is called on every read: cheap, any thread. When what it returns moves
        forward, call ``readable_advanced()`` so that waiting long polls look again."""
        self.readable.set_limit(fn)

    def readable_max_offset(self, topic: str, queue_id: int) -> int:
        """A queue's max offset as consumers see it: one past its last message readable now (QueryOffset
        END, the max every get carries); ``max_offset`` is the queue's own end."""
        self._reading("readable_max_offset")
        return self.reader.readable_max_offset(topic, queue_id)

    def notify_readable(self, callback: Callable[[], None]) -> bool:
        """Call ``callback()`` once, from whichever thread moves readable_end (the flush thread, the
        caller of ``readable_advanced``), when everything appended so far has become readable: a long
        poll woken by an arrival that found its record not readable yet waits on this, not on the
        next arrival, and does not spin. False (and no call) when everything is readable now. At most
        readable.READABLE_WAITERS_MAX wait; past that the oldest are called at once (they look again)."""
        self._running("notify_readable")
        return self.readable.wait(callback)

    def readable_advanced(self) -> None:
        """readable_end may have moved: call the waiters it reached (notify_readable). Whatever the
        store's state (a no-op with nobody waiting; a stopped store calls them all: they look again)."""
        self.readable.advanced()

    # Consumers (backlog.py) ---------------------------------------------------------------
    def set_consumer_positions(self, positions: Positions | None) -> None:
        """How the store learns what consumer groups have consumed (store/backlog.py: ``positions(topic)``
        -> {group: {queue id: first offset not consumed}}), for the space policy and the report of
        what cleanup took from each group. The broker passes its own; None: no group is known."""
        self.consumer_positions = positions
        if self.backlog is not None:
            self.backlog.positions = positions

    # Topics --------------------------------------------------------------------------
    def create_topic(self, name: str, queue_count: int | None = None, space_policy: str | None = None,
                     message_type: str | None = None) -> None:
        """Create a topic, grow its queue count, or set its space policy ("evict" / "refuse",
        topics.SpacePolicy) or message type ("normal", "fifo", "delay", "transaction", "mixed":
        topics.MessageKind); None: a new topic's is evict / mixed, an existing one's stays.
        ValueError: not a topic name, too many queues, not a policy, not a message type."""
        self._running("create_topic")
        self.writer.create_topic(name, queue_count or self.config.topic_queues_default, space_policy,
                                 message_kind=message_type)

    def message_type(self, topic: str) -> str | None:
        """A topic's message type (topics.MessageKind's value), None if there is no such topic."""
        t = self.topics.get(topic)
        return t.message_kind.value if t is not None else None

    def topic_settings(self, topic: str):
        """A topic's own settings (topics.TopicSettings), None if there is no such topic."""
        self._running("topic_settings")
        t = self.topics.get(topic)
        return t.settings if t is not None else None

    def set_topic_settings(self, topic: str, changes: dict):
        """Change some of a topic's own settings (retention_hours, retention_bytes, max_message_bytes;
        None: the store's again), saved before it returns: the new TopicSettings. KeyError: no such
        topic; ValueError: a setting it does not have, or a value outside its bounds."""
        self._running("set_topic_settings")
        t = self.topics.get(topic)
        if t is None:
            raise KeyError(topic)
        return self.topics.set_settings(topic, t.settings.changed(changes, self.config.message_body_bytes_max))

    def reconfigure(self, config: StoreConfig) -> None:
        """Settings changed at run time (broker/live_settings.py: the cleanup times and batch, the
        three ratios); the others of ``config`` must be this store's own (they are read at start)."""
        self.config = config
        self.disk.set_thresholds(config)
        cleaner = getattr(self, "cleaner", None)       # (made at start)
        if cleaner is not None:
            cleaner.reconfigure(config)

    def space_policy(self, topic: str) -> str | None:
        """A topic's space policy ("evict" / "refuse"), None if there is no such topic."""
        self._running("space_policy")
        t = self.topics.get(topic)
        return t.space_policy.value if t is not None else None

    def delete_topic(self, name: str, log_end: int | None = None) -> dict | None:
        """Delete a topic (mqadmin deleteTopic): its queues go at once, its records stay in the log,
        dead, until cleanup; a topic of that name created later starts empty. None if unknown.
        ``log_end``: where its records end (a follower copying its leader's deletion)."""
        self._running("delete_topic")
        return self.writer.delete_topic(name, log_end)

    def set_write_queues(self, name: str, queue_ids) -> None:
        """The queues of ``name`` puts without a queue id go to (None: all): a topic spread over several
        broker groups takes puts in the queues this store's group owns. ValueError: no such queue."""
        self._running("set_write_queues")
        t = self.topics.get(name)
        if t is None:
            raise ValueError(f"topic {name!r} does not exist")
        self.create_spread_topic(name, t.queue_count, queue_ids)

    def create_spread_topic(self, name: str, queue_count: int, queue_ids) -> None:
        """Create ``name`` with (at least) ``queue_count`` queues whose puts without a queue id go to
        ``queue_ids`` (None: all), set together: no put falls between (a topic spread over groups)."""
        self._running("create_spread_topic")
        count = max(queue_count, self.queue_count(name))
        ids = range(count) if queue_ids is None else tuple(sorted(set(queue_ids)))
        if not ids or any(not 0 <= q < count for q in ids):
            raise ValueError(f"queues {list(ids)} are not queues of {name!r} ({count})")
        self.writer.create_topic(name, count, write_ids=ids)

    def write_queues(self, name: str):
        """The queues of ``name`` puts without a queue id go to (see set_write_queues)."""
        self._running("write_queues")
        t = self.topics.get(name)
        return t.write_ids if t is not None else range(0)

    def topic_names(self) -> list[str]:
        self._running("topic_names")
        return sorted(self.topics.topics)

    def queue_count(self, topic: str) -> int:
        self._running("queue_count")
        t = self.topics.get(topic)
        return t.queue_count if t else 0

    # Write path (writer.py) -------------------------------------------------------------
    @property
    def refusal(self) -> str | None:
        """Why the store refuses puts on its own account (not started, shutting down, stopped,
        killed), or None while it runs. Setting a text refuses puts with it, as a stopped
        store does (a test's hold); None lifts it."""
        w = self.writer
        if w is None:
            return _NOT_SERVING[self._state][1]
        return w.stopped[1] if w.stopped is not None else None

    @refusal.setter
    def refusal(self, text: str | None) -> None:
        if self.writer is None:
            raise StoreNotRunning(self._state, "refusal")
        self.writer.stopped = None if text is None else (PutReason.NOT_RUNNING, text)

    def put_refusal(self) -> tuple[PutReason, str] | None:
        """Why puts are refused right now, (reason, text), or None: the verdict every put starts with."""
        w = self.writer
        if w is None:
            return _NOT_SERVING[self._state]
        return w.refusal()

    def write_refusal(self) -> str | None:
        """Why puts are refused right now (for humans), or None."""
        why = self.put_refusal()
        return why[1] if why is not None else None

    def _refused(self, n: int) -> PutResults:
        return PutResults.all_refused(n, PutResult.refused(*_NOT_SERVING[self._state]))

    def put(self, msg: Message) -> PutResult:
        w = self.writer
        if w is None:
            return self._refused(1)[0]
        return w.put_batch([msg])[0]

    def put_batch(self, msgs: Sequence[Message], defer_dispatch: bool = False, wait: bool = True) -> PutResults:
        """Put many messages with one lock, one append pass and one flush wait.
        Returns one PutResult per message, in order (writer.py). ``defer_dispatch``: their
        consume-queue units and index entries are written when the put lock is next taken, before
        any read, or at ``drain_dispatch()``, whichever comes first (put_lock.py). ``wait`` False:
        return once appended, without waiting for what the acknowledgement needs (SYNC_FLUSH's fsync,
        SYNC replication): ``results.pending_end`` >= 0 then, and the results say PUT_OK only once
        ``settle_put`` has run (after ``when_durable``'s release): a caller on an event loop awaits the
        fsync there instead of holding a thread (broker/puts.py)."""
        w = self.writer
        if w is None:
            return self._refused(len(msgs))
        return w.put_batch(msgs, defer_dispatch, wait)

    def put_encoded(self, topic: str, entries: Sequence[tuple], born_ms: int | None = None,
                    born_host: str | None = None, sys_flag: int = 0, defer_dispatch: bool = False,
                    wait: bool = True) -> PutResults:
        """Put messages of one topic whose properties are already encoded (the broker's one-message
        SendMessage): see StoreWriter.put_encoded; ``wait``: see put_batch."""
        w = self.writer
        if w is None:
            return self._refused(len(entries))
        return w.put_encoded(topic, entries, born_ms, born_host, sys_flag, defer_dispatch, wait)

    def put_slices(self, topic: str, data, fields, extra: bytes = b"", skip=None, born=None,
                   wait: bool = True) -> PutResults:
        """Put messages of one topic given as slices of one buffer (the broker's SendRecords path, and
        SendMessage's batches read by the compiled lane): see StoreWriter.put_slices; ``wait``: see put_batch."""
        w = self.writer
        if w is None:
            return self._refused(memoryview(fields).nbytes // (4 * SLICE_FIELDS))
        return w.put_slices(topic, data, fields, extra, skip, born, wait)

    # Puts that do not wait (put_*(..., wait=False)): the caller waits for the fsync its own way ------
    def when_durable(self, end: int, release: Callable[[], None]):
        """After a put made with ``wait=False`` (``end``: its ``results.pending_end``): ``release()`` is
        called from the group commit's thread, holding its lock (so: only hand over, e.g.
        ``loop.call_soon_threadsafe``), once everything before ``end`` is durable, an fsync that
        covered it failed, or the service ended. None when that is known already (``release`` is
        never called: settle at once); else a handle for ``forget_durable`` (a wait given up)."""
        gc = self.group_commit
        return gc.when_durable(end, release) if gc is not None else None

    def forget_durable(self, handle) -> None:
        """``when_durable``'s wait given up (its timeout, a cancelled caller)."""
        if handle is not None and self.group_commit is not None:
            self.group_commit.forget(handle)

    def settle_put(self, results: PutResults, replicas=None) -> PutResults:
        """Complete a put made with ``wait=False`` from what is durable now: PUT_OK once its records
        are on disk (SYNC_FLUSH), FLUSH_DISK_FAILED (final, log_failure.py) or FLUSH_DISK_TIMEOUT, as
        the waiting put would have answered; SYNC replication is asked without waiting (a caller on
        an event loop first awaits the followers: ``replicas``, the writer's ``replicas`` when it
        appended, ``when_confirmed``; broker/puts.py)."""
        end = results.pending_end
        w = self.writer
        if end < 0 or w is None:
            return results
        gc = self.group_commit
        w.settle(results, end, gc.outcome(end) if gc is not None else None, 0.0, replicas)
        return results

    @property
    def puts_wait_for_disk_only(self) -> bool:
        """SYNC_FLUSH with no SYNC replication: a put's acknowledgement waits for the group commit's
        fsync and nothing else (``when_durable``; SYNC replication's waits are the followers' acks:
        broker/puts.py)."""
        if not self.config.sync_flush:
            return False
        rep = self.writer.replicas if self.writer is not None else None
        return rep is None or not rep.sync

    # Read path (reader.py) ----------------------------------------------------------------
    def min_offset(self, topic: str, queue_id: int) -> int:
        self._reading("min_offset")
        cq = self.queues.get(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        self._reading("max_offset")
        cq = self.queues.get(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def queue_bytes(self, topic: str, queue_id: int, units_max: int = 4096) -> tuple[int, bool]:
        """(record bytes the queue holds, exact): exact up to ``units_max`` messages, estimated from
        the last ``units_max`` beyond (a bounded read; ConsumeQueue.message_bytes)."""
        self._reading("queue_bytes")
        cq = self.queues.get(topic, queue_id)
        return cq.message_bytes(units_max) if cq is not None else (0, True)

    @property
    def commitlog_min_offset(self) -> int:
        self._running("commitlog_min_offset")
        return self.segments.min_offset

    @property
    def commitlog_max_offset(self) -> int:
        self._running("commitlog_max_offset")
        return self.segments.max_offset

    def get(self, group: str, topic: str, queue_id: int, offset: int, max_count: int = 32,
            max_bytes: int = 256 * 1024, tags: Iterable[str] | None = None, match=None) -> GetResult:
        """Up to max_count messages of one queue from ``offset`` (RocketMQ's getMessage).

        ``tags``: only messages with one of these tags (None or '*': all); ``match``: only messages
        for which ``match(message)`` is true (a property filter, RocketMQ's isMatchedByCommitLog;
        None: all). The messages skipped by either are passed: next_offset is after them. The count
        and byte limits are also capped by the in-memory / from-disk pull limits.
        """
        if self.reader is None:
            return GetResult(GetStatus.SERVICE_NOT_AVAILABLE, offset, 0, 0)
        self._put_lock.drain()           # answered puts not dispatched yet: dispatched first (put_lock.py)
        r = self.reader.get(group, topic, queue_id, offset, max_count, max_bytes, tags, match)
        if r.messages:
            self._count_read(topic, len(r.messages), sum(len(m.body) for m in r.messages))
        return r

    def get_raw(self, topic: str, queue_id: int, offset: int, max_count: int = 4096,
                max_bytes: int = 16 << 20, room: int = 0, head=None) -> GetResult:
        """Up to max_count records of one queue from ``offset`` as stored bytes, copied after
        ``room`` bytes for a header, which ``head`` makes (reader.py)."""
        if self.reader is None:
            return GetResult(GetStatus.SERVICE_NOT_AVAILABLE, offset, 0, 0)
        self._put_lock.drain()           # answered puts not dispatched yet: dispatched first (put_lock.py)
        r = self.reader.get_raw(topic, queue_id, offset, max_count, max_bytes, room, head)
        if r.records is not None and len(r.records[0]):
            self._count_read(topic, len(r.records[0]), len(r.records[1]))
        return r

    def _count_read(self, topic: str, n: int, nbytes: int) -> None:
        """Messages and bytes handed to readers, per topic, since start (metrics: got / bytes out)."""
        c = self.read_counts.get(topic)
        if c is None:
            c = self.read_counts[topic] = [0, 0]
        c[0] += n
        c[1] += nbytes

    def get_by_commitlog_offset(self, offset: int, size: int | None = None) -> codec.StoredMessage | None:
        """The message whose record starts at ``offset``, or None."""
        self._reading("get_by_commitlog_offset")
        return self.reader.get_by_commitlog_offset(offset, size)

    def query_by_key(self, topic: str, key: str, max_count: int = 32, begin_ms: int = 0,
                     end_ms: int | None = None, whole_log: bool = False) -> list[codec.StoredMessage]:
        """Messages of ``topic`` with this key (or unique key) stored within [begin_ms, end_ms], newest
        first, readable ones only (readable_end) unless ``whole_log`` (the broker's own look-up of a
        resend's earlier store: it answers it only once ``confirm`` says so)."""
        self._reading("query_by_key")
        return self.reader.query_by_key(topic, key, max_count, begin_ms, end_ms, whole_log)

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after ``timestamp_ms``
        (max offset if none): a binary search on store time."""
        self._reading("offset_for_timestamp")
        return self.reader.offset_for_timestamp(topic, queue_id, timestamp_ms)

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
