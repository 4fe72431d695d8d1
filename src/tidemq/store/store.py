"""MessageStore: the embedded storage engine's facade.

    store = MessageStore(StoreConfig(root_dir="data"))
    store.start()                      # recovers, then serves
    r = store.put(Message(topic="T", body=b"x"))
    g = store.get(group="G", topic="T", queue_id=r.queue_id, offset=0)
    store.shutdown()                   # flush, dispatch, checkpoint, remove the abort file

Write path (``put_batch``): validate and encode outside the lock; under the put
lock assign queue offsets, append to the commit log, dispatch to the consume
queues and index; then, with SYNC_FLUSH, wait for the group commit. One lock
and one flush wait per batch.

Read path (``get``, reader.py): consume-queue units by pread, records decoded
from the mapped segments while a hold keeps them mapped; bodies are copied out
(a few hundred nanoseconds for 1 KiB) so a result never pins a segment and
cleanup never waits for a slow consumer.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from functools import lru_cache
from typing import Callable, Iterable, Sequence
from zlib import crc32

from ..config import MIB, StoreConfig
from ..io import Clock, FileIO, OsFileIO, SystemClock
from . import codec
from .checkpoint import AbortFile, Checkpoint
from .codec import PROP_KEYS, PROP_TAGS, PROP_UNIQ_KEY, tags_hash
from .commit_log import AppendError, CommitLog
from .consume_queue import ConsumeQueueTable
from .dispatch import Dispatcher, index_keys
from .archive import ArchiveGuard
from .cleaner import CommitLogCleaner, QueueCleaner
from .disk import DiskMonitor, status_report
from .verify import CheckReport, check_store
from .flush import AsyncFlushService, GroupCommitService, PeriodicService
from .index_file import IndexService
from .reader import StoreReader
from .recovery import RecoveryReport, recover
from .segment_queue import SegmentQueue
from .topics import TopicState, TopicTable
from .types import GetResult, GetStatus, Message, PutResult, PutStatus, StoreError
from .warmer import SegmentWarmer

log = logging.getLogger("tidemq.store")

LOCK_FILE = "lock"


@lru_cache(maxsize=4096)
def _tags_props(tags: str) -> bytes | None:
    """Properties of a message with tags only (None: the tags need the general path)."""
    if not isinstance(tags, str) or not codec.check_property_text(tags):
        return None
    pb = f"{PROP_TAGS}\x01{tags}\x02".encode("utf-8")
    return pb + codec.RECORD_CRC_TAIL if len(pb) <= codec.USER_PROPERTIES_MAX_BYTES else None


_NO_PROPS = codec.RECORD_CRC_TAIL


_I32 = (-(1 << 31), (1 << 31) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)


def _bad_numbers(m: Message) -> str | None:
    """What is wrong with a message's numeric fields (they are packed as i32 / i64), or None."""
    for name, (lo, hi) in (("flag", _I32), ("sys_flag", _I32), ("reconsume_times", _I32),
                           ("prepared_transaction_offset", _I64), ("born_timestamp_ms", _I64)):
        v = getattr(m, name)
        if v is None and name == "born_timestamp_ms":
            continue
        if type(v) is not int or not lo <= v <= hi:
            return f"{name} must be an integer in [{lo}, {hi}], not {v!r}"
    return None


@lru_cache(maxsize=256)
def _host_bytes(host: str) -> bytes:
    return codec.encode_host(host)


def _total_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


