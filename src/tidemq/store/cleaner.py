"""Cleanup services: commit-log segments first, then the derived files behind them.

CommitLogCleaner (RocketMQ's CleanCommitLogService), one round every
clean_resource_interval_ms. A round deletes when it is time (an hour in
delete_when), when space is short (a directory above disk_used_space_percent_max),
or by hand (``trigger_manual()`` forces the next manual_delete_rounds rounds).
It deletes expired segments (older than file_reserved_time_hours), or any
segment when every writable directory is above disk_space_clean_forcibly_percent
(clean immediately). Always from the head, never the active segment, never from
the middle, at most delete_file_batch_max a round, delete_commit_log_files_interval_ms
apart. A segment still held by a reader is retried next round and destroyed
forcibly after destroy_mapped_file_interval_forcibly_ms. With archive_before_delete,
``archive`` (store/archive.ArchiveGuard) holds back segments the archive job has not
copied out; at the disk's warning level, on_unarchived_full="delete" deletes them anyway
and records the gap.

When space is short and nothing could be deleted, the round says why (nothing
expired, held by a reader, only the active segment left, not archived, unconsumed) in
``last``; RocketMQ only logs "disk space will be full soon, but delete file failed".

Space policy (topics.SpacePolicy, backlog.py): before an unexpired segment is deleted for space,
``backlog`` says whether it holds messages of a topic with space_policy=refuse that a subscribed
group has not consumed; then it stays, the round is not freed (UNCONSUMED) and ``hold`` is set:
the write path refuses puts with it (PutReason.UNCONSUMED_BACKLOG) until a round finds space no
longer short or the segment free to go. Whatever a deletion took that subscribed groups had not
consumed (space_policy=evict, or expired) is reported per group (``account``): at WARNING, in the
round (``groups_lost``) and in ``evicted_by_group``.

QueueCleaner: consume-queue files whose units all lie before the commit log's
first offset, and index files wholly before it, are deleted; every queue's
minimum offset is corrected so a get below it answers OFFSET_TOO_SMALL.

The first offset the queues follow is the log's first offset *in service*
(``CleanRound.log_min_offset``): a head segment a reader held when it was deleted is out
of service at once (DELETING: no read may hold it again; its file's name is removed then, the
reader reading on through its mapping: no stop of the process can bring it back) but stays in the
log's list until its reader releases it and a later round finishes it. Its records are gone for readers from the
round that took it out, so the queues' minimum moves past it in that round, and what it
took is reported (``lost``) then; a minimum left at its records would send a consumer
starting there MESSAGE_WAS_REMOVING until the next round.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, field
from typing import Callable

from ..config import StoreConfig
from ..io import Clock
from .consume_queue import UNIT, ConsumeQueueTable
from .archive import ArchiveGuard
from .backlog import BacklogGuard, GroupLoss, Hold
from .disk import DiskMonitor
from .index_file import IndexService
from .mapped_file import MappedFile
from .recovery import correct_min_offset
from .segment_queue import SegmentQueue
from .segment_state import SegmentState
from .topic_retention import TopicRetention

log = logging.getLogger("tidemq.store")


class NotFreed(str, enum.Enum):
    """Why a round that should have deleted (or deleted more) did not."""
    NOTHING_EXPIRED = "nothing-expired"
    HELD_BY_READER = "held-by-reader"
    ACTIVE_ONLY = "active-only"
    NOT_ARCHIVED = "not-archived"
    DELETE_FAILED = "delete-failed"
    UNCONSUMED = "unconsumed"          # space_policy=refuse: subscribed groups have not consumed it


class DeleteReason(str, enum.Enum):
    """Why a segment was deleted: it expired, or space was short enough to delete it unexpired."""
    EXPIRED = "expired"
    SPACE = "space"


@dataclass
class LostRange:
    """Messages of one queue that a cleanup took away: queue offsets [first, end)."""
    topic: str
    queue_id: int
    first: int
    end: int

    def as_dict(self) -> dict:
        return {"topic": self.topic, "queue_id": self.queue_id, "first": self.first, "end": self.end}


@dataclass
class CleanRound:
    at_ms: int = 0
    triggers: list[str] = field(default_factory=list)    # time | space | manual
    clean_immediately: bool = False
    deleted: list[str] = field(default_factory=list)
    deleted_bytes: int = 0
    reasons: list[DeleteReason] = field(default_factory=list)   # one per deleted segment
    why_not: str | None = None                            # space short but nothing deleted: why
    why_not_code: NotFreed | None = None
    # the log's first offset in service after the round (min_offset_in_service): what the queues follow
    log_min_offset: int = 0
    out_of_service: list[str] = field(default_factory=list)   # head segments left DELETING: held by readers
    lost: list[LostRange] = field(default_factory=list)   # filled behind the log by QueueCleaner
    groups_lost: list[GroupLoss] = field(default_factory=list)   # what of ``lost`` groups had not consumed
    hold: Hold | None = None                              # space_policy=refuse kept a segment: writes refused

    def not_freed(self, code: NotFreed, text: str) -> None:
        self.why_not_code, self.why_not = code, text

    def as_dict(self) -> dict:
        return {"at_ms": self.at_ms, "triggers": self.triggers, "clean_immediately": self.clean_immediately,
                "deleted": self.deleted, "deleted_bytes": self.deleted_bytes,
                "out_of_service": self.out_of_service, "log_min_offset": self.log_min_offset,
                "reasons": [r.value for r in self.reasons], "why_not": self.why_not,
                "why_not_code": self.why_not_code.value if self.why_not_code else None,
                "lost": [r.as_dict() for r in self.lost],
                "groups_lost": [g.as_dict() for g in self.groups_lost],
                "hold": self.hold.text if self.hold is not None else None}


LOST_RANGES_LOGGED = 20


def log_deletion(rnd: CleanRound) -> None:
    """A deletion is news an operator must see: at WARNING, with the messages it took."""
    ranges = [f"{r.topic}/{r.queue_id} {r.first}..{r.end - 1}" for r in rnd.lost]
    more = len(ranges) - LOST_RANGES_LOGGED
    reasons = sorted({r.value for r in rnd.reasons})
    pending = (f", {len(rnd.out_of_service)} more out of service (held by readers: deleted after their release)"
               if rnd.out_of_service else "")
    log.warning("cleanup deleted %d commit-log segment(s), %.1f MiB%s (%strigger %s%s); messages gone: %s%s",
                len(rnd.deleted), rnd.deleted_bytes / 2**20, pending, "+".join(reasons) + "; " if reasons else "",
                "+".join(rnd.triggers),
                ", clean immediately" if rnd.clean_immediately else "",
                ", ".join(ranges[:LOST_RANGES_LOGGED]) or "none (no queue lost a unit)",
                f" and {more} more queue(s)" if more > 0 else "")
    if rnd.groups_lost:
        words = [f"{g.words()} ({g.messages})" for g in rnd.groups_lost]
        more = len(words) - LOST_RANGES_LOGGED
        log.warning("consumer groups lost messages they had not consumed (space_policy=evict or expired): %s%s",
                    ", ".join(words[:LOST_RANGES_LOGGED]), f" and {more} more" if more > 0 else "")


class CommitLogCleaner:
    def __init__(self, config: StoreConfig, segments: SegmentQueue, disk: DiskMonitor, clock: Clock,
                 archive: ArchiveGuard | None = None,
                 on_deleted: Callable[[MappedFile], None] | None = None,
                 backlog: BacklogGuard | None = None, retention: TopicRetention | None = None) -> None:
        """``backlog``: the space policy's guard and the per-group loss report (None: neither);
        ``retention``: the topics' own retention (topic_retention.py; None: the store's alone)."""
        self.config = config
        self.retention = retention
        self.segments = segments
        self.disk = disk
        self.clock = clock
        self.archive = archive
        self.on_deleted = on_deleted
        self.hours = config.delete_hours()
        self.manual_rounds = 0
        self.deleted_bytes_total = 0
        self.deleted_segments: dict[DeleteReason, int] = {r: 0 for r in DeleteReason}
        self.not_freed_rounds: dict[NotFreed, int] = {r: 0 for r in NotFreed}  # space short, not freed
        self.last = CleanRound()
        self.last_deleted = CleanRound()     # the last round that deleted something: it stays visible
        self._short: NotFreed | None = None  # logged on change, not every round
        self.backlog = backlog
        self.hold: Hold | None = None        # set by a round that kept a segment for space_policy=refuse
        self.evicted_by_group: dict[tuple[str, str], int] = {}   # (group, topic) -> messages lost since start

    def reconfigure(self, config: StoreConfig) -> None:
        """Retention, delete_when, the batch and pauses changed at run time: from the next round on."""
        self.hours = config.delete_hours()
        self.config = config

    def trigger_manual(self) -> None:
        """RocketMQ's `deleteExpiredCommitLog`: the next rounds delete expired segments now."""
        self.manual_rounds = self.config.manual_delete_rounds

    def is_time(self, now_ms: int) -> bool:
        return time.localtime(now_ms / 1000).tm_hour in self.hours

    def min_offset_in_service(self) -> int:
        """The log's first offset a read can be served from (SegmentQueue.min_offset: the start of its
        first segment not out of service; head segments DELETING wait there for their readers)."""
        return self.segments.min_offset

    def _end_round(self, rnd: CleanRound) -> CleanRound:
        rnd.log_min_offset = self.min_offset_in_service()
        rnd.out_of_service = [mf.path for mf in list(self.segments.segments)
                              if mf.state is SegmentState.DELETING and mf.start_offset < rnd.log_min_offset]
        return rnd

    def _finish_pending(self, rnd: CleanRound, now: int, force: bool = True) -> None:
        """A head segment a reader held when it was deleted is out of service: finish its
        deletion whatever triggers this round has (else it would stay in the log unreadable).
        ``force`` False: never one still held, whatever destroy_mapped_file_interval_forcibly_ms says."""
        while len(self.segments.segments) > 1 and self.segments.segments[0].state is SegmentState.DELETING:
            mf = self.segments.segments[0]
            if not self._destroy(rnd, mf, now, force=force):
                break

    def finish_pending(self, now: int) -> CleanRound:
        """Finish the head segments out of service that no reader holds any more (the store's shutdown,
        once its services stopped). Their names went when they left service (MappedFile.destroy), so
        one still held is not loaded again by the next start either; this counts them deleted."""
        rnd = CleanRound(at_ms=now)
        self._finish_pending(rnd, now, force=False)
        return self._end_round(rnd)

    def _destroy(self, rnd: CleanRound, mf: MappedFile, now: int,
                 reason: DeleteReason = DeleteReason.EXPIRED, force: bool = True) -> bool:
        """Delete the head segment; False (and why_not set) if it must wait."""
        cfg = self.config
        size = mf.size
        try:
            gone = mf.destroy(now, cfg.destroy_mapped_file_interval_forcibly_ms if force else 1 << 62)
        except OSError as e:
            if not self.disk.is_offline(mf.directory):
                rnd.not_freed(NotFreed.DELETE_FAILED, f"cannot delete segment {mf.path}: {e}; retried next round")
                return False
            # its directory is offline (read-only, failing): the log goes on without the
            # segment, the file stays there; retrying would stop all cleanup for good
            log.warning("segment %s is out of the log but its file could not be deleted from offline "
                        "directory %s: %s; remove it before the directory is used again", mf.path,
                        mf.directory, e)
            gone = True
        if not gone:
            rnd.not_freed(NotFreed.HELD_BY_READER, f"segment {mf.path} is held by {mf.refs} reader(s); "
                                                   f"retried next round")
            return False
        self.segments.remove_head(mf)
        try:
            # durable before the next deletion: a power loss never brings back one head segment
            # without the ones before it (the log would have a hole)
            self.segments.fio.fsync_dir(mf.directory)
        except OSError:
            pass
        rnd.deleted.append(mf.path)
        rnd.reasons.append(reason)
        rnd.deleted_bytes += size
        self.deleted_bytes_total += size
        self.deleted_segments[reason] += 1
        if self.on_deleted is not None:
            self.on_deleted(mf)
        return True

    def run_round(self) -> CleanRound:
        now = self.clock.now_ms()
        rnd = CleanRound(at_ms=now)
        self._finish_pending(rnd, now)
        space, forcibly, over = self.disk.space_pressure()
        if self.is_time(now):
            rnd.triggers.append("time")
        if space:
            rnd.triggers.append("space")
        if self.manual_rounds > 0:
            self.manual_rounds -= 1
            rnd.triggers.append("manual")
        if not rnd.triggers:
            self._say_space(False, rnd, over)
            self.last = rnd
            self.hold = None
            return self._end_round(rnd)
        rnd.clean_immediately = forcibly
        self._delete(rnd, now)
        self._say_space(space, rnd, over)
        self.last = rnd
        self.hold = rnd.hold
        if rnd.deleted:
            self.last_deleted = rnd
        return self._end_round(rnd)

    def _say_space(self, space: bool, rnd: CleanRound, over: list[str]) -> None:
        """Log a change of state (space short and why nothing could be freed, space no longer
        short), not every round: the state itself is in `tidemq disk` and the metrics."""
        short = rnd.why_not_code if space and not rnd.deleted else None
        if short is not None:
            self.not_freed_rounds[short] += 1
        if short is self._short:
            return
        if short is not None:
            log.warning("space is short (%s) but no segment could be deleted: %s (said again when this changes)",
                        ", ".join(over), rnd.why_not)
        elif self._short is not None:
            log.warning("space is no longer blocked: %s", "segments deleted" if rnd.deleted else "usage fell")
        self._short = short

    def _delete(self, rnd: CleanRound, now: int) -> None:
        cfg = self.config
        reserved_ms = cfg.file_reserved_time_hours * 3_600_000
        for mf in list(self.segments.segments[:-1]):        # never the active (last) segment
            if len(rnd.deleted) >= cfg.delete_file_batch_max:
                break
            expired = now >= mf.last_store_timestamp_ms + reserved_ms
            held_by = None
            if self.retention is not None and self.retention.topics.with_settings():
                # the topics' own retention: the segment goes when every topic in it allows it
                held_by = self.retention.holds(mf.start_offset + mf.size, mf.last_store_timestamp_ms, now, expired)
                expired = held_by is None
            if not expired and not rnd.clean_immediately:
                if rnd.why_not is None:
                    whose = (f"topic {held_by}'s retention keeps it (its own retention_hours / retention_bytes, "
                             f"or the store's file_reserved_time_hours="
                             f"{cfg.file_reserved_time_hours:g})") if held_by not in (None, "store") else \
                        f"file_reserved_time_hours={cfg.file_reserved_time_hours:g}"
                    rnd.not_freed(NotFreed.NOTHING_EXPIRED,
                                  f"nothing expired: the oldest segment {mf.path} is "
                                  f"{(now - mf.last_store_timestamp_ms) / 3_600_000:.1f} h old, {whose}")
                break
            if not expired and self.backlog is not None:
                hold = self.backlog.hold(mf)
                if hold is not None:
                    rnd.hold = hold
                    rnd.not_freed(NotFreed.UNCONSUMED, hold.text)
                    break
            if self.archive is not None and not self.archive.archived(mf):
                if self.archive.on_unarchived_full != "delete" or self.disk.refusal is None:
                    rnd.not_freed(NotFreed.NOT_ARCHIVED, f"segment {mf.path} is not archived yet "
                                                         f"(archive_before_delete): run `tidemq archive`")
                    break
                self.archive.record_gap(mf, now, f"disk at the warning level: {self.disk.refusal}")
            if not self._destroy(rnd, mf, now, DeleteReason.EXPIRED if expired else DeleteReason.SPACE):
                break
            if cfg.delete_commit_log_files_interval_ms:
                self.clock.sleep(cfg.delete_commit_log_files_interval_ms / 1000)
        else:
            if not rnd.deleted:
                rnd.not_freed(NotFreed.ACTIVE_ONLY, "only the active segment is left")

    def account(self, rnd: CleanRound) -> None:
        """After QueueCleaner filled ``rnd.lost``: which subscribed groups lost what (counted)."""
        if self.backlog is None or not rnd.lost:
            return
        rnd.groups_lost = self.backlog.losses(rnd.lost)
        for g in rnd.groups_lost:
            key = (g.group, g.topic)
            self.evicted_by_group[key] = self.evicted_by_group.get(key, 0) + g.messages


