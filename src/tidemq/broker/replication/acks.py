"""What a leader knows of its followers: who is connected, what each has confirmed, how far
behind it is; and the wait of a SYNC put for its followers (RocketMQ's GroupTransferService).

The store's write path holds one of these as ``StoreWriter.replicas`` (a leader's): it asks
``refusal()`` before a put (SYNC: fewer followers in sync than ``in_sync_replicas_min`` refuses
the put before anything is written: SLAVE_NOT_AVAILABLE), calls ``appended(end)`` after the
append (the senders wake up) and ``wait(end, timeout_s)`` before it answers (SYNC: until
``in_sync_replicas_min`` followers confirmed everything before ``end``, else REPLICATION_TIMEOUT,
or REPLICA_LOST when too few are left connected). With ASYNC replication ``wait`` answers at once.

A follower is *in sync* while it is connected and no more than ``in_sync_lag_bytes_max`` behind
the leader's end. Its lag: bytes (the leader's end minus what it confirmed) and seconds (how long
since it last had everything the leader had; 0 while it does).

Thread-safe: confirmations arrive on the event loop, puts wait in the put threads.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from ...store import PutReason


@dataclass
class Follower:
    member: str
    endpoint: str = ""
    connected: bool = False
    confirmed: int = 0
    caught_up_at: float = 0.0          # monotonic time it last had the leader's whole log
    connected_at: float = 0.0
    frames_sent: int = 0
    bytes_sent: int = 0
    info: dict = field(default_factory=dict)


class ReplicaAcks:
    def __init__(self, sync: bool, min_in_sync: int, timeout_ms: int, lag_bytes_max: int,
                 leader_end: Callable[[], int], clock=time.monotonic) -> None:
        self.sync = sync
        self.min_in_sync = min_in_sync
        self.timeout_s = timeout_ms / 1000
        self.lag_bytes_max = lag_bytes_max
        self._leader_end = leader_end
        self._clock = clock
        self._cv = threading.Condition()
        self.followers: dict[str, Follower] = {}
        self._wakers: list[Callable[[], None]] = []
        self.timeouts = 0                  # SYNC puts answered REPLICATION_TIMEOUT / REPLICA_LOST
        self.refusals = 0                  # SYNC puts refused with REPLICAS_NOT_ENOUGH

    # Followers (the replication stream) --------------------------------------------------
    def connect(self, member: str, endpoint: str, confirmed: int, info: dict | None = None) -> Follower:
        with self._cv:
            f = self.followers.get(member) or Follower(member)
            f.endpoint, f.connected, f.confirmed = endpoint, True, confirmed
            f.connected_at = self._clock()
            f.info = dict(info or {})
            if confirmed >= self._leader_end():
                f.caught_up_at = self._clock()
            self.followers[member] = f
            self._cv.notify_all()
            return f

    def disconnect(self, member: str) -> None:
        with self._cv:
            f = self.followers.get(member)
            if f is not None:
                f.connected = False
            self._cv.notify_all()

    def confirm(self, member: str, offset: int) -> None:
        with self._cv:
            f = self.followers.get(member)
            if f is None or not f.connected:
                return
            if offset > f.confirmed:
                f.confirmed = offset
            if f.confirmed >= self._leader_end():
                f.caught_up_at = self._clock()
            self._cv.notify_all()

    def forget(self) -> None:
        """No followers any more (the broker stopped leading)."""
        with self._cv:
            self.followers.clear()
            self._cv.notify_all()

    def add_waker(self, wake: Callable[[], None]) -> Callable[[], None]:
        """``wake`` is called after every append (a sender's event); returns its remover."""
        with self._cv:
            self._wakers.append(wake)

        def remove() -> None:
            with self._cv:
                if wake in self._wakers:
                    self._wakers.remove(wake)
        return remove

    # The write path -----------------------------------------------------------------------
    def in_sync(self, end: int | None = None) -> list[Follower]:
        end = self._leader_end() if end is None else end
        return [f for f in self.followers.values() if f.connected and end - f.confirmed <= self.lag_bytes_max]

    def refusal(self) -> str | None:
        if not self.sync:
            return None
        with self._cv:
            n = len(self.in_sync())
            if n >= self.min_in_sync:
                return None
            self.refusals += 1
            return (f"SYNC replication needs {self.min_in_sync} follower(s) in sync (in_sync_replicas_min), "
                    f"{n} {'is' if n == 1 else 'are'}: {self._who()}")

    def _who(self) -> str:
        if not self.followers:
            return "no follower has connected"
        return ", ".join(f"{f.member} {'connected' if f.connected else 'disconnected'}, "
                         f"{max(0, self._leader_end() - f.confirmed)} bytes behind" for f in self.followers.values())

    def appended(self, end: int) -> None:
        for wake in list(self._wakers):
            wake()

    def _have(self, end: int) -> int:
        return sum(1 for f in self.followers.values() if f.connected and f.confirmed >= end)

    def wait(self, end: int, timeout_s: float) -> PutReason | None:
        """None once ``min_in_sync`` followers confirmed everything before ``end`` (ASYNC: at once);
        else, after ``timeout_s``, REPLICATION_TIMEOUT, or REPLICA_LOST when fewer than that many
        are connected."""
        if not self.sync:
            return None
        deadline = self._clock() + timeout_s
        with self._cv:
            while self._have(end) < self.min_in_sync:
                left = deadline - self._clock()
                if left <= 0:
                    if timeout_s > 0:
                        self.timeouts += 1
                    connected = sum(1 for f in self.followers.values() if f.connected)
                    return PutReason.REPLICA_LOST if connected < self.min_in_sync else PutReason.REPLICATION_TIMEOUT
                self._cv.wait(left)
        return None

    def describe(self, reason: PutReason) -> str:
        with self._cv:
            who = self._who()
        if reason is PutReason.REPLICA_LOST:
            return (f"appended, but fewer than in_sync_replicas_min={self.min_in_sync} follower(s) stayed connected "
                    f"to confirm it ({who})")
        return (f"appended, but not confirmed by {self.min_in_sync} follower(s) within replication_timeout_ms="
                f"{int(self.timeout_s * 1000)} ({who})")

    # Views --------------------------------------------------------------------------------
    def status(self) -> list[dict]:
        """Per follower: connected, in sync, confirmed offset, lag in bytes and seconds."""
        now = self._clock()
        with self._cv:
            end = self._leader_end()
            ins = {f.member for f in self.in_sync(end)}
            out = []
            for f in sorted(self.followers.values(), key=lambda x: x.member):
                lag = max(0, end - f.confirmed)
                out.append({"member": f.member, "endpoint": f.endpoint, "connected": f.connected,
                            "in_sync": f.member in ins, "confirmed_offset": f.confirmed, "lag_bytes": lag,
                            "lag_seconds": 0.0 if lag == 0 else round(now - (f.caught_up_at or f.connected_at), 3),
                            "frames_sent": f.frames_sent, "bytes_sent": f.bytes_sent})
            return out
