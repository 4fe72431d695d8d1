"""A coordination service in one process (ZooKeeper's model), for tests and the simulation: the
``Coordinator`` seam (tidemq/broker/replication/coordination.py) without a ZooKeeper.

    service = MemoryCoordinatorService(clock)          # the "ZooKeeper"
    c = service.client("m1", timeout_s=1.5)            # one member's session (a Coordinator)
    c.start()
    service.cut("m1")                                  # m1 cannot reach the service any more
    clock.advance(2.0); service.tick()                 # its session expires: its ephemeral nodes go

Sessions expire on the Clock seam: ``timeout_s`` after the service last heard from the client
(any request, or ``ping()``: kazoo's heartbeats, which the simulation sends while the member
runs). A cut client's requests raise ``Unreachable`` and it goes SUSPENDED (it cannot tell
whether its session lives); back in reach after its session expired, its next request learns it:
LOST (the request raises ``Unreachable``), then a new session is made at once (a new
``session_id``, CONNECTED), as kazoo does. Nodes, versions, ephemeral owners, compare-and-set and
transactions behave as ZooKeeper's; watches are one-shot and wake the client that set them (and
every client wakes on its own session's state changes).

Timing, as ZooKeeper's (both off by default: a session expires as soon as it is due, a watch wakes
its client at once): ``tick_s``, the server's tickTime: its session tracker expires sessions in
buckets, so a session goes at the first multiple of ``tick_s`` at or after its deadline (up to one
tick late); ``deliver``, how a watch's notification reaches its client (called with the client's
``wake``): the simulation delays it on its loop, as the notification crosses the network.

Not modelled: a slow request (every request is answered at once or raises); the lag of a
ZooKeeper follower server behind its leader (reads here are always current).
"""

from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

from ..broker.replication.coordination import Check, Create, NodeStat, Op, SessionState, SetData, Unreachable
from ..io import Clock


@dataclass
class _Node:
    data: bytes
    version: int
    owner: int


@dataclass
class _Session:
    sid: int
    timeout_s: float
    last_heard_s: float
    alive: bool = True


class MemoryCoordinatorService:
    def __init__(self, clock: Clock, tick_s: float = 0.0,
                 deliver: Callable[[Callable[[], None]], None] | None = None) -> None:
        self.clock = clock
        self.tick_s = tick_s              # ZooKeeper's tickTime: sessions expire in buckets of it (0: at once)
        self.deliver = deliver            # delivers a watch's notification (None: at once)
        self.nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0)}
        self.sessions: dict[int, _Session] = {}
        self._cut: set[str] = set()
        self._ids = itertools.count(0x1000)
        # path -> the clients watching it, in the order they asked (a dict as an ordered set: a set of
        # clients iterates in the order of their addresses, which differs from run to run, and the
        # order they are woken in is the order their members act in: a seed would not replay)
        self._watches: dict[str, dict["MemoryCoordinator", None]] = {}
        self._lock = threading.RLock()
        self.expired = 0                  # sessions expired (a view for tests)
        self.on_expire: Callable[[int], None] | None = None

    def client(self, name: str, timeout_s: float) -> "MemoryCoordinator":
        return MemoryCoordinator(self, name, timeout_s)

    # the network ------------------------------------------------------------------------------
    def cut(self, name: str) -> None:
        """``name``'s client cannot reach the service (a partition), until ``heal``."""
        with self._lock:
            self._cut.add(name)

    def heal(self, name: str) -> None:
        with self._lock:
            self._cut.discard(name)

    def reachable(self, name: str) -> bool:
        return name not in self._cut

    # sessions ---------------------------------------------------------------------------------
    def open_session(self, timeout_s: float) -> int:
        with self._lock:
            sid = next(self._ids)
            self.sessions[sid] = _Session(sid, timeout_s, self.clock.monotonic_s())
            return sid

    def tick(self) -> list[int]:
        """Expire every session not heard from for its timeout (ZooKeeper's session tracker); the
        sessions expired."""
        now = self.clock.monotonic_s()
        with self._lock:
            due = [s for s in self.sessions.values() if s.alive and now >= self._expires_s(s)]
            for s in due:
                self._expire(s)
            return [s.sid for s in due]

    def _expires_s(self, s: _Session) -> float:
        """When the session tracker expires ``s``: its deadline, rounded up to the next tick (its bucket)."""
        due = s.last_heard_s + s.timeout_s
        if self.tick_s <= 0:
            return due
        return math.ceil(due / self.tick_s - 1e-9) * self.tick_s

    def close_session(self, sid: int) -> None:
        with self._lock:
            s = self.sessions.get(sid)
            if s is not None and s.alive:
                self._expire(s)

    def _expire(self, s: _Session) -> None:
        s.alive = False
        self.expired += 1
        for path in sorted((p for p, n in self.nodes.items() if n.owner == s.sid), reverse=True):
            del self.nodes[path]
            self._changed(path)
        if self.on_expire is not None:
            self.on_expire(s.sid)

    def alive(self, sid: int) -> bool:
        s = self.sessions.get(sid)
        return s is not None and s.alive

    def heard(self, sid: int) -> None:
        with self._lock:
            s = self.sessions.get(sid)
            if s is not None and s.alive:
                s.last_heard_s = self.clock.monotonic_s()

    # watches ----------------------------------------------------------------------------------
    def watch(self, path: str, client: "MemoryCoordinator") -> None:
        self._watches.setdefault(path, {})[client] = None

    def _changed(self, path: str) -> None:
        woken: dict[MemoryCoordinator, None] = {}
        for p in (path, _parent(path)):
            woken.update(self._watches.pop(p, {}))
        for c in woken:
            if self.deliver is None:
                c.wake()
            else:
                self.deliver(c.wake)

    # nodes ------------------------------------------------------------------------------------
    def _check(self, op: Op, sid: int) -> bool:
        if isinstance(op, Check):
            n = self.nodes.get(op.path)
            return n is not None and n.version == op.version
        if isinstance(op, Create):
            return op.path not in self.nodes and _parent(op.path) in self.nodes
        if isinstance(op, SetData):
            n = self.nodes.get(op.path)
            return n is not None and (op.version is None or n.version == op.version)
        raise TypeError(f"not a transaction operation: {op!r}")

    def _apply(self, op: Op, sid: int) -> None:
        if isinstance(op, Create):
            self.nodes[op.path] = _Node(bytes(op.data), 0, sid if op.ephemeral else 0)
            self._changed(op.path)
        elif isinstance(op, SetData):
            n = self.nodes[op.path]
            n.data, n.version = bytes(op.data), n.version + 1
            self._changed(op.path)

    def transaction(self, ops: Sequence[Op], sid: int) -> bool:
        with self._lock:
            if not all(self._check(op, sid) for op in ops):
                return False
            for op in ops:
                self._apply(op, sid)
            return True

    def get(self, path: str) -> NodeStat | None:
        n = self.nodes.get(path)
        return None if n is None else NodeStat(n.data, n.version, n.owner)

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix):] for p in self.nodes if p.startswith(prefix) and "/" not in p[len(prefix):]})

    def delete(self, path: str, version: int | None) -> bool:
        with self._lock:
            n = self.nodes.get(path)
            if n is None or (version is not None and n.version != version) or self.children(path):
                return False
            del self.nodes[path]
            self._changed(path)
            return True

    def ensure_path(self, path: str) -> None:
        with self._lock:
            parts = [p for p in path.split("/") if p]
            for i in range(1, len(parts) + 1):
                p = "/" + "/".join(parts[:i])
                if p not in self.nodes:
                    self.nodes[p] = _Node(b"", 0, 0)
                    self._changed(p)


