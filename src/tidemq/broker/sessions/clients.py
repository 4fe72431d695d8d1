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
10 s).

The table is bounded, and flooding it (heartbeats with fresh client ids: any signed-in user may send
them) costs no live consumer its messages. A client forgotten counts as gone, and a lite consumer
gone has its lite topics' messages passed over for its group (consume/lite.py), so only a client with
**nothing at stake** is ever forgotten: never one with an open Telemetry stream (bounded in number:
protection/streams.py) nor one with lite subscriptions (``hold``, from consume/lite.py, bounded there).
The others are forgotten least recently heard from first, in O(1) each: past
``clients_per_user_max`` clients of one user (authentication on: the id is ``user<TAB>id``), that
user's own; past ``clients_max`` in all, one that is gone already (left, or idle past
``client_idle_s_max``: whoever's), else the oldest of the user holding the most clients when it
holds more than the adding user, else the adding user's own: never the live client of a user holding
fewer (an auto-renewing consumer heard from by heartbeats only is one: forgotten, its messages'
renewal stopped, consume/renew.py). So one user's flood pushes out only its own clients, even once it
filled the table, and the table grows past ``clients_max`` only by clients with something at stake.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ...io import Clock

CLIENTS_MAX = 10_000            # client ids with nothing at stake remembered at most
CLIENTS_PER_USER_MAX = 2_000    # of one user (authentication on)


@dataclass
class _Client:
    heard_ms: int
    streams: int = 0
    left: bool = False
    held: bool = False          # something at stake (lite subscriptions): never forgotten


def user_of(client_id: str) -> str:
    """The user of a client id (``user<TAB>id`` with authentication on; "" without)."""
    user, tab, _ = client_id.partition("\t")
    return user if tab else ""


class Clients:
    def __init__(self, clock: Clock, idle_max_ms: int, clients_max: int = CLIENTS_MAX,
                 clients_per_user_max: int = CLIENTS_PER_USER_MAX) -> None:
        self.clock = clock
        self.idle_max_ms = idle_max_ms
        self.clients_max = clients_max
        self.clients_per_user_max = clients_per_user_max
        self.started_ms = clock.now_ms()
        self._c: dict[str, _Client] = {}
        # the clients that may be forgotten (no stream open, nothing held), least recently heard from
        # first: all of them, and each user's (authentication on)
        self._free: OrderedDict[str, None] = OrderedDict()
        self._free_of: dict[str, OrderedDict[str, None]] = {}
        self._count_of: dict[str, int] = {}         # clients remembered per user
        self.forgotten = 0

    def __len__(self) -> int:
        return len(self._c)

    def _place(self, client_id: str, c: _Client) -> None:
        """Keep the forgettable lists in step with ``c`` (heard from, or changed): one that left goes
        first (it counts as gone already), the others least recently heard from first."""
        user = user_of(client_id)
        if c.streams or c.held:
            self._unfree(client_id, user)
            return
        last = not c.left
        self._free[client_id] = None
        self._free.move_to_end(client_id, last)
        if user:
            mine = self._free_of.setdefault(user, OrderedDict())
            mine[client_id] = None
            mine.move_to_end(client_id, last)

    def _unfree(self, client_id: str, user: str) -> None:
        """Take the client off the forgettable lists."""
        self._free.pop(client_id, None)
        mine = self._free_of.get(user) if user else None
        if mine is not None:
            mine.pop(client_id, None)
            if not mine:
                del self._free_of[user]

    def _forget(self, client_id: str) -> None:
        del self._c[client_id]
        self.forgotten += 1
        user = user_of(client_id)
        self._unfree(client_id, user)
        if user:
            n = self._count_of[user] - 1
            if n:
                self._count_of[user] = n
            else:
                del self._count_of[user]

    def _get(self, client_id: str, keep: bool = False) -> _Client:
        """The client (made when new; ``keep``: it is about to have something at stake, so not
        forgotten to make room for itself). A new client with nothing at stake may be forgotten at
        once, when every other of its user's, or of the table, has something at stake."""
        c = self._c.get(client_id)
        if c is not None:
            return c
        c = self._c[client_id] = _Client(self.clock.now_ms())
        user = user_of(client_id)
        if user:
            self._count_of[user] = self._count_of.get(user, 0) + 1
        if not keep:
            self._place(client_id, c)
        if user:
            while self._count_of.get(user, 0) > self.clients_per_user_max and user in self._free_of:
                self._forget(next(iter(self._free_of[user])))       # the user's own, oldest first
        while len(self._c) > self.clients_max:
            victim = self._victim(user)
            if victim is None:
                break
            self._forget(victim)
        return c

    def _victim(self, user: str) -> str | None:
        """Who is forgotten when the table is past ``clients_max`` and ``user`` adds a client: a client
        that is gone already, whoever's (it left, or was idle past client_idle_s_max: forgetting it
        changes no answer of ``alive``); else the oldest with nothing at stake of the user holding
        more clients than ``user`` the most, or of ``user`` itself (the new one when it has no other):
        never the live client of a user holding fewer than the one adding (before, the oldest of
        anyone's went: a user within its own bound pushed out other users' live clients, and their
        auto-renewed messages were handed out again). None: nobody (the table
        grows by clients with something at stake, bounded where they are). Without authentication
        every client is one user's (""): the oldest goes."""
        oldest = next(iter(self._free), None)
        if oldest is None:
            return None
        c = self._c[oldest]
        if not user or c.left or self.clock.now_ms() - c.heard_ms > self.idle_max_ms:
            return oldest
        # the user holding the most clients pays (a user that filled the table within its own bound
        # made it full: another's new client then forgot that user's own live consumer)
        most = max(self._free_of, key=lambda u: self._count_of.get(u, 0), default=user)
        if self._count_of.get(most, 0) > self._count_of.get(user, 0):
            user = most
        mine = self._free_of.get(user)
        return next(iter(mine)) if mine else None

    # Events -----------------------------------------------------------------------------
    def seen(self, client_id: str) -> None:
        """A heartbeat or a receive."""
        if client_id:
            c = self._get(client_id)
            c.heard_ms = self.clock.now_ms()
            c.left = False
            if client_id in self._c:
                self._place(client_id, c)

    def stream_opened(self, client_id: str) -> None:
        if client_id:
            c = self._get(client_id, keep=True)
            c.streams += 1
            c.heard_ms = self.clock.now_ms()
            c.left = False
            self._place(client_id, c)

    def stream_closed(self, client_id: str) -> None:
        c = self._c.get(client_id)
        if c is not None and c.streams > 0:
            c.streams -= 1
            if not c.streams:
                c.left = True
                self._place(client_id, c)

    def hold(self, client_id: str, held: bool) -> None:
        """Whether the client has something at stake (lite subscriptions: consume/lite.py): a client
        held is never forgotten."""
        c = self._c.get(client_id)
        if c is None:
            if not held or not client_id:
                return
            c = self._get(client_id, keep=True)
        c.held = held
        self._place(client_id, c)

    def terminated(self, client_id: str) -> None:
        """NotifyClientTermination."""
        if client_id:
            c = self._get(client_id)
            c.left = True
            if client_id in self._c:
                self._place(client_id, c)       # first to be forgotten

    # Question ---------------------------------------------------------------------------
    def alive(self, client_id: str, now_ms: int) -> bool:
        c = self._c.get(client_id)
        if c is None:
            return now_ms - self.started_ms <= self.idle_max_ms
        if c.left:
            return False
        return c.streams > 0 or now_ms - c.heard_ms <= self.idle_max_ms
