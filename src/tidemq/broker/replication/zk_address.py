"""The ``coordinator`` setting of a broker group on ZooKeeper: hosts, chroot and credentials, and
the session timeout the ensemble granted.

    coordinator = "[digest:USER@]HOST:PORT[,HOST:PORT...][/chroot]"

- ``HOST:PORT,...``: the ensemble (three or five servers: docs/replication.md); the client
  connects to one and moves to another when it goes, keeping its session.
- ``/chroot``: every node of the cluster lives under it (default ``/tidemq``), so that one ensemble
  serves several clusters or other applications.
- ``digest:USER@``: ZooKeeper's digest authentication. The password is the secret setting
  ``coordinator_password`` (``TIDEMQ_COORDINATOR_PASSWORD``, or the config file), never in the
  setting itself, which shows on command lines, the status page and in ``config show``; one written
  there is refused. Every node the group creates then carries the ACL ``auth`` (creator: all
  permissions), so only a client authenticated as USER reads or changes it (every member of the
  cluster uses the same user).

The granted session timeout: ZooKeeper grants a timeout within its own ``minSessionTimeout`` /
``maxSessionTimeout`` (2 and 20 ticks by default), not always the one asked for, and kazoo only
logs it at its lowest level. ``watch_granted_timeout`` reads it from the connect answer each time a
session is made, logs it at INFO (WARNING when it differs from the one asked for: the failover
time follows the granted one) and keeps it for the status views.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Callable

log = logging.getLogger("tidemq.broker")

DEFAULT_CHROOT = "/tidemq"
SCHEMES = ("digest",)
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):\d{1,5}$")


class AddressError(ValueError):
    """A coordinator setting that cannot be used, with the reason."""


@dataclass(frozen=True)
class ZkAddress:
    hosts: str                   # "HOST:PORT,HOST:PORT"
    chroot: str                  # "/tidemq"
    scheme: str = ""             # "" (none) or "digest"
    user: str = ""

    @property
    def hosts_list(self) -> list[str]:
        return self.hosts.split(",")


def parse(coordinator: str) -> ZkAddress:
    """The parts of a coordinator setting; AddressError names what is wrong."""
    s = coordinator.strip()
    scheme = user = ""
    if "@" in s:
        cred, _, s = s.rpartition("@")
        scheme, colon, rest = cred.partition(":")
        if not colon or scheme not in SCHEMES:
            raise AddressError(f"coordinator credentials are 'digest:USER@HOSTS', not {cred.split(':')[0]!r}: "
                               f"ZooKeeper's digest authentication is the one supported")
        if ":" in rest:
            raise AddressError("coordinator: no password in the setting (it shows on command lines and status "
                               "pages): 'digest:USER@HOSTS' with the password in coordinator_password "
                               "(TIDEMQ_COORDINATOR_PASSWORD)")
        user = rest
        if not user:
            raise AddressError("coordinator: 'digest:USER@HOSTS' needs a user")
    hosts, slash, chroot = s.partition("/")
    chroot = ("/" + chroot.strip("/")) if slash and chroot.strip("/") else DEFAULT_CHROOT
    parts = [h.strip() for h in hosts.split(",")]
    bad = [h for h in parts if not _HOST.match(h)]
    if not hosts or bad:
        raise AddressError(f"coordinator hosts are 'HOST:PORT[,HOST:PORT...]', not {', '.join(bad) or repr(hosts)}")
    if any(not seg or seg in (".", "..") or seg == "zookeeper" for seg in chroot.strip("/").split("/")):
        raise AddressError(f"coordinator chroot {chroot!r}: path segments must be names (not '.', '..', "
                           f"or ZooKeeper's own 'zookeeper')")
    return ZkAddress(",".join(parts), chroot, scheme, user)


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
