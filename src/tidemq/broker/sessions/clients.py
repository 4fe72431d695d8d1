"""Which clients are alive, by ``x-mq-client-id`` (what auto-renewal asks: consume/renew.py).

A client is *alive* while one of its Telemetry streams is open, or while it sent a
heartbeat or a receive in the last ``client_idle_s_max`` (the official clients
heartbeat every 10 s). It *leaves* at once when it says NotifyClientTermination or
when its last Telemetry stream ends (the stream lives as long as the client: it
ends when the process does), unless it is heard from again after that: a later
heartbeat, receive or stream makes it alive again.

After a broker restart nothing is known: a client is given ``client_idle_s_max``
from the start to be heard from (a Python client's Telemetry stream only comes
back minutes after a restart, docs/broker-protocol.md P10; its heartbeats within
10 s). At most ``clients_max`` (CLIENTS_MAX) clients are remembered; the least recently heard
from without an open stream are forgotten first (then treated as unknown).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ...io import Clock

CLIENTS_MAX = 10_000        # client ids remembered at most


@dataclass
class _Client:
    heard_ms: int
    streams: int = 0
    left: bool = False


class Clients:
    def __init__(self, clock: Clock, idle_max_ms: int, clients_max: int = CLIENTS_MAX) -> None:
        self.clock = clock
        self.idle_max_ms = idle_max_ms
        self.clients_max = clients_max
        self.started_ms = clock.now_ms()
        self._c: OrderedDict[str, _Client] = OrderedDict()

    def _get(self, client_id: str) -> _Client:
        c = self._c.get(client_id)
        if c is None:
            c = self._c[client_id] = _Client(self.clock.now_ms())
            if len(self._c) > self.clients_max:
                for cid in [k for k, v in self._c.items() if not v.streams][:len(self._c) - self.clients_max]:
                    del self._c[cid]
        else:
            self._c.move_to_end(client_id)
        return c

    # Events -----------------------------------------------------------------------------
    def seen(self, client_id: str) -> None:
        """A heartbeat or a receive."""
        if client_id:
            c = self._get(client_id)
            c.heard_ms = self.clock.now_ms()
            c.left = False

    def stream_opened(self, client_id: str) -> None:
        if client_id:
            c = self._get(client_id)
            c.streams += 1
            c.heard_ms = self.clock.now_ms()
            c.left = False

    def stream_closed(self, client_id: str) -> None:
        c = self._c.get(client_id)
        if c is not None and c.streams > 0:
            c.streams -= 1
            if not c.streams:
                c.left = True

    def terminated(self, client_id: str) -> None:
        """NotifyClientTermination."""
        if client_id:
            self._get(client_id).left = True

    # Question ---------------------------------------------------------------------------
    def alive(self, client_id: str, now_ms: int) -> bool:
        c = self._c.get(client_id)
        if c is None:
            return now_ms - self.started_ms <= self.idle_max_ms
        if c.left:
            return False
        return c.streams > 0 or now_ms - c.heard_ms <= self.idle_max_ms
