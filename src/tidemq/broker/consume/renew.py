"""Auto-renewal of invisible time: what the RocketMQ proxy does for the push consumers.

The official PushConsumer receives with ``auto_renew`` and no invisible duration:
it expects the server to keep its messages invisible while it consumes them (a
listener may take longer than any invisible time), and to give them to someone
else once it is gone. A receive with ``auto_renew`` hands its messages to the
calling client (``x-mq-client-id``): the pop state records the client and the time
renewal ends (received + ``auto_renew_s_max``). Every ``auto_renew_check_interval_ms``:

* client alive (sessions/clients.py) and the invisible time ends within ``auto_renew_ahead_s``:
  invisible until min(now + ``auto_renew_step_s``, renewal end); the receipt handle
  the client holds stays valid (a renewal keeps its seq);
* renewal end reached: no more renewal; the invisible time runs out and the message
  is delivered again (the proxy nacks it instead; the effect is the same);
* client gone (NotifyClientTermination, its Telemetry stream ended, or no heartbeat
  for ``client_idle_s_max``): each message it held is released, visible at once.

An ack, a ChangeInvisibleDuration (the push consumer's nack: its own backoff) or a
forward to the dead-letter queue ends the renewal of a message. Renewals and
releases are pop journal lines (op ``rnw``): after a restart (kill -9 too) the
broker goes on renewing for the clients that come back within ``client_idle_s_max``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from ...config import BrokerConfig
from ...io import Clock
from ..sessions.clients import Clients
from .pop_state import PopState

log = logging.getLogger("tidemq.broker")


class AutoRenew:
    def __init__(self, pop: PopState, clients: Clients, config: BrokerConfig, clock: Clock,
                 on_release: Callable[[], None] = lambda: None) -> None:
        self.pop = pop
        self.clients = clients
        self.clock = clock
        self.on_release = on_release
        self.ahead_ms = int(config.auto_renew_ahead_s * 1000)
        self.step_ms = int(config.auto_renew_step_s * 1000)
        self.max_ms = int(config.auto_renew_s_max * 1000)
        self.interval_s = config.auto_renew_check_interval_ms / 1000

    def tick(self) -> tuple[int, int]:
        """One look at every auto-renewed message: (renewed, released)."""
        now = self.clock.now_ms()
        renewed = released = 0
        for client, owned in list(self.pop.renewing.items()):
            alive = self.clients.alive(client, now)
            if not alive:
                log.info("client %s is gone: its %d auto-renewed message(s) are released", client, len(owned))
            for g, t, q, o in sorted(owned):
                inf = self.pop.state(g, t, q).inflight[o]
                if not alive:
                    self.pop.renew(g, t, q, o, min(now, inf.visible_at_ms), "")
                    released += 1
                elif inf.visible_at_ms - now <= self.ahead_ms:
                    v = min(now + self.step_ms, inf.renew_until_ms)
                    if v > inf.visible_at_ms:
                        self.pop.renew(g, t, q, o, v, client)
                        renewed += 1
                    else:                                   # renewed long enough: runs out as it is
                        self.pop.renew(g, t, q, o, inf.visible_at_ms, "")
                        log.info("message %s:%d:%d of group %s: auto-renewed for %d s, no more", t, q, o, g,
                                 self.max_ms // 1000)
        if released:
            self.on_release()          # waiting receives look again
        return renewed, released

    async def run(self) -> None:
        while True:
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the task must outlive one bad round
                log.exception("auto-renewal round failed")
            await asyncio.sleep(self.interval_s)
