"""Several broker groups, one cluster: a topic's queues spread over groups, kept in the coordinator.

Under the coordinator's chroot::

    /topics/<topic>      persistent: {"queues": N, "owners": {group: [queue ids]}}
    /groups/<group>/...  each group's own nodes (coordinator.py): its members, leader, epoch, ISR

``Topology`` reads them (at the group's coordinator step after a change: its reads leave watches on
the topics, the groups, each other group's members and leader, and a watch that fires wakes the
step, as the group's own members are read; not on a timer) and makes the topics this group owns a
part of local (an ``apply_topic`` action for the node; one that could not be made is tried again
every ``RETRY_S``); it answers routes (per group holding a topic, its view and queue ids) and the
whole cluster's view. Works over any ``Coordinator`` (coordination.py).
"""

from __future__ import annotations

import json

from .coord_signed import RecordRefused
from .coordination import Coordinator

RETRY_S = 1.0           # a topic this group owns that could not be made local is tried again this often


def load_json(c: Coordinator, path: str, watch: bool = False):
    """A node's JSON, or None (gone, not JSON, or refused: not signed by a member, coord_signed.py);
    ``watch``: a change of it (or its making) wakes the step."""
    try:
        got = c.get(path, watch=watch)
    except RecordRefused:
        return None
    if got is None:
        return None
    try:
        return json.loads(got.data)
    except ValueError:
        return None


class Topology:
    def __init__(self, c: Coordinator, base: str, node) -> None:
        self.c = c
        self.base = base
        self.node = node
        self.topics: dict[str, dict] = {}        # topic -> {"queues", "owners": {group: [queue ids]}}
        self.groups: dict[str, dict] = {}        # group -> {"leader", "members"}: other groups, for routes
        self._applied: dict[str, tuple] = {}     # topic -> (queues, owned) made local
        self._due = True                         # read at the first step, then after each change (``changed``)
        self._pending: set[str] = set()          # topics handed out to make local, not made yet
        self._retry_s = 0.0

    def changed(self) -> None:
        """A watch fired, or the session changed (the group coordinator's wake-up): read again."""
        self._due = True

    def due(self, now_s: float) -> bool:
        return self._due or (bool(self._pending) and now_s >= self._retry_s)

    def sync(self, now_s: float) -> list[tuple[str, int, tuple[int, ...]]]:
        """Read the cluster's topics and the other groups (leaving watches on them); the topics to
        make local (name, queues, owned). Unreachable: read again at the next step."""
        self._due = False                        # (a change from now on makes it due again)
        try:
            topics = self.read_topics(watch=True)
            mine = self.node.group
            groups = {g: self._route_view(g) for g in self.c.children(f"{self.base}/groups", watch=True)
                      if g != mine}
        except Exception:
            self._due = True
            raise
        self.topics, self.groups = topics, groups
        for t in [t for t in self._applied if t not in topics]:    # forgotten: made again if spread again
            del self._applied[t]
        out = []
        for t, doc in topics.items():
            owned = tuple(doc.get("owners", {}).get(mine, ()))
            want = (int(doc.get("queues", 0)), owned)
            if owned and self._applied.get(t) != want:
                out.append((t, want[0], owned))
        self._pending = {t for t, _, _ in out}
        self._retry_s = now_s + RETRY_S
        return out

    def applied(self, topic: str, queues: int, owned: tuple[int, ...]) -> None:
        self._applied[topic] = (queues, owned)
        self._pending.discard(topic)

    def _route_view(self, g: str) -> dict:
        """Another group as routes name it: its leader's endpoint and its members' (watched: a member
        that comes or goes, a new leader, wakes the step)."""
        gp = f"{self.base}/groups/{g}"
        members = {}
        for m in self.c.children(f"{gp}/members", watch=True):
            d = load_json(self.c, f"{gp}/members/{m}")
            if isinstance(d, dict):
                members[m] = {"endpoint": d.get("endpoint", ""), "leader_endpoint": d.get("leader_endpoint", "")}
        leader = load_json(self.c, f"{gp}/leader", watch=True)
        return {"group": g, "leader": leader.get("endpoint", "") if isinstance(leader, dict) else "",
                "members": members}

    def create_topic(self, name: str, queues: int, groups: list[str]) -> dict:
        """Spread ``name``'s ``queues`` over ``groups`` (queue q to groups[q % len]); made local by each
        group's members at their next step (the topics' watch). ValueError when it would move or shrink queues."""
        owners = {g: [q for q in range(queues) if q % len(groups) == i] for i, g in enumerate(groups)}
        doc = {"queues": queues, "owners": owners}
        path = f"{self.base}/topics/{name}"
        raw = json.dumps(doc).encode()
        if not self.c.create(path, raw):
            old = load_json(self.c, path) or {}
            if old.get("queues", 0) > queues or any(set(old.get("owners", {}).get(g, [])) - set(owners.get(g, []))
                                                    for g in old.get("owners", {})):
                raise ValueError(f"topic {name!r} is spread already ({old}); its queues cannot move or shrink")
            self.c.set(path, raw)
        self.topics[name] = doc
        self._due = True
        return doc

    def delete_topic(self, name: str) -> bool:
        """Forget a spread topic's entry (`topic delete` once every owning group deleted its part);
        False when there was none."""
        if not self.c.delete(f"{self.base}/topics/{name}"):
            return False
        self.topics.pop(name, None)
        self._applied.pop(name, None)
        return True

    def read_topics(self, watch: bool = False) -> dict[str, dict]:
        out = {}
        for t in self.c.children(f"{self.base}/topics", watch=watch):
            d = load_json(self.c, f"{self.base}/topics/{t}", watch=watch)
            if isinstance(d, dict):
                out[t] = d
        return out

    def route(self, topic: str) -> list[tuple[dict, list[int]]] | None:
        """(group view, its queue ids) per group holding ``topic``, when the topic is spread over the
        cluster; None otherwise (a topic of this group alone)."""
        doc = self.topics.get(topic)
        if doc is None:
            return None
        out = []
        for g, qids in sorted(doc.get("owners", {}).items()):
            view = self.node.view() if g == self.node.group else self.groups.get(g)
            if view is not None and qids:
                out.append((view, list(qids)))
        return out

    def cluster(self, coordinator: str) -> dict:
        """Every group (members, leader, epoch, ISR) and every topic's queue owners."""
        groups = {g: self.group(g) for g in self.c.children(f"{self.base}/groups")}
        return {"coordinator": coordinator, "groups": groups, "topics": self.read_topics()}

    def group(self, g: str) -> dict:
        """A group as the coordinator has it: {"leader", "epoch", "members", "isr"}."""
        gp = f"{self.base}/groups/{g}"
        members = {}
        for m in self.c.children(f"{gp}/members"):
            d = load_json(self.c, f"{gp}/members/{m}")
            if d is not None:
                members[m] = d
        epoch = load_json(self.c, f"{gp}/epoch")
        return {"leader": load_json(self.c, f"{gp}/leader"), "epoch": int(epoch or 0), "members": members,
                "isr": load_json(self.c, f"{gp}/isr")}
