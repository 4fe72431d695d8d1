"""The store's replication calls (MessageStore's part for replica.py and epochs.py): following and
leading, whether puts wait and what a put's acknowledgement needs (confirm), and the commit log's
failures a leader steps down on (log_failure.py)."""

from __future__ import annotations

from typing import Callable

from .log_failure import LogFailure
from .types import PutReason


class StoreRoles:
    """MessageStore's replication calls (a part of its class: store.py builds what they use)."""

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
