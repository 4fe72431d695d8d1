"""Flow control of sends: what stands between a SendMessage and the store.

A send passes two gates; receives, pulls and acks pass none, so consumers
drain the backlog while producers wait.

1. Its connection (the gRPC peer): at most inflight_requests_per_connection_max
   sends and inflight_bytes_per_connection_max body bytes in flight per
   connection. Beyond that it is refused at once with TOO_MANY_REQUESTS. A lone
   request bigger than the byte bound passes when nothing else of its
   connection is in flight (it was already accepted by the gRPC size limit).
2. The broker: a raised resource alarm (alarms.py), or a flush backlog above
   flush_backlog_high_bytes. The store dispatches to consume queues and index
   inline in the put path (store/dispatch.py), so dispatch cannot lag; what can
   lag is the flush: under ASYNC_FLUSH the bytes appended but not yet fsynced
   are dirty pages that grow as fast as producers send. That is the backlog
   measured here (under SYNC_FLUSH every put waits for its fsync, so it stays
   small by itself). While blocked, a send is held, re-checked every
   HOLD_POLL_S, for at most send_hold_ms_max and never past its deadline minus
   DEADLINE_MARGIN_S (a client whose deadline passes retries; one that is
   answered TOO_MANY_REQUESTS backs off). Still blocked then, it is refused
   with TOO_MANY_REQUESTS and the reason, with numbers.

Time comes from a Clock and waiting from an awaitable ``sleep``: tests give fakes.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from ...io import Clock
from .alarms import ResourceAlarms, human

HOLD_POLL_S = 0.025
DEADLINE_MARGIN_S = 0.25


class SendGate:
    def __init__(self, alarms: ResourceAlarms | None, backlog_bytes: Callable[[], int], backlog_high_bytes: int,
                 hold_max_s: float, inflight_requests_max: int, inflight_bytes_max: int, clock: Clock,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.alarms = alarms
        self.backlog_bytes = backlog_bytes
        self.backlog_high_bytes = backlog_high_bytes
        self.hold_max_s = hold_max_s
        self.inflight_requests_max = inflight_requests_max
        self.inflight_bytes_max = inflight_bytes_max
        self.clock = clock
        self.sleep = sleep
        self._peers: dict[str, list[int]] = {}    # peer -> [requests, bytes] in flight
        self.held_total = 0
        self.refused_total = 0

    # 1. per connection ------------------------------------------------------------------
    def enter(self, peer: str, nbytes: int) -> str | None:
        """Count a send in; the refusal when its connection is at its bound (then nothing is counted)."""
        c = self._peers.get(peer)
        if c is None:
            self._peers[peer] = [1, nbytes]
            return None
        if c[0] >= self.inflight_requests_max:
            self.refused_total += 1
            return (f"too many requests in flight on this connection: {c[0]} >= "
                    f"inflight_requests_per_connection_max {self.inflight_requests_max}")
        if c[0] > 0 and c[1] + nbytes > self.inflight_bytes_max:
            self.refused_total += 1
            return (f"too many bytes in flight on this connection: {human(c[1])} + {human(nbytes)} > "
                    f"inflight_bytes_per_connection_max {human(self.inflight_bytes_max)}")
        c[0] += 1
        c[1] += nbytes
        return None

    def leave(self, peer: str, nbytes: int) -> None:
        c = self._peers[peer]
        c[0] -= 1
        c[1] -= nbytes
        if c[0] == 0:
            del self._peers[peer]

    # 2. the broker ----------------------------------------------------------------------
    def blocked(self) -> str | None:
        """Why sends must wait now (None: they need not)."""
        if self.alarms is not None and self.alarms.refusal is not None:
            return self.alarms.refusal
        b = self.backlog_bytes()
        if b > self.backlog_high_bytes:
            return (f"flush backlog: {human(b)} written but not yet flushed > flush_backlog_high_bytes "
                    f"{human(self.backlog_high_bytes)}")
        return None

    async def hold(self, time_remaining_s: float | None) -> str | None:
        """Wait while blocked, within the hold time and the deadline; the refusal if still blocked."""
        reason = self.blocked()
        if reason is None:
            return None
        self.held_total += 1
        start = self.clock.monotonic_s()
        budget = self.hold_max_s
        if time_remaining_s is not None:
            budget = min(budget, time_remaining_s - DEADLINE_MARGIN_S)
        end = start + max(0.0, budget)
        while True:
            now = self.clock.monotonic_s()
            if now >= end:
                break
            await self.sleep(min(HOLD_POLL_S, end - now))
            reason = self.blocked()
            if reason is None:
                return None
        self.refused_total += 1
        return f"{reason} (send held {self.clock.monotonic_s() - start:.2f} s, then refused)"

    def status(self) -> dict:
        counts = [tuple(c) for c in list(self._peers.values())]    # one copy (the admin asks from a thread)
        return {"flush_backlog_bytes": self.backlog_bytes(), "flush_backlog_high_bytes": self.backlog_high_bytes,
                "connections_sending": len(counts),
                "inflight_requests": sum(c[0] for c in counts),
                "inflight_bytes": sum(c[1] for c in counts),
                "held_total": self.held_total, "refused_total": self.refused_total}
