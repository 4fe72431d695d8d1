"""The ZooKeeper side of a broker group's ``coordinator`` setting: the credentials KazooClient is
given, and the session timeout the ensemble granted. The setting's address itself (hosts, chroot,
``digest:USER@``) is parsed by tidemq.config.coordinator (ReplicationConfig checks it when loaded).

Credentials: with ``digest:USER@`` every node the group creates carries the ACL ``auth`` (creator: all
permissions), so only a client authenticated as USER reads or changes it (every member of the
cluster uses the same user); the password is the secret setting ``coordinator_password``.

The granted session timeout: ZooKeeper grants a timeout within its own ``minSessionTimeout`` /
``maxSessionTimeout`` (2 and 20 ticks by default), not always the one asked for, and kazoo only
logs it at its lowest level. ``watch_granted_timeout`` reads it from the connect answer each time a
session is made, logs it at INFO (WARNING when it differs from the one asked for: the failover
time follows the granted one) and keeps it for the status views.
"""

from __future__ import annotations

import logging
from typing import Callable

from ...config.coordinator import AddressError, ZkAddress

log = logging.getLogger("tidemq.broker")

def kazoo_options(addr: ZkAddress, password: str) -> dict:
    """KazooClient keyword arguments for the address's credentials ({} without)."""
    if not addr.scheme:
        return {}
    if not password:
        raise AddressError(f"coordinator user {addr.user!r} needs coordinator_password (TIDEMQ_COORDINATOR_PASSWORD)")
    from kazoo.security import CREATOR_ALL_ACL
    return {"auth_data": [(addr.scheme, f"{addr.user}:{password}")], "default_acl": list(CREATOR_ALL_ACL)}


class GrantedTimeout:
    """The session timeout ZooKeeper granted to a KazooClient, read from each connect answer."""

    def __init__(self, asked_ms: int, group: str = "") -> None:
        self.asked_ms = asked_ms
        self.granted_ms: int | None = None
        self.sessions = 0
        self.group = group

    def seen(self, granted_ms: int) -> None:
        first = self.granted_ms is None or granted_ms != self.granted_ms
        self.granted_ms = granted_ms
        self.sessions += 1
        if not first:
            return
        if granted_ms != self.asked_ms:
            log.warning("broker group %s: ZooKeeper granted a session timeout of %d ms (asked %d ms: its "
                        "minSessionTimeout / maxSessionTimeout bound it); a leader that stops answering is "
                        "replaced after about %d ms", self.group, granted_ms, self.asked_ms, granted_ms)
        else:
            log.info("broker group %s: ZooKeeper granted the session timeout asked, %d ms", self.group, granted_ms)

    def status(self) -> dict:
        return {"session_timeout_ms_asked": self.asked_ms, "session_timeout_ms_granted": self.granted_ms}


def watch_granted_timeout(zk, on_granted: Callable[[int], None]) -> None:
    """Call ``on_granted(ms)`` with the timeout of every session ``zk`` (a KazooClient, not started)
    makes. kazoo keeps the granted timeout to itself (its connection's connect answer): the
    connection's request method is wrapped to read it there."""
    from kazoo.protocol.serialization import Connect
    conn = zk._connection                       # kazoo's ConnectionHandler (no public accessor)
    invoke = conn._invoke

    def _invoke(timeout, request, xid=None):
        result = invoke(timeout, request, xid)
        if isinstance(request, Connect):
            try:
                granted = int(result[0].time_out)
            except (TypeError, AttributeError, IndexError, ValueError):
                granted = 0
            if granted > 0:
                on_granted(granted)
        return result

    conn._invoke = _invoke
