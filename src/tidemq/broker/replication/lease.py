"""A leader's lease: the time until which it may acknowledge writes, by its own clock.

The coordinator's session is the real lease: the service expires it ``T`` (the session timeout)
after it last heard from the leader, and only then can another member be elected. A request the
leader sent at ``t`` and saw answered proves the service heard from it at ``t`` or later, so no
other member can lead before ``t + T``. The leader acknowledges writes until ``t + ratio * T``
(``leader_lease_ratio`` < 1: the margin covers the two clocks' rates differing and the time a
write takes between its check and its answer), where ``t`` is when it sent the last request that
confirmed it still holds the leader node in its current session (coordinator.py renews at every
step). Every write checks it (acks.py: before the append, and again before the answer): a leader
stopped (SIGSTOP), cut off, or slow to renew acknowledges nothing once its lease ran out, ASYNC
replication too, and a paused leader that wakes up acknowledges nothing before it has confirmed
its epoch again.

Read on the Clock seam (tidemq.io); ``monotonic_s`` goes on while a process is stopped.
"""

from __future__ import annotations

import threading

from ...io import Clock


class Lease:
    def __init__(self, clock: Clock, ratio: float, timeout_s: float) -> None:
        self.clock = clock
        self.ratio = ratio
        self.timeout_s = timeout_s
        self.timeout_s_asked = timeout_s
        self.until_s = 0.0              # monotonic seconds; 0: not held
        self.renewals = 0
        self.expirations = 0            # writes refused because it ran out (a view)
        self._lock = threading.Lock()

    @property
    def span_s(self) -> float:
        return self.ratio * self.timeout_s

    def session_granted(self, timeout_s: float) -> None:
        """The coordinator granted a session of ``timeout_s`` (possibly less than asked): the lease
        is a fraction of the smaller, and one held now is cut to it."""
        with self._lock:
            self.timeout_s = min(self.timeout_s_asked, timeout_s)
            if self.until_s:
                self.until_s = min(self.until_s, self.clock.monotonic_s() + self.span_s)

    def renew(self, sent_at_s: float) -> None:
        """A request sent at ``sent_at_s`` confirmed the lease (never moves it back)."""
        with self._lock:
            self.until_s = max(self.until_s, sent_at_s + self.span_s)
            self.renewals += 1

    def revoke(self) -> None:
        with self._lock:
            self.until_s = 0.0

    def valid(self) -> bool:
        return self.clock.monotonic_s() < self.until_s

    def left_s(self) -> float:
        return max(0.0, self.until_s - self.clock.monotonic_s())

    def refusal(self) -> str | None:
        """Why this leader may not acknowledge a write now, or None."""
        now = self.clock.monotonic_s()
        if now < self.until_s:
            return None
        self.expirations += 1
        if not self.until_s:
            return "this leader holds no lease: it has not confirmed its epoch with the coordinator"
        return (f"this leader's lease ran out {now - self.until_s:.3f} s ago (not renewed with the coordinator "
                f"within leader_lease_ratio={self.ratio:g} of the {self.timeout_s:g} s session): another member "
                f"may lead now")

    def status(self) -> dict:
        return {"valid": self.valid(), "left_s": round(self.left_s(), 3), "span_s": round(self.span_s, 3),
                "renewals": self.renewals, "expirations": self.expirations}
