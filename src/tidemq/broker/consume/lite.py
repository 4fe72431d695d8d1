"""Lite topics (RIP-83; the clients' LiteSimpleConsumer / LitePushConsumer): which lite topics each
lite consumer subscribes, per consumer group and bind topic, as SyncLiteSubscription says.

A LITE message is a message of its bind topic (a MIXED topic) carrying a lite topic name
(wire.PROP_LITE_TOPIC). A receive by a client of a group that has lite subscriptions on the topic
hands that client only messages of the lite topics it subscribes (select.py): another client's
lite topics wait for it, messages of lite topics no client of the group subscribes (and messages
without a lite topic) are passed over for the group. The subscriptions live in memory: the clients
send them all again every 30 s (COMPLETE_ADD) and after a restart of the broker their next sync
restores them; a client's go when it ends (NotifyClientTermination), or when the broker no longer
hears from it (sessions/clients.py: its Telemetry stream closed, or idle past client_idle_s_max),
so a killed lite consumer does not hold its lite topics' messages (nor its group) forever. A lite consumer's settings
(Telemetry, client type LITE_SIMPLE_CONSUMER / LITE_PUSH_CONSUMER) already make its group lite on
its bind topic, with nothing subscribed: it receives nothing before its first subscribe_lite.

Actions: PARTIAL_ADD adds the names to the client's set, PARTIAL_REMOVE removes them, COMPLETE_ADD
replaces the set, COMPLETE_REMOVE empties it. A set past ``lite_subscriptions_per_client_max`` is
refused whole (LITE_SUBSCRIPTION_QUOTA_EXCEEDED), a name that cannot be a lite topic too
(ILLEGAL_LITE_TOPIC); nothing changes then. A new subscription past ``clients_max`` (10000) in all,
or past ``per_user_max`` (``lite_subscriptions_per_user_max``) of its user (authentication on: the
client id is ``user<TAB>id``, sessions/clients.py), is refused the same way, so one user cannot fill
the table for the others.

The Python client 5.1.2 sends ``subscribe_lite("abc")`` as the set ``["a", "b", "c"]`` (it extends
the repeated field with a string); a PARTIAL_ADD of one-character names from a client whose
``x-mq-language`` is PYTHON is read as the one name they spell (``python_quirk``).
"""

from __future__ import annotations

import time
from typing import Callable

from ...protocol.stubs import Code, pb
from ..sessions.clients import user_of

A = pb.LiteSubscriptionAction


CLIENTS_MAX = 10_000        # (group, bind topic, client) subscriptions kept at most
SWEEP_S = 1.0               # when full, the gone are looked for at most this often (each look: every subscription)


