"""The coordinator seam (coordination.py) on a real ZooKeeper, through kazoo.

``ZkCoordinator(hosts, timeout_s)``: one KazooClient, one session. kazoo keeps the session alive
(its pings) and, when ZooKeeper says the session expired (LOST), makes a new one by itself;
``session_id`` is then another. kazoo's states map to ours: CONNECTED, SUSPENDED (the connection
is lost, the session may live on), LOST. Requests raise ``Unreachable`` when kazoo cannot make
them (connection lost, session expired, timed out); compare-and-set losses answer False.

The session timeout: ZooKeeper grants one within its own ``minSessionTimeout`` /
``maxSessionTimeout`` (2 and 20 ticks by default), which may be less than asked. The connect
answer says which (zk_address.watch_granted_timeout reads it, logged once per change);
``timeout_s`` is the smaller of the two and listeners (``on_granted``) hear of every grant, so a
leader's lease (lease.py: a fraction of the timeout) never outlives a session the server expires
sooner than asked.

The setting's address (tidemq.config.coordinator): ``[digest:USER@]HOST:PORT,...[/chroot]``, the password in
``coordinator_password``.
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

from ...config import coordinator as coordinator_address
from . import zk_address
from .coordination import Check, Create, NodeStat, Op, SessionState, SetData, Unreachable

log = logging.getLogger("tidemq.broker")

# kazoo retries a request that met a lost connection a few times, briefly: a step of the group's
# loop must not wait long on a coordinator it cannot reach (the lease runs out meanwhile)
COMMAND_RETRY = {"max_tries": 3, "delay": 0.05, "backoff": 2, "max_delay": 0.5}
CONNECTION_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 1.5, "max_delay": 1.0}


def parse(coordinator: str) -> tuple[str, str]:
    """('HOST:PORT,...', '/chroot') of a coordinator setting (config.coordinator.parse)."""
    addr = coordinator_address.parse(coordinator)
    return addr.hosts, addr.chroot


class ZkCoordinator:
    def __init__(self, hosts: str, timeout_s: float, options: dict | None = None, group: str = "") -> None:
        """``options``: KazooClient's credentials (zk_address.kazoo_options)."""
        from kazoo.client import KazooClient
        self.hosts = hosts
        self._timeout_s = timeout_s
        self.zk = KazooClient(hosts=hosts, timeout=timeout_s, connection_retry=dict(CONNECTION_RETRY),
                              command_retry=dict(COMMAND_RETRY), **(options or {}))
        self.granted = zk_address.GrantedTimeout(round(timeout_s * 1000), group)
        self._on_granted: list[Callable[[float], None]] = []
        zk_address.watch_granted_timeout(self.zk, self._granted)
        self._state = SessionState.SUSPENDED
        self._wake: Callable[[], None] = lambda: None

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> int:
        cid = self.zk.client_id
        return int(cid[0]) if cid else 0

    @property
    def timeout_s(self) -> float:
        """The session timeout in effect: the one granted when it is less than the one asked."""
        g = self.granted.granted_ms
        return min(self._timeout_s, g / 1000) if g else self._timeout_s

    def on_granted(self, listener: Callable[[float], None]) -> None:
        """``listener(timeout_s)`` at every session's grant (kazoo's connection thread)."""
        self._on_granted.append(listener)

    def _granted(self, ms: int) -> None:
        self.granted.seen(ms)
        for f in self._on_granted:
            f(self.timeout_s)

    def set_waker(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def _watch(self, _event) -> None:
        self._wake()

    def _listener(self, state) -> None:
        from kazoo.protocol.states import KazooState
        self._state = {KazooState.CONNECTED: SessionState.CONNECTED, KazooState.SUSPENDED: SessionState.SUSPENDED,
                       KazooState.LOST: SessionState.LOST}.get(state, SessionState.SUSPENDED)
        self._wake()

    def start(self) -> None:
        self.zk.add_listener(self._listener)
        self.zk.start(timeout=max(30.0, self._timeout_s))
        self._state = SessionState.CONNECTED

    def stop(self) -> None:
        try:
            self.zk.stop()          # the session is closed: its ephemeral nodes go at once
            self.zk.close()
        except Exception:  # noqa: BLE001 - stopping
            pass

    # requests -----------------------------------------------------------------------------------
    def _do(self, fn, *args, **kw):
        from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, OperationTimeoutError, SessionExpiredError
        from kazoo.handlers.threading import KazooTimeoutError
        try:
            return fn(*args, **kw)
        except (ConnectionLoss, SessionExpiredError, ConnectionClosedError, OperationTimeoutError,
                KazooTimeoutError) as e:
            raise Unreachable(f"{type(e).__name__}: {e}") from None

    def ensure_path(self, path: str) -> None:
        self._do(self.zk.ensure_path, path)

    def get(self, path: str, watch: bool = False) -> NodeStat | None:
        from kazoo.exceptions import NoNodeError
        try:
            if watch and self._do(self.zk.exists, path, watch=self._watch) is None:
                return None
            data, stat = self._do(self.zk.get, path, watch=self._watch if watch else None)
        except NoNodeError:
            return None
        return NodeStat(bytes(data or b""), int(stat.version), int(stat.ephemeralOwner))

    def children(self, path: str, watch: bool = False) -> list[str]:
        from kazoo.exceptions import NoNodeError
        try:
            return list(self._do(self.zk.get_children, path, watch=self._watch if watch else None))
        except NoNodeError:
            return []

    def create(self, path: str, data: bytes, ephemeral: bool = False) -> bool:
        from kazoo.exceptions import NodeExistsError
        try:
            self._do(self.zk.create, path, data, ephemeral=ephemeral, makepath=not ephemeral)
            return True
        except NodeExistsError:
            return False

    def set(self, path: str, data: bytes, version: int | None = None) -> bool:
        from kazoo.exceptions import BadVersionError, NoNodeError
        try:
            self._do(self.zk.set, path, data, version=-1 if version is None else version)
            return True
        except (BadVersionError, NoNodeError):
            return False

    def delete(self, path: str, version: int | None = None) -> bool:
        from kazoo.exceptions import BadVersionError, NoNodeError
        try:
            self._do(self.zk.delete, path, version=-1 if version is None else version)
            return True
        except (BadVersionError, NoNodeError):
            return False

    def transaction(self, ops: Sequence[Op]) -> bool:
        t = self.zk.transaction()
        for op in ops:
            if isinstance(op, Check):
                t.check(op.path, op.version)
            elif isinstance(op, Create):
                t.create(op.path, op.data, ephemeral=op.ephemeral)
            elif isinstance(op, SetData):
                t.set_data(op.path, op.data, -1 if op.version is None else op.version)
            else:
                raise TypeError(f"not a transaction operation: {op!r}")
        results = self._do(t.commit)
        return not any(isinstance(r, Exception) for r in results)