def _parent(path: str) -> str:
    head = path.rstrip("/").rpartition("/")[0]
    return head or "/"


class MemoryCoordinator:
    """One member's client of a MemoryCoordinatorService (a ``Coordinator``)."""

    def __init__(self, service: MemoryCoordinatorService, name: str, timeout_s: float) -> None:
        self.service = service
        self.name = name
        self._timeout_s = timeout_s
        self._sid = 0
        self._state = SessionState.SUSPENDED
        self._wake: Callable[[], None] = lambda: None
        self.stopped = False
        self.sessions = 0                 # sessions made (the first, and one per expiry seen)

    @property
    def state(self) -> SessionState:
        if self._state is not SessionState.CONNECTED and not self.stopped and self.service.reachable(self.name):
            self.ping()                     # kazoo reconnects in the background: the state follows the link
        return self._state

    @property
    def session_id(self) -> int:
        return self._sid

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    def set_waker(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def wake(self) -> None:
        self._wake()

    def _set_state(self, state: SessionState) -> None:
        if state is not self._state:
            self._state = state
            self._wake()

    def start(self) -> None:
        """Connect (a first session), or, cut off, stay SUSPENDED until the service is in reach."""
        self.stopped = False
        self._sid = 0
        if self.service.reachable(self.name):
            self._new_session()
        else:
            self._set_state(SessionState.SUSPENDED)

    def _new_session(self) -> None:
        self._sid = self.service.open_session(self._timeout_s)
        self.sessions += 1
        self._set_state(SessionState.CONNECTED)

    def stop(self) -> None:
        """Close the session (a clean stop): its ephemeral nodes go at once."""
        if not self.stopped and self.service.reachable(self.name):
            self.service.close_session(self._sid)
        self.stopped = True

    def abandon(self) -> None:
        """The process died (kill -9): the session is not closed; it expires on the service."""
        self.stopped = True

    def _request(self) -> None:
        """Reach the service (Unreachable when cut off, or when the session expired meanwhile)."""
        if self.stopped:
            raise Unreachable("the client is stopped")
        svc = self.service
        if not svc.reachable(self.name):
            self._set_state(SessionState.SUSPENDED)
            raise Unreachable(f"{self.name} cannot reach the coordinator")
        svc.tick()
        if not self._sid:
            self._new_session()                 # the first connection
        elif not svc.alive(self._sid):
            self._set_state(SessionState.LOST)
            self._new_session()                 # kazoo makes a new session at once
            raise Unreachable("the session expired")
        svc.heard(self._sid)
        self._set_state(SessionState.CONNECTED)

    def ping(self) -> bool:
        """A heartbeat (kazoo's ping): True when it reached the service."""
        try:
            self._request()
            return True
        except Unreachable:
            return False

    # the seam ---------------------------------------------------------------------------------
    def ensure_path(self, path: str) -> None:
        self._request()
        self.service.ensure_path(path)

    def get(self, path: str, watch: bool = False) -> NodeStat | None:
        self._request()
        if watch:
            self.service.watch(path, self)
        return self.service.get(path)

    def children(self, path: str, watch: bool = False) -> list[str]:
        self._request()
        if watch:
            self.service.watch(path, self)
        return self.service.children(path)

    def create(self, path: str, data: bytes, ephemeral: bool = False) -> bool:
        self._request()
        if not ephemeral:
            self.service.ensure_path(_parent(path))
        return self.service.transaction([Create(path, data, ephemeral)], self._sid)

    def set(self, path: str, data: bytes, version: int | None = None) -> bool:
        self._request()
        return self.service.transaction([SetData(path, data, version)], self._sid)

    def delete(self, path: str, version: int | None = None) -> bool:
        self._request()
        return self.service.delete(path, version)

    def transaction(self, ops: Sequence[Op]) -> bool:
        self._request()
        return self.service.transaction(ops, self._sid)