class LiteSubscriptions:
    def __init__(self, per_client_max: int, name_problem: Callable[[str], str | None],
                 alive: Callable[[str], bool] | None = None, clients_max: int = CLIENTS_MAX,
                 now_s: Callable[[], float] = time.monotonic, per_user_max: int | None = None) -> None:
        """``alive(client id)``: whether a client is still there (sessions/clients.py); a client that
        is not is forgotten at the next receive of its group (None: every client is). ``clients_max``:
        the subscriptions kept at most, over every group (each holds up to ``per_client_max`` names): a
        new one past it is refused (LITE_SUBSCRIPTION_QUOTA_EXCEEDED) once the clients that are gone
        are forgotten and it is still past it; the gone are looked for at most every SWEEP_S (``now_s``),
        so refused calls repeated cannot make the broker walk every subscription for each.
        ``per_user_max``: the same bound per user (None: only the one over every group)."""
        self.clients_max = clients_max
        self.per_user_max = clients_max if per_user_max is None else per_user_max
        self._of_user: dict[str, int] = {}      # user -> its subscriptions (authentication on)
        self.now_s = now_s
        self._swept_s: float | None = None
        self.per_client_max = per_client_max
        self.name_problem = name_problem
        self.alive = alive
        # (group, bind topic) -> client id -> its lite topics
        self.subs: dict[tuple[str, str], dict[str, frozenset[str]]] = {}
        self._of: dict[str, int] = {}           # client id -> its subscriptions (entries above)
        self._n = 0                             # the entries above
        # (client id, whether it has any): told as a client gets its first / loses its last, so that
        # the client table never forgets it (sessions/clients.py hold: a client forgotten counts as gone)
        self.on_hold: Callable[[str, bool], None] | None = None

    def holds(self) -> list[str]:
        """The clients with subscriptions."""
        return list(self._of)

    def _put(self, key: tuple[str, str], client: str, names: frozenset[str]) -> None:
        by_client = self.subs.setdefault(key, {})
        if client not in by_client:
            self._n += 1
            user = user_of(client)
            if user:
                self._of_user[user] = self._of_user.get(user, 0) + 1
            n = self._of.get(client, 0)
            self._of[client] = n + 1
            if not n and self.on_hold is not None:
                self.on_hold(client, True)
        by_client[client] = names

    def _drop(self, key: tuple[str, str], client: str) -> None:
        by_client = self.subs.get(key)
        if by_client is None or client not in by_client:
            return
        del by_client[client]
        self._n -= 1
        user = user_of(client)
        if user:
            left = self._of_user.get(user, 1) - 1
            if left:
                self._of_user[user] = left
            else:
                self._of_user.pop(user, None)
        if not by_client:
            del self.subs[key]
        n = self._of.get(client, 1) - 1
        if n:
            self._of[client] = n
        else:
            self._of.pop(client, None)
            if self.on_hold is not None:
                self.on_hold(client, False)

    def sync(self, group: str, topic: str, client: str, action: int, names: list[str],
             python_quirk: bool = False) -> tuple[int, str]:
        """One SyncLiteSubscription: (code, text)."""
        if not client:
            return Code.CLIENT_ID_REQUIRED, "SyncLiteSubscription needs the x-mq-client-id header"
        if python_quirk and action == A.PARTIAL_ADD and 1 < len(names) <= 128 and all(len(n) == 1 for n in names):
            names = ["".join(names)]
        if len(names) > self.per_client_max:
            return (Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED,
                    f"{len(names)} lite topics: at most lite_subscriptions_per_client_max={self.per_client_max}")
        for n in names:
            problem = self.name_problem(n)
            if problem is not None:
                return Code.ILLEGAL_LITE_TOPIC, problem
        key = (group, topic)
        mine = self.subs.get(key, {}).get(client, frozenset())
        if action == A.PARTIAL_ADD:
            new = mine | set(names)
        elif action == A.PARTIAL_REMOVE:
            new = mine - set(names)
        elif action == A.COMPLETE_ADD:
            new = frozenset(names)
        elif action == A.COMPLETE_REMOVE:
            new = frozenset()
        else:
            return Code.BAD_REQUEST, f"unknown lite subscription action {action}"
        if len(new) > self.per_client_max:
            return (Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED,
                    f"{len(new)} lite topics: at most lite_subscriptions_per_client_max={self.per_client_max}")
        by_client = self.subs.get(key)
        if by_client is None or client not in by_client:
            full = self._full(user_of(client))
            if full:
                return Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED, full
        self._put(key, client, frozenset(new))
        return Code.OK, ""

    def _full(self, user: str) -> str:
        """Why one more subscription of ``user``'s client may not be kept ("": it may), the gone ones
        forgotten first when a bound is reached."""
        for swept in (False, True):
            if self._n >= self.clients_max:
                why = f"the broker keeps at most {self.clients_max} lite consumers' subscriptions"
            elif user and self._of_user.get(user, 0) >= self.per_user_max:
                why = (f"user {user!r} has {self.per_user_max} lite consumers' subscriptions: at most "
                       f"lite_subscriptions_per_user_max={self.per_user_max}")
            else:
                return ""
            if swept:
                return why
            now = self.now_s()
            if self.alive is not None and (self._swept_s is None or now - self._swept_s >= SWEEP_S):
                self._swept_s = now
                for key in list(self.subs):
                    for cid in [c for c in self.subs[key] if not self.alive(c)]:
                        self._drop(key, cid)
        return why

    def declare(self, group: str, topics: list[str], client: str) -> None:
        """A lite consumer's settings (Telemetry): its group consumes ``topics`` (its bind topic) as lite
        topics, the client with none subscribed yet (kept if it has some). At most one bind topic."""
        if not client or not group:
            return
        for topic in topics[:1]:
            by_client = self.subs.get((group, topic))
            if (by_client is None or client not in by_client) and self._full(user_of(client)):
                return
            if by_client is None or client not in by_client:
                self._put((group, topic), client, frozenset())

    def sets(self, group: str, topic: str, client: str) -> tuple[frozenset[str], frozenset[str]] | None:
        """(the client's lite topics, every lite topic some client of the group subscribes) when the
        group consumes ``topic`` as lite topics, else None."""
        by_client = self.subs.get((group, topic))
        if not by_client:
            return None
        if self.alive is not None:
            gone = [cid for cid in by_client if cid != client and not self.alive(cid)]
            for cid in gone:                # ended without saying so (killed, its stream closed, idle)
                self._drop((group, topic), cid)
            if not by_client:
                return None
        anyone = frozenset().union(*by_client.values())
        return by_client.get(client, frozenset()), anyone

    def forget(self, client: str) -> None:
        """A client ended: its subscriptions go (a group with none left is no longer lite)."""
        for key in list(self.subs):
            self._drop(key, client)
