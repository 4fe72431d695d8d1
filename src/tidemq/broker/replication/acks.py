"""What a leader knows of its followers: who is connected, what each has confirmed, which of them
are *in sync* (the in-sync set, Kafka's ISR, RocketMQ 5's SyncStateSet); the wait of a SYNC put
for them; the high watermark consumers are served up to.

The store's write path holds one of these as ``StoreWriter.replicas`` (a leader's, both modes):
``refusal()`` before a put (the lease ran out: LEASE_EXPIRED; SYNC and fewer followers in sync
than ``in_sync_replicas_min``: REPLICAS_NOT_ENOUGH, before anything is written), ``appended(end)``
after the append (the senders wake up), ``wait(end, timeout_s)`` before it answers: SYNC, until
*every* follower of the in-sync set confirmed everything before ``end``; REPLICA_LOST when the
set shrank below ``in_sync_replicas_min`` meanwhile, REPLICATION_TIMEOUT after ``timeout_s``;
then, both modes, the lease again (run out: REPLICATION_TIMEOUT, appended and not acknowledged, as
a put not confirmed in time: its resend is never stored twice).

The in-sync set (``isr``: followers; the leader is always in it) is the coordinator's record
(coordinator.py keeps it there) as the waits see it, and never smaller than the record: a member
is removed *here* only after the record dropped it (so no ack goes on without a member that may
still be elected), and added here *before* the record has it (so no ack skips a member that may
be elected). A follower falls out (``laggards``) when it has not been caught up -- had, at some
time, everything the leader had at that time -- for ``lag_time_ms`` (replica_lag_time_max_ms);
one caught up within that time, with at least the high watermark, comes back (``caught_up``; it
joins by ``include_if_caught_up``, which looks again and joins under the lock that moves the high
watermark, so no put is acknowledged between the look and the join without it). A record write that
drops several members drops them here as one step (``update_isr``): a waiting put is judged on the
set before or after it, never on one half-changed.
"Caught up at t": a frame the leader sent at ``t`` reached the leader's end then, and the
follower confirmed it (``sent`` records each frame: what it carried up to, the leader's end).

The high watermark (``hw``): under SYNC, the offset every member of the set has confirmed -- each
follower's confirmation and the leader's own (``leader_durable``: what a fault of the leader cannot
take back, its fsynced end under SYNC_FLUSH, the log's end otherwise, and never past the cut of a
failure of its log in the epoch it leads: node.py) -- never moving back: what
consumers may be served, since no failover can take it back (only set members may be elected), and
no failure of the leader's log either (it cuts at its durable end, log_failure.py, and a leader alone
in the set goes on from there: node.py). Followers serve up to the high watermark their leader told
them, so it must not pass what the leader itself keeps. The leader's own part moves when its group
commit ends, before a put's ``wait``, which looks again. Under ASYNC, the leader's end.

Thread-safe: confirmations arrive on the event loop; the broker's SYNC puts await them there
(``when_confirmed``, broker/puts.py), the store's own waiting puts in their threads (``wait``). Time
comes from the Clock seam.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ...io import Clock
from ...store import PutReason
from .lease import Lease

PENDING_MAX = 4096             # frames remembered per follower until it confirms them (older ones dropped)


@dataclass
class Follower:
    member: str
    endpoint: str = ""
    connected: bool = False
    confirmed: int = 0
    caught_up_at: float = 0.0          # Clock time as of which it last had the leader's whole log
    connected_at: float = 0.0
    frames_sent: int = 0
    bytes_sent: int = 0
    info: dict = field(default_factory=dict)
    pending: deque = field(default_factory=deque)     # (data end, leader end, sent at) of unconfirmed frames
    conn: int = 0                      # its current stream (a stream left over from before counts no more)
    left_isr: int = 0                  # times it was dropped from the in-sync set (flapping shows here)


class ReplicaAcks:
    def __init__(self, sync: bool, min_in_sync: int, timeout_ms: int, lag_time_ms: int,
                 leader_end: Callable[[], int], clock: Clock, lease: Lease | None = None,
                 leader_durable: Callable[[], int] | None = None) -> None:
        self.sync = sync
        self.min_in_sync = min_in_sync
        self.timeout_s = timeout_ms / 1000
        self.lag_time_s = lag_time_ms / 1000
        self._leader_end = leader_end
        self._leader_durable = leader_durable or leader_end     # the leader's own confirmation (module doc)
        self.clock = clock
        self.lease = lease
        self._cv = threading.Condition()
        self.followers: dict[str, Follower] = {}
        self.isr: frozenset[str] = frozenset()
        self._hw = 0
        self._hw_followers = 0             # what every follower of the set confirmed (never moving back)
        self._wakers: list[Callable[[], None]] = []
        self._waits: list[list] = []       # [end, deadline, release] of puts awaited on a loop (when_confirmed)
        self.timeouts = 0                  # SYNC puts answered REPLICATION_TIMEOUT / REPLICA_LOST
        self.refusals = 0                  # SYNC puts refused with REPLICAS_NOT_ENOUGH
        self.lease_refusals = 0            # puts refused or not acknowledged: the lease ran out
        self.isr_changes = 0
        self._conns = 0

    def _now(self) -> float:
        return self.clock.monotonic_s()

    # Followers (the replication stream) --------------------------------------------------
    def connect(self, member: str, endpoint: str, confirmed: int, info: dict | None = None) -> Follower:
        now = self._now()
        with self._cv:
            f = self.followers.get(member) or Follower(member, caught_up_at=now)
            f.endpoint, f.connected, f.confirmed = endpoint, True, confirmed
            f.connected_at = now
            f.info = dict(info or {})
            f.pending.clear()
            self._conns += 1
            f.conn = self._conns
            if confirmed >= self._leader_end():
                f.caught_up_at = now
            self.followers[member] = f
            self._advance_hw()
            self._cv.notify_all()
            self._release()
            return f

    def _current(self, member: str, conn: int) -> Follower | None:
        f = self.followers.get(member)
        return f if f is not None and f.connected and f.conn == conn else None

    def disconnect(self, member: str, conn: int) -> None:
        with self._cv:
            f = self._current(member, conn)
            if f is not None:
                f.connected = False
                f.pending.clear()
            self._cv.notify_all()
            self._release()

    def sent(self, member: str, conn: int, data_end: int, leader_end: int, nbytes: int = 0) -> None:
        """A frame went to ``member`` on stream ``conn``: the log up to ``data_end`` when the leader's
        ended at ``leader_end``."""
        now = self._now()
        with self._cv:
            f = self._current(member, conn)
            if f is None:
                return
            if nbytes:
                f.frames_sent += 1
                f.bytes_sent += nbytes
            if f.pending and f.pending[-1][0] == data_end:       # a heartbeat after a frame to the same end
                if leader_end <= data_end:
                    f.pending[-1] = (data_end, leader_end, now)      # proves a later time, once confirmed
                return
            if len(f.pending) >= PENDING_MAX:
                f.pending.popleft()
            f.pending.append((data_end, leader_end, now))

    def confirm(self, member: str, conn: int, offset: int) -> None:
        now = self._now()
        with self._cv:
            f = self._current(member, conn)
            if f is None:
                return
            hw = self._hw
            if offset > f.confirmed:
                f.confirmed = offset
            while f.pending and f.pending[0][0] <= f.confirmed:
                data_end, leader_end, at = f.pending.popleft()
                if data_end >= leader_end and at > f.caught_up_at:
                    f.caught_up_at = at
            if f.confirmed >= self._leader_end():
                f.caught_up_at = now
            self._advance_hw()
            moved = self._hw != hw
            self._cv.notify_all()
            self._release()
        if moved and self.sync:
            self.appended(0)                   # the senders say the new high watermark

    def forget(self) -> None:
        """No followers any more (the broker stopped leading)."""
        with self._cv:
            self.followers.clear()
            self.isr = frozenset()
            self._hw = self._hw_followers = 0
            self._cv.notify_all()
            self._release()

    def add_waker(self, wake: Callable[[], None]) -> Callable[[], None]:
        """``wake`` is called after every append (a sender's event); returns its remover."""
        with self._cv:
            self._wakers.append(wake)

        def remove() -> None:
            with self._cv:
                if wake in self._wakers:
                    self._wakers.remove(wake)
        return remove

    # The in-sync set --------------------------------------------------------------------------
    def set_isr(self, members: Iterable[str], hw: int = 0) -> None:
        """Leadership begins: the followers the coordinator's record names (each has ``lag_time_ms``
        from now to connect and catch up); ``hw``: the high watermark this member knew."""
        now = self._now()
        with self._cv:
            self.isr = frozenset(members)
            for m in self.isr:
                f = self.followers.setdefault(m, Follower(m))
                f.caught_up_at = max(f.caught_up_at, now)
            self._hw = max(self._hw, hw)
            self._advance_hw()
            self._cv.notify_all()
            self._release()

    def include_if_caught_up(self, member: str) -> bool:
        """``member`` joins the waits if it may (``caught_up``'s test) -- looked at and done under the lock
        that moves the high watermark, so that no put is acknowledged between the look and the join
        without it (every put acknowledged before has it: it has the watermark). Before the
        coordinator's record names it. Whether it joined."""
        now = self._now()
        with self._cv:
            if not self._may_join(member, now, self._hw_now()):
                return False
            self.isr = self.isr | {member}
            self.isr_changes += 1
            self._cv.notify_all()
            self._release()
            return True

    def update_isr(self, include: Iterable[str] = (), exclude: Iterable[str] = ()) -> None:
        """The waits count the set changed as one step (``include`` in, then ``exclude`` out): a waiting
        put is judged on the set before or after, never one half-changed. Include before the
        coordinator's record names a member (unchecked: the record, or a test, says so), exclude after
        the record dropped it."""
        with self._cv:
            old = self.isr
            left = old & set(exclude)
            self.isr = (old | set(include)) - set(exclude)
            if self.isr != old:
                self.isr_changes += 1
            for m in left:
                if m in self.followers:
                    self.followers[m].left_isr += 1
            self._advance_hw()
            self._cv.notify_all()
            self._release()
        if left:
            self.appended(0)                   # the senders say the new high watermark

    def laggards(self) -> list[str]:
        """Followers of the set not caught up for ``lag_time_ms``: to drop from the record."""
        now = self._now()
        with self._cv:
            return sorted(m for m in self.isr if now - self.followers[m].caught_up_at > self.lag_time_s)

    def caught_up(self) -> list[str]:
        """Followers outside the set, connected and caught up within ``lag_time_ms`` (with the high
        watermark, under SYNC): to add to the record (each by ``include_if_caught_up``, which looks again)."""
        now = self._now()
        with self._cv:
            hw = self._hw_now()
            return sorted(m for m in self.followers if self._may_join(m, now, hw))

    def _may_join(self, member: str, now: float, hw: int) -> bool:
        f = self.followers.get(member)
        return (f is not None and member not in self.isr and f.connected and now - f.caught_up_at <= self.lag_time_s
                and (not self.sync or f.confirmed >= hw))

    def _advance_hw(self) -> None:
        if self.isr:
            self._hw_followers = max(self._hw_followers, min(self.followers[m].confirmed for m in self.isr))
        self._hw = self._hw_now()

    def _hw_now(self) -> int:
        """The high watermark as of now (no lock: readers call it on every read): the leader's own part
        is read now, so that its group commit moves it without an event."""
        own = self._leader_durable()
        return max(self._hw, min(self._hw_followers, own) if self.isr else own)

    @property
    def hw(self) -> int:
        """The high watermark (see the module doc)."""
        if not self.sync:
            return self._leader_end()
        hw = self._hw_now()
        if hw != self._hw:                     # kept, so that it never moves back
            with self._cv:
                self._hw = hw = max(self._hw, hw)
        return hw

    # The write path -----------------------------------------------------------------------
    def _lease_refusal(self) -> str | None:
        if self.lease is None:
            return None
        why = self.lease.refusal()
        if why is not None:
            self.lease_refusals += 1
        return why

    def refusal(self) -> tuple[PutReason, str] | None:
        why = self._lease_refusal()
        if why is not None:
            return PutReason.LEASE_EXPIRED, why
        if not self.sync:
            return None
        with self._cv:
            n = len(self.isr)
            if n >= self.min_in_sync:
                return None
            self.refusals += 1
            return PutReason.REPLICAS_NOT_ENOUGH, (
                f"SYNC replication needs {self.min_in_sync} follower(s) in the in-sync set "
                f"(in_sync_replicas_min), it has {n}: {self._who()}")

    def _who(self) -> str:
        if not self.followers:
            return "no follower has connected"
        end = self._leader_end()
        return ", ".join(f"{f.member} {'in sync' if f.member in self.isr else 'not in sync'}, "
                         f"{'connected' if f.connected else 'disconnected'}, {max(0, end - f.confirmed)} bytes behind"
                         for f in sorted(self.followers.values(), key=lambda x: x.member))

    def appended(self, end: int) -> None:
        for wake in list(self._wakers):
            wake()

    def _outcome(self, end: int) -> PutReason | None | bool:
        """None: every follower of the set has ``end``; REPLICA_LOST: the set is too small; False: not yet."""
        if len(self.isr) < self.min_in_sync:
            return PutReason.REPLICA_LOST
        if all(self.followers[m].confirmed >= end for m in self.isr):
            return None
        return False

    def wait(self, end: int, timeout_s: float) -> PutReason | None:
        """None once the put that ended at ``end`` may be acknowledged (see the module doc), else why not."""
        if self.sync:
            deadline = self._now() + timeout_s
            with self._cv:
                hw = self._hw
                self._advance_hw()             # the leader's own part moved (its group commit ended)
                moved = self._hw != hw
                while (r := self._outcome(end)) is False:
                    left = deadline - self._now()
                    if left <= 0:
                        r = PutReason.REPLICATION_TIMEOUT
                        break
                    self._cv.wait(left)
                if r is not None and timeout_s > 0:
                    self.timeouts += 1
            if moved:
                self.appended(0)               # the senders say the new high watermark, readers look again
            if r is not None:
                return r
        if self._lease_refusal() is not None:
            # appended, and not acknowledged: answered as not confirmed in time (so that a resend is
            # never stored twice: it is answered OK once the lease is confirmed again, or goes to the
            # next leader, which finds it by its id if it was copied)
            return PutReason.REPLICATION_TIMEOUT
        return None

    # A SYNC put awaited on an event loop (broker/puts.py): no thread waits --------------------
    def when_confirmed(self, end: int, release: Callable[[], None]) -> list | None:
        """After a SYNC put appended up to ``end`` without waiting (``put_*(..., wait=False)``):
        ``release()`` is called once ``wait(end, 0.0)`` no longer answers "not confirmed in time" for
        a reason that time or a confirmation can change -- every follower of the in-sync set confirmed
        ``end``, the set shrank below ``in_sync_replicas_min`` (REPLICA_LOST), or ``timeout_s`` passed
        by the Clock (``expire``). Called holding this object's lock, from whichever thread saw it
        (the event loop's, for a confirmation): only hand over (``loop.call_soon_threadsafe``). One
        confirmation releases every put it covers. None when that is known already (settle at once:
        ``wait(end, 0.0)`` says the outcome); else a handle for ``expire`` and ``forget_wait``."""
        with self._cv:
            if not self.sync or self._outcome(end) is not False:
                return None
            w = [end, self._now() + self.timeout_s, release]
            self._waits.append(w)
            return w

    def expire(self, handle: list) -> float:
        """Release ``handle``'s put if its time ran out by the Clock; returns the seconds it has left
        (0: released, by this or before)."""
        with self._cv:
            self._release()
            return max(0.0, handle[1] - self._now()) if handle in self._waits else 0.0

    def forget_wait(self, handle: list | None) -> None:
        """``when_confirmed``'s wait given up (its caller went)."""
        if handle is None:
            return
        with self._cv:
            if handle in self._waits:
                self._waits.remove(handle)

    def _release(self) -> None:
        """Under the lock: release the awaited puts whose outcome is known (see when_confirmed)."""
        if not self._waits:
            return
        if len(self.isr) < self.min_in_sync:
            have = -1
            ready, keep = self._waits, []          # REPLICA_LOST: every one is released
        else:
            have = min((self.followers[m].confirmed for m in self.isr), default=None)
            now = self._now()
            ready, keep = [], []
            for w in self._waits:
                (ready if have is None or w[0] <= have or w[1] <= now else keep).append(w)
        self._waits = keep
        for w in ready:
            if have is not None and w[0] > have:
                self.timeouts += 1                 # REPLICA_LOST or REPLICATION_TIMEOUT (as wait() counts)
            w[2]()

    def poke(self) -> None:
        """Waiters look again (a test moved the clock)."""
        with self._cv:
            self._cv.notify_all()
            self._release()

    def describe(self, reason: PutReason) -> str:
        with self._cv:
            who = self._who()
        if reason is PutReason.REPLICA_LOST:
            return (f"appended, but the in-sync set shrank below in_sync_replicas_min={self.min_in_sync} "
                    f"follower(s) before they confirmed it ({who})")
        lapsed = self.lease is not None and not self.lease.valid()
        if lapsed:
            return ("appended, but this leader's lease ran out before the answer: not acknowledged (a new leader "
                    "may not have it; a resend is answered once it is confirmed, here or there)")
        return (f"appended, but not confirmed by every follower of the in-sync set within replication_timeout_ms="
                f"{int(self.timeout_s * 1000)} ({who})")

    # Views --------------------------------------------------------------------------------
    def status(self) -> list[dict]:
        """Per follower: connected, in sync, confirmed offset, lag in bytes and seconds."""
        now = self._now()
        with self._cv:
            end = self._leader_end()
            out = []
            for f in sorted(self.followers.values(), key=lambda x: x.member):
                lag = max(0, end - f.confirmed)
                out.append({"member": f.member, "endpoint": f.endpoint, "connected": f.connected,
                            "in_sync": f.member in self.isr, "confirmed_offset": f.confirmed, "lag_bytes": lag,
                            "lag_seconds": 0.0 if lag == 0 else round(max(0.0, now - f.caught_up_at), 3),
                            "frames_sent": f.frames_sent, "bytes_sent": f.bytes_sent, "left_isr": f.left_isr})
            return out
