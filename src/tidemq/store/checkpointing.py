"""Checkpoint rounds: what the checkpoint claims, and when it must claim less.

A round (``CheckpointRounds.write``: the queue flush service's, every start's, a clean stop's)
fsyncs the consume queues and the index, then writes the checkpoint (checkpoint.py) from the
offsets dispatched before that flush, and now and then the queue summary (heal.py). Two things make
it claim less than it could: a follower's cut (``below``, replica.py: the checkpoint never claims
the stretch being cut) and a failed fsync of the consume queues or the index (``derived_failed``:
from then on it never claims them flushed past what it claimed before, for the rest of the run).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from . import heal
from .checkpoint import Checkpoint
from .commit_log import CommitLog
from .consume_queue import ConsumeQueueTable
from .disk import DiskMonitor
from .dispatch import HEAL_STEP_RECORDS, Dispatcher
from .index_file import IndexService
from .put_lock import PutLock
from .segment_queue import SegmentQueue

log = logging.getLogger("tidemq.store")


class CheckpointRounds:
    def __init__(self, checkpoint: Checkpoint, queue_summary: heal.QueueSummary, segments: SegmentQueue,
                 commit_log: CommitLog, queues: ConsumeQueueTable, index: IndexService | None,
                 dispatcher: Dispatcher, disk: DiskMonitor, put_lock: PutLock, monotonic_s: Callable[[], float],
                 consumequeue_path: str, index_path: str) -> None:
        self.checkpoint, self.queue_summary = checkpoint, queue_summary
        self.segments, self.commit_log, self.queues, self.index = segments, commit_log, queues, index
        self.dispatcher, self.disk, self._put_lock, self.monotonic_s = dispatcher, disk, put_lock, monotonic_s
        self.consumequeue_path, self.index_path = consumequeue_path, index_path
        self.summary_due_s = 0.0           # when the checkpoint next remembers the queues' ends (heal.py)
        # a consume-queue or index fsync failed in this run: (logics offset, index offset) the checkpoint
        # claimed before; it never claims more in this run (their pages may be lost: rebuilt from the log)
        self.derived_frozen: tuple[int, int] | None = None
        self.derived_flushed_to = 0        # every unit and index entry of a record before it was fsynced
        self._cut_lock = threading.Lock()     # a follower's cut against a checkpoint round (below)
        self._cutting, self._cuts = False, 0

    def below(self, end: int | None) -> None:
        """The checkpoint claims nothing at or past ``end`` (a follower's cut, replica.py: written
        before the cut, so that the next start never takes the cut stretch for acknowledged data);
        ``None``: the cut is done (the offsets a checkpoint is written from are below it now). A
        checkpoint round that read its offsets before or during a cut writes nothing."""
        with self._cut_lock:
            if end is None:
                self._cutting = False
                return
            self._cutting = True
            self._cuts += 1
            st = self.checkpoint.state
            if max(st.physic_offset, st.logics_offset, st.index_offset) > end:
                self.checkpoint.update(physic_offset=min(st.physic_offset, end),
                                       logics_offset=min(st.logics_offset, end), index_offset=min(st.index_offset, end))
                self.checkpoint.flush()

    def write(self, summary: bool = False) -> None:
        """One round: fsync the consume queues and the index, write the checkpoint (``summary``: and
        the queue summary, which is otherwise saved at most every heal.SUMMARY_INTERVAL_S)."""
        cuts = self._cuts
        d = self.dispatcher
        dispatched, ts = d.dispatched_offset, d.last_store_timestamp_ms
        if d.pending_from is not None:
            dispatched = min(dispatched, d.pending_from)
        now = self.monotonic_s()
        summary = (summary or now >= self.summary_due_s) and self.derived_frozen is None
        # before the flush: what it makes durable; every record before ``dispatched`` is in it
        ends = heal.snapshot(self.queues, dispatched) if summary else None
        flushed = True
        for part, where, what in ((self.queues, self.consumequeue_path, "consume-queue"),
                                  (self.index, self.index_path, "index")):
            if part is None:
                continue
            try:
                part.flush()
            except OSError as e:
                flushed = False
                self.derived_failed(where, what, e)
        if flushed:
            self.derived_flushed_to = dispatched     # what a failed fsync of them could cover starts here
        logics = index = dispatched
        if self.derived_frozen is not None:
            logics, index = min(logics, self.derived_frozen[0]), min(index, self.derived_frozen[1])
        last = self.segments.last
        with self._cut_lock:
            if self._cutting or self._cuts != cuts:
                return                   # a follower's cut (replica.py) began meanwhile: the next round
            self.checkpoint.update(physic_offset=self.commit_log.flushed_offset,
                                   physic_timestamp_ms=last.last_store_timestamp_ms if last else 0,
                                   logics_offset=logics, logics_timestamp_ms=ts,
                                   index_offset=index, index_timestamp_ms=ts)
            self.checkpoint.flush()
        if ends is not None:
            self.queue_summary.save(ends)
            self.summary_due_s = now + heal.SUMMARY_INTERVAL_S

    def derived_failed(self, where: str, what: str, e: OSError) -> None:
        """A consume-queue or index fsync failed: final for what it covered, as for the log
        (log_failure.py), but they are derived from the log, so it degrades, never loses: the
        checkpoint never again claims them flushed past what it claimed before (recovery re-dispatches
        from there at the next start), the queue summary is no longer saved, and their units and entries
        are checked against the log now (the kernel may have dropped the pages: what a reader would
        find there is rewritten from the log). Between the failed fsync and that check, a reader in
        another thread may find a dropped unit (as a hole) in this run."""
        first = self.derived_frozen is None
        if first:
            cp = self.checkpoint.state
            self.derived_frozen = (cp.logics_offset, cp.index_offset)
        log.error("%s fsync failed in %s: %s; the checkpoint no longer claims %s data flushed past commit-log "
                  "offset %d in this run (rebuilt from the log)", what, where, e, what, self.derived_frozen[0])
        self.disk.mark_failed(where, f"{what} fsync failed: {e}; rebuilt from the commit log (checked at once and "
                                     f"at the next start)")
        # what the failed fsync covered: everything dispatched since the last flush that succeeded;
        # checked in steps under the put lock, free between them (as Dispatcher.heal), up to the log's
        # end as it is now (what comes after is dispatched after the failure: a later one covers it)
        pos = max(self.segments.min_offset, self.derived_flushed_to)
        end = self.segments.max_offset
        while pos < end:
            with self._put_lock:
                try:
                    rep = self.dispatcher.redispatch(self.commit_log, pos, index_from=pos,
                                                     records_max=HEAL_STEP_RECORDS)
                except OSError as again:
                    self.dispatcher.fail(pos, again)        # puts refused until the queue flush heals it
                    return
            if rep.complete or rep.end_offset <= pos:
                break
            pos = rep.end_offset