class MessageStore:
    def __init__(self, config: StoreConfig, fio: FileIO | None = None, clock: Clock | None = None) -> None:
        self.config = config
        self.fio: FileIO = fio or OsFileIO()
        self.clock: Clock = clock or SystemClock()
        self._put_lock = threading.Lock()
        self._state = "new"
        self._lock_handle = None
        self.recovery: RecoveryReport | None = None
        self.refusal: str | None = "store not started"
        self.archive: ArchiveGuard | None = None        # archive_before_delete (set at start)
        self.segment_error: str | None = None
        self._memory_budget_bytes = _total_memory_bytes() * config.access_message_in_memory_ratio_max_percent // 100
        self._store_host = codec.encode_host(config.store_host)
        self._max_body = config.max_message_size_bytes
        self._services: list = []
        self.group_commit: GroupCommitService | None = None
        self.async_flush: AsyncFlushService | None = None
        self.queue_flush: PeriodicService | None = None
        self.reader: StoreReader | None = None        # the read path (reader.py), once started
        self.warmer: SegmentWarmer | None = None      # commitlog_warm_enabled (warmer.py)

    # Lifecycle -----------------------------------------------------------------------
    def start(self) -> "MessageStore":
        if self._state != "new":
            raise StoreError(f"store already {self._state}")
        try:
            return self._start()
        except BaseException:
            self._abandon_start()
            raise

    def _abandon_start(self) -> None:
        """A start that failed releases what it took (files, mappings, the root lock)."""
        self._state = "failed"
        for name in ("segments", "queues", "index", "checkpoint"):
            part = getattr(self, name, None)
            if part is not None:
                try:
                    part.close()
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass
        unlock = getattr(self.fio, "unlock", None)
        if unlock is not None and self._lock_handle is not None:
            unlock(self._lock_handle)
            self._lock_handle = None

    def _start(self) -> "MessageStore":
        cfg, fio = self.config, self.fio
        fio.makedirs(cfg.root_dir)
        self._lock_root()
        self.topics = TopicTable(fio, cfg.config_path)
        self.topics.load()
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

        self.disk = DiskMonitor(cfg, fio, self.clock)
        self.segments = SegmentQueue(fio, cfg.commitlog_paths, cfg.segment_size_bytes,
                                     readonly_dirs=cfg.readonly_commitlog_dirs,
                                     preallocate=cfg.preallocate_next_segment,
                                     placement=self.disk.placement_candidates,
                                     on_dir_error=self.disk.report_error, on_dir_ok=self.disk.note_success)
        self.segments.load()
        readonly = {os.path.normpath(d) for d in cfg.readonly_commitlog_dirs}
        self.commit_log = CommitLog(cfg, fio, self.segments, dir_offline=lambda d: self.disk.is_offline(d)
                                    or os.path.normpath(d) in readonly)
        self.commit_log.load_sealed()
        queues_lost = not fio.is_dir(cfg.consumequeue_path) or not fio.listdir(cfg.consumequeue_path)
        self.queues = ConsumeQueueTable(fio, cfg.consumequeue_path, cfg.consume_queue_units_per_segment,
                                        cfg.consume_queue_open_files_max)
        self.queues.load()
        self.index: IndexService | None = None
        index_lost = False
        if cfg.index_enabled:
            had_dir = fio.is_dir(cfg.index_path)
            self.index = IndexService(fio, cfg.index_path, cfg.index_slots, cfg.index_entries, self.clock)
            bad = self.index.load()
            # lost: no index/ at all, an index/ emptied of its files (marker gone), or files unreadable
            index_lost = not had_dir or self.index.was_lost or bool(bad)
            if bad:
                log.warning("unreadable index files removed (rebuilt from the log): %s", ", ".join(bad))
        self.dispatcher = Dispatcher(self.queues, self.index, cfg.dispatch_write_retries_max)
        self.reader = StoreReader(cfg, self.segments, self.commit_log, self.queues, self.topics, self.index,
                                  self._memory_budget_bytes, lambda: self._state == "running")
        self.recovery = recover(self.commit_log, self.queues, self.index, self.dispatcher,
                                cp_state if self.checkpoint.valid else None, abnormal,
                                cfg.recovery_scan_segments_normal, queues_lost, index_lost)
        self._restore_topic_state()
        if self.index is not None:
            self.index.mark_present()
        self._write_checkpoint()
        self.abort_file.create()
        self.archive = (ArchiveGuard(self.fio, cfg.root_dir, cfg.on_unarchived_full)
                        if cfg.archive_before_delete else None)
        self.cleaner = CommitLogCleaner(cfg, self.segments, self.disk, self.clock, self.archive)
        self.queue_cleaner = QueueCleaner(self.queues, self.index)
        self.disk.write_markers()
        self.check_disk()
        self._start_services()
        self._state = "running"
        self.refusal = None
        return self

    def _lock_root(self) -> None:
        lock = getattr(self.fio, "lock", None)
        if lock is not None:
            self._lock_handle = lock(os.path.join(self.config.root_dir, LOCK_FILE))

    def _restore_topic_state(self) -> None:
        changed = False
        for cq in self.queues.all():
            t = self.topics.get(cq.topic)
            if t is None or cq.queue_id >= t.queue_count:
                if not codec.valid_topic(cq.topic):
                    continue
                self.topics.create(cq.topic, max(cq.queue_id + 1, t.queue_count if t else 1), save=False)
                changed = True
        if changed:
            self.topics.save()
        for t in self.topics.topics.values():
            for qid in range(t.queue_count):
                self._bind_queue(t, qid)

    def _bind_queue(self, t: TopicState, qid: int) -> None:
        cq = self.queues.get_or_create(t.name, qid)
        t.queues[qid] = cq
        t.next_offsets[qid] = cq.max_offset

    def _start_services(self) -> None:
        cfg = self.config
        if cfg.commitlog_warm_enabled:
            # first: stopped before the segments close (a pre-made segment it holds is deleted then)
            self.warmer = SegmentWarmer(self.segments, self.fio, cfg.commitlog_warm_ahead_mib * MIB)
            self.commit_log.warmer = self.warmer
            self._services.append(self.warmer)
        if cfg.sync_flush:
            self.group_commit = GroupCommitService(self.commit_log.flush, lambda: self.commit_log.flushed_offset)
            self._services.append(self.group_commit)
        else:
            self.async_flush = AsyncFlushService(self.commit_log.flush, self.commit_log.dirty_bytes, self.clock,
                                                 cfg.flush_interval_ms, cfg.flush_least_pages,
                                                 cfg.flush_thorough_interval_ms)
            self._services.append(self.async_flush)
        self.queue_flush = PeriodicService("queue-flush", self.flush_queues,
                                           min(cfg.flush_consume_queue_interval_ms, cfg.checkpoint_interval_ms))
        self._services.append(self.queue_flush)
        self._services.append(PeriodicService("disk-check", self.check_disk, min(1000, cfg.clean_resource_interval_ms)))
        self._services.append(PeriodicService("clean", self.clean, cfg.clean_resource_interval_ms))
        for s in self._services:
            s.start()

    def flush_queues(self) -> None:
        """Heal a failed dispatch, fsync queues and index, write the checkpoint (one round)."""
        if self.dispatcher.error is not None:
            with self._put_lock:
                self.dispatcher.heal(self.commit_log)
        self._write_checkpoint()

    # Disk space ----------------------------------------------------------------------
    def check_disk(self) -> None:
        """Measure every directory, update the flags and the forecast (the disk-check service)."""
        self.disk.observe(self.segments.max_offset, self.cleaner.deleted_bytes_total)
        self.disk.refresh(self.segments.counts_by_dir())

    def clean(self) -> None:
        """One cleanup round: commit-log segments, then queues and index behind them."""
        self.check_disk()
        rnd = self.cleaner.run_round()
        if rnd.deleted:
            self.queue_cleaner.run_round(self.segments.min_offset)
            self.commit_log.prune_sealed()
            self.check_disk()

    def trigger_delete_expired(self) -> None:
        """The admin's 'delete expired commit log': the next manual_delete_rounds rounds delete."""
        self.cleaner.trigger_manual()

    def disk_status(self) -> dict:
        """Per directory: capacity, used, ratio, free, state, segments; the flags; what the last
        cleanup did and why not; the forecast (when the ratios are reached, retention possible)."""
        return status_report(self.disk, self.cleaner, self.segments, {
            "write_refusal": self.write_refusal(), "disk_full": self.disk.refusal,
            "dispatch_error": self.dispatcher.error, "segment_error": self.segment_error})

    def _write_checkpoint(self) -> None:
        d = self.dispatcher
        dispatched, ts = d.dispatched_offset, d.last_store_timestamp_ms
        if d.pending_from is not None:
            dispatched = min(dispatched, d.pending_from)
        self.queues.flush()
        if self.index is not None:
            self.index.flush()
        last = self.segments.last
        self.checkpoint.update(physic_offset=self.commit_log.flushed_offset,
                               physic_timestamp_ms=last.last_store_timestamp_ms if last else 0,
                               logics_offset=dispatched, logics_timestamp_ms=ts,
                               index_offset=dispatched, index_timestamp_ms=ts)
        self.checkpoint.flush()

    def shutdown(self) -> None:
        """Flush, dispatch, checkpoint; remove the abort file only if all of that succeeded."""
        if self._state != "running":
            return
        self._state = "stopping"
        self.refusal = "store is shutting down"
        with self._put_lock:
            pass                      # wait for the put in progress
        for s in self._services:
            s.stop()
        clean = True
        try:
            self.commit_log.flush()
            if self.dispatcher.error is not None:
                self.dispatcher.heal(self.commit_log)
            self._write_checkpoint()
            clean = self.dispatcher.error is None and self.commit_log.flushed_offset >= self.segments.max_offset
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
        unlock = getattr(self.fio, "unlock", None)
        if unlock is not None and self._lock_handle is not None:
            unlock(self._lock_handle)
        self._state = "stopped"

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
        the abort file stays. The next start recovers."""
        self._state = "killed"
        self.refusal = "store was killed"
        for s in self._services:
            s.stop()
        self.segments.stop()

    def __enter__(self) -> "MessageStore":
        return self.start() if self._state == "new" else self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # Topics --------------------------------------------------------------------------
    def create_topic(self, name: str, queue_count: int | None = None) -> None:
        with self._put_lock:
            t = self.topics.create(name, queue_count or self.config.default_queue_count)
            for qid in range(t.queue_count):
                if t.queues[qid] is None:
                    self._bind_queue(t, qid)

    def topic_names(self) -> list[str]:
        return sorted(self.topics.topics)

    def queue_count(self, topic: str) -> int:
        t = self.topics.get(topic)
        return t.queue_count if t else 0

    # Write path -----------------------------------------------------------------------
    def write_refusal(self) -> str | None:
        """Why puts are refused right now, or None."""
        why = self.refusal or self.dispatcher.error or self.disk.refusal
        if why is not None and self.archive is not None and self.disk.refusal is not None:
            n = self.archive.unarchived_count(self.segments.segments)
            if n:
                why += (f"; {n} sealed segment(s) wait for the archive (archive_before_delete, "
                        f"on_unarchived_full=refuse): run `tidemq archive`")
        return why

    def put(self, msg: Message) -> PutResult:
        return self.put_batch([msg])[0]

    def put_batch(self, msgs: Sequence[Message]) -> list[PutResult]:
        """Put many messages with one lock, one append pass and one flush wait.
        Returns one PutResult per message, in order."""
        n = len(msgs)
        refusal = self.refusal or self.dispatcher.error or self.disk.refusal
        if refusal:
            refusal = self.write_refusal() or refusal       # with what would lift it
            return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, error=refusal) for _ in range(n)]
        results: list = [None] * n
        now = self.clock.now_ms()
        prepared: list = []
        add = prepared.append
        topics = self.topics.topics
        host = self._store_host
        room = self.commit_log.max_record_size - codec.FIXED_OVERHEAD - codec.RECORD_CRC_TAIL_LEN
        max_body = self._max_body
        for i, m in enumerate(msgs):
            # the common case inline (tags only, bytes body, known topic); the rest in _prepare
            t = topics.get(m.topic)
            body = m.body
            tags = m.tags
            qid = m.queue_id
            if (t is None or type(body) is not bytes or m.keys or m.properties or m.born_host
                    or (tags is not None and type(tags) is not str)
                    or (qid is not None and (type(qid) is not int or not 0 <= qid < t.queue_count))
                    or m.flag or m.sys_flag or m.reconsume_times or m.prepared_transaction_offset
                    or (m.born_timestamp_ms is not None and type(m.born_timestamp_ms) is not int)):
                p = self._prepare(m, i, results, now)
                if p is not None:
                    add(p)
                continue
            enc = t.tag_cache.get(tags)
            if enc is None:
                enc = self._tags_encoding(t, tags)
            pb, th, tcrc = enc
            bl = len(body)
            if pb is None or bl > max_body or bl + len(t.name_bytes) + len(pb) > room:
                p = self._prepare(m, i, results, now)
                if p is not None:
                    add(p)
                continue
            add((i, body, t, pb, qid, m.born_timestamp_ms or now, host, m.flag, m.sys_flag, m.reconsume_times,
                 m.prepared_transaction_offset, crc32(body) & 0x7FFFFFFF, th, None, None, tcrc))
        if not prepared:
            return results
        return self._append_prepared(prepared, results, now)

    def put_encoded(self, topic: str, entries: Sequence[tuple]) -> list[PutResult]:
        """Put messages of one topic whose properties are already encoded: the broker's raw
        send path (broker/send_records.py), which builds them straight from its frame, with
        no Message object and no property dict per message. One PutResult per entry, in
        order, with the same statuses as put_batch.

        Each entry is ``(body, properties, tags_hash, uniq_key, keys)``: ``body`` bytes;
        ``properties`` the record's properties as codec.encode_properties writes them
        (TAGS, KEYS, UNIQ_KEY and the rest), without the record CRC tail, every name and
        value already checked by the caller (codec.check_property_text: the separators
        would otherwise split them); ``tags_hash`` codec.tags_hash of the tags (0: none);
        ``uniq_key`` the UNIQ_KEY value or None; ``keys`` the KEYS values or None (both
        indexed). Queues are picked round-robin. Checked here: the topic (created when
        auto_create_topics), body type and size, properties size, record size."""
        n = len(entries)
        refusal = self.refusal or self.dispatcher.error or self.disk.refusal
        if refusal:
            return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, error=refusal) for _ in range(n)]
        results: list = [None] * n
        t = self.topics.topics.get(topic)
        if t is None:
            if not isinstance(topic, str) or not codec.valid_topic(topic):
                bad = PutResult(PutStatus.MESSAGE_ILLEGAL,
                                error=f"invalid topic name {topic!r}: use 1-127 characters of [%|a-zA-Z0-9_-]")
                return [bad] * n
            if not self.config.auto_create_topics:
                return [PutResult(PutStatus.TOPIC_NOT_FOUND, error=f"topic {topic!r} does not exist")] * n
            t, error = self._create_topic_for_put(topic)
            if t is None:
                return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, error=error)] * n
        now = self.clock.now_ms()
        host = self._store_host
        max_body = self._max_body
        max_props = codec.USER_PROPERTIES_MAX_BYTES
        room = self.commit_log.max_record_size - codec.FIXED_OVERHEAD - codec.RECORD_CRC_TAIL_LEN - len(t.name_bytes)
        tail = codec.RECORD_CRC_TAIL
        mark = codec.RECORD_CRC_MARK
        tail_prefix = t.tail_prefix_crc
        index = self.index is not None
        name = t.name
        prepared: list = []
        add = prepared.append
        for i, (body, props, th, uniq, keys) in enumerate(entries):
            if type(body) is not bytes:
                results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL, error="body must be bytes")
                continue
            bl = len(body)
            pl = len(props)
            if bl > max_body:
                results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL,
                                       error=f"body of {bl} bytes exceeds max_message_size_bytes={max_body}")
                continue
            if pl > max_props:
                results[i] = PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED,
                                       error=f"properties take {pl} bytes, more than {max_props}")
                continue
            if bl + pl > room:
                results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL, error="message does not fit in one segment")
                continue
            pre = tail_prefix.get(pl)
            if pre is None:
                pre = codec.tail_prefix_crc(t.name_bytes, pl + codec.RECORD_CRC_TAIL_LEN)
                if len(tail_prefix) < 1024:
                    tail_prefix[pl] = pre
            ik = None
            if index and (keys or uniq):
                ik = index_keys(name, keys or (), uniq)
            add((i, body, t, props + tail, None, now, host, 0, 0, 0, 0, crc32(body) & 0x7FFFFFFF, th, ik, uniq,
                 crc32(mark, crc32(props, pre))))
        if not prepared:
            return results
        return self._append_prepared(prepared, results, now)

    def _append_prepared(self, prepared: list, results: list, now: int) -> list[PutResult]:
        """The common second half of the puts: append the prepared messages under the put lock,
        dispatch them, wait for the flush (SYNC_FLUSH), fill in ``results``."""
        host = self._store_host
        out: list = []
        units: dict = {}
        index_items: list = []
        failure: AppendError | None = None
        with self._put_lock:
            reason = self.refusal or self.dispatcher.error or self.disk.refusal
            if reason:
                reason = self.write_refusal() or reason
                for p in prepared:
                    results[p[0]] = PutResult(PutStatus.SERVICE_NOT_AVAILABLE, error=reason)
                return results
            last = self.segments.last
            try:
                self.commit_log.append(prepared, now, out, units, index_items)
            except AppendError as e:
                failure = e
            if out:
                self.dispatcher.dispatch_batch(units, index_items, now, out[0][1], self.segments.max_offset)
                end = out[-1][1] + out[-1][2]
            if failure is None:
                self.segment_error = None
                if self.segments.last is not last:
                    # a new segment took its space (segments are preallocated: the usage moves only
                    # here and at deletion): measure now, so a directory that reached the warning
                    # ratio refuses the next put instead of filling up before the next disk check
                    self.disk.refresh()
        status = PutStatus.PUT_OK
        if out and self.group_commit is not None:
            if not self.group_commit.wait_durable(end, self.config.sync_flush_timeout_ms / 1000):
                status = PutStatus.FLUSH_DISK_TIMEOUT
        new = tuple.__new__
        for i, phys, size, qid, qoff, uniq in out:
            results[i] = new(PutResult, (status, phys, qid, qoff, size, now, None, uniq, host))
        if failure is not None and not isinstance(failure.cause, OSError):
            reason = f"message could not be encoded: {failure.cause!r}"
            log.error("%s", reason)
            for p in prepared[len(out):]:
                results[p[0]] = PutResult(PutStatus.MESSAGE_ILLEGAL, error=reason)
            failure = None
        if failure is not None:
            full = getattr(failure.cause, "errno", None) == errno.ENOSPC
            reason = f"{'disk full: ' if full else ''}cannot create a commit-log segment: {failure.cause}"
            self.segment_error = reason
            log.error("%s", reason)
            try:
                self.check_disk()          # the flags follow at once, not at the next check
            except OSError:
                pass
            if full and self.disk.refusal:
                reason = self.disk.refusal  # names the directories and how full they are
            # no room is a refusal like DISK_FULL (clients retry elsewhere); other errors say so
            st = PutStatus.SERVICE_NOT_AVAILABLE if full else PutStatus.CREATE_MAPPED_FILE_FAILED
            for p in prepared[len(out):]:
                results[p[0]] = PutResult(st, error=reason)
        return results

    def _prepare(self, m: Message, i: int, results: list, now: int):
        """Validate and encode one message (the general case); on a bad one, record its
        result and return None. Returns the prepared tuple (see commit_log.Prepared).
        An unknown topic is created (when allowed) only once the message is valid."""
        t = self.topics.topics.get(m.topic)
        if t is None:
            if not isinstance(m.topic, str) or not codec.valid_topic(m.topic):
                results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL,
                                       error=f"invalid topic name {m.topic!r}: use 1-127 characters of [%|a-zA-Z0-9_-]")
                return None
            if not self.config.auto_create_topics:
                results[i] = PutResult(PutStatus.TOPIC_NOT_FOUND, error=f"topic {m.topic!r} does not exist")
                return None
            t = TopicState(m.topic, self.config.default_queue_count)    # provisional, for the checks
        body = m.body
        if type(body) is not bytes:
            if not isinstance(body, (bytes, bytearray, memoryview)):
                results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL, error="body must be bytes")
                return None
            body = bytes(body)
        bl = len(body)
        if bl > self._max_body:
            results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL,
                                   error=f"body of {bl} bytes exceeds max_message_size_bytes={self._max_body}")
            return None
        bad = _bad_numbers(m)
        if bad:
            results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL, error=bad)
            return None
        qid = m.queue_id
        if qid is not None and not (type(qid) is int and 0 <= qid < t.queue_count):
            results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL,
                                   error=f"queue_id {qid} out of range: topic {t.name} has {t.queue_count} queues")
            return None
        tags, keys, props, uniq = m.tags, m.keys, m.properties, None
        if tags is not None and (not isinstance(tags, str) or not codec.check_property_text(tags)):
            results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL, error="tags must be a string without \\x01 or \\x02")
            return None
        pb = self._encode_props(m, results, i)
        if pb is None:
            return None
        if props:
            uniq = props.get(PROP_UNIQ_KEY)
        if codec.record_size(bl, len(t.name_bytes), len(pb)) > self.commit_log.max_record_size:
            results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL, error="message does not fit in one segment")
            return None
        born_host = self._store_host
        if m.born_host:
            try:
                born_host = _host_bytes(m.born_host)
            except (codec.CodecError, ValueError):
                results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL, error=f"born_host {m.born_host!r} is not ipv4:port")
                return None
        if self.topics.topics.get(t.name) is not t:
            t = self._auto_create(m, results, i)
            if t is None:
                return None
        ik = None
        if self.index is not None and (keys or uniq):
            ik = index_keys(t.name, keys, uniq)
        return (i, body, t, pb, qid, m.born_timestamp_ms or now, born_host, m.flag, m.sys_flag, m.reconsume_times,
                m.prepared_transaction_offset, crc32(body) & 0x7FFFFFFF, tags_hash(tags) if tags else 0, ik, uniq,
                codec.tail_crc(t.name_bytes, pb))

    @staticmethod
    def _tags_encoding(t: TopicState, tags: str | None) -> tuple:
        """(properties bytes or None, tags hash, tail CRC) of a tags-only message, cached per topic."""
        pb = _tags_props(tags) if tags else _NO_PROPS
        enc = (pb, tags_hash(tags) if tags else 0, codec.tail_crc(t.name_bytes, pb) if pb is not None else 0)
        if len(t.tag_cache) < 4096:
            t.tag_cache[tags] = enc
        return enc

    def _encode_props(self, m: Message, results: list, i: int) -> bytes | None:
        merged: dict[str, str] = {}
        if m.properties:
            for k, v in m.properties.items():
                if not isinstance(k, str) or not isinstance(v, str) or not k or k == codec.RECORD_CRC_NAME \
                        or not codec.check_property_text(k) or not codec.check_property_text(v):
                    results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL,
                                           error=f"property {k!r} must be a non-empty string without \\x01 / \\x02, "
                                                 f"with a string value")
                    return None
                merged[k] = v
        if m.tags:
            merged[PROP_TAGS] = m.tags
        if m.keys:
            for k in m.keys:
                if not isinstance(k, str) or not k or " " in k or not codec.check_property_text(k):
                    results[i] = PutResult(PutStatus.MESSAGE_ILLEGAL,
                                           error=f"key {k!r} must be a non-empty string without spaces")
                    return None
            merged[PROP_KEYS] = codec.KEY_SEP.join(m.keys)
        pb = codec.encode_properties(merged)
        if len(pb) > codec.USER_PROPERTIES_MAX_BYTES:
            results[i] = PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED,
                                   error=f"properties take {len(pb)} bytes, more than {codec.USER_PROPERTIES_MAX_BYTES}")
            return None
        return pb + codec.RECORD_CRC_TAIL

    def _auto_create(self, m: Message, results: list, i: int) -> TopicState | None:
        t, error = self._create_topic_for_put(m.topic)
        if t is None:
            results[i] = PutResult(PutStatus.SERVICE_NOT_AVAILABLE, error=error)
        return t

    def _create_topic_for_put(self, topic: str) -> tuple[TopicState | None, str | None]:
        """Auto-creation: (the topic, None), or (None, why it could not be saved)."""
        try:
            with self._put_lock:      # created only if still unknown: never grows a topic made meanwhile
                if self.topics.get(topic) is None:
                    t = self.topics.create(topic, self.config.default_queue_count)
                    for qid in range(t.queue_count):
                        self._bind_queue(t, qid)
        except OSError as e:
            return None, f"cannot save topic {topic!r}: {e}"
        return self.topics.get(topic), None

    # Read path ------------------------------------------------------------------------
    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    @property
    def commitlog_min_offset(self) -> int:
        return self.segments.min_offset

    @property
    def commitlog_max_offset(self) -> int:
        return self.segments.max_offset

    def get(self, group: str, topic: str, queue_id: int, offset: int, max_count: int = 32,
            max_bytes: int = 256 * 1024, tags: Iterable[str] | None = None) -> GetResult:
        """Up to max_count messages of one queue from ``offset`` (RocketMQ's getMessage).

        ``tags``: only messages with one of these tags (None or '*': all). The count and
        byte limits are also capped by the in-memory / from-disk pull limits.
        """
        if self.reader is None:
            return GetResult(GetStatus.SERVICE_NOT_AVAILABLE, offset, 0, 0)
        return self.reader.get(group, topic, queue_id, offset, max_count, max_bytes, tags)

    def get_raw(self, topic: str, queue_id: int, offset: int, max_count: int = 4096,
                max_bytes: int = 16 << 20) -> GetResult:
        """Up to max_count records of one queue from ``offset`` as stored bytes (reader.py)."""
        if self.reader is None:
            return GetResult(GetStatus.SERVICE_NOT_AVAILABLE, offset, 0, 0)
        return self.reader.get_raw(topic, queue_id, offset, max_count, max_bytes)

    def get_by_commitlog_offset(self, offset: int, size: int | None = None) -> codec.StoredMessage | None:
        """The message whose record starts at ``offset``, or None."""
        return self.reader.get_by_commitlog_offset(offset, size)

    def query_by_key(self, topic: str, key: str, max_count: int = 32, begin_ms: int = 0,
                     end_ms: int | None = None) -> list[codec.StoredMessage]:
        """Messages of ``topic`` with this key (or unique key) stored within [begin_ms, end_ms], newest first."""
        return self.reader.query_by_key(topic, key, max_count, begin_ms, end_ms)

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after ``timestamp_ms``
        (max offset if none): a binary search on store time."""
        return self.reader.offset_for_timestamp(topic, queue_id, timestamp_ms)

    # Introspection --------------------------------------------------------------------
    def stats(self) -> dict:
        return {
            "state": self._state,
            "commitlog_min_offset": self.segments.min_offset,
            "commitlog_max_offset": self.segments.max_offset,
            "commitlog_flushed_offset": self.commit_log.flushed_offset,
            "segments": len(self.segments),
            "topics": len(self.topics.topics),
            "queues": len(self.queues.all()),
            "dispatched_offset": self.dispatcher.dispatched_offset,
            "write_refusal": self.write_refusal(),
            "fsyncs": (self.group_commit or self.async_flush).fsyncs if (self.group_commit or self.async_flush) else 0,
            "warm": self.warmer.stats() if self.warmer is not None else {"enabled": False},
        }

    def check(self, progress: Callable[[int, int], None] | None = None) -> CheckReport:
        """Walk every segment (magic, lengths, CRC), every consume-queue unit and the index;
        returns what is wrong (nothing, on a healthy store)."""
        return check_store(self, progress)