class QueueCleaner:
    def __init__(self, queues: ConsumeQueueTable, index: IndexService | None) -> None:
        self.queues = queues
        self.index = index
        self.deleted_files = 0
        self.log_min_offset = 0          # what the last round followed: the queues lie at or after it

    def behind(self, rnd: CleanRound) -> bool:
        """Whether the queues must follow the log after ``rnd``: it deleted segments, or took one out
        of service (its first offset in service moved past what the queues last followed)."""
        return bool(rnd.deleted) or rnd.log_min_offset > self.log_min_offset

    def run_round(self, log_min_offset: int, lost: list[LostRange] | None = None) -> int:
        """Delete consume-queue and index files wholly before the log; correct minimum offsets.
        Each queue whose minimum moved is added to ``lost`` with the offsets that went."""
        n = 0
        for cq in self.queues.all():
            before = cq.min_offset
            starts = cq.file_starts()
            for start in starts[:-1]:          # the newest file of a queue stays: it takes appends
                raw = cq.read(start + cq.units_per_segment - 1, 1)
                if not raw:
                    break
                last_off, _size, _ = UNIT.unpack(raw)
                if last_off >= log_min_offset:
                    break
                cq.delete_file(start)
                n += 1
            correct_min_offset(cq, log_min_offset)
            if lost is not None and cq.min_offset > before:
                lost.append(LostRange(cq.topic, cq.queue_id, before, cq.min_offset))
        if self.index is not None:
            n += self.index.delete_before(log_min_offset)
        self.deleted_files += n
        self.log_min_offset = max(self.log_min_offset, log_min_offset)
        return n
