"""The ``coordinator`` setting of a broker group on ZooKeeper: hosts, chroot and credentials.

    coordinator = "[digest:USER@]HOST:PORT[,HOST:PORT...][/chroot]"

- ``HOST:PORT,...``: the ensemble (three or five servers: docs/replication.md); the client
  connects to one and moves to another when it goes, keeping its session.
- ``/chroot``: every node of the cluster lives under it (default ``/tidemq``), so that one ensemble
  serves several clusters or other applications.
- ``digest:USER@``: ZooKeeper's digest authentication. The password is the secret setting
  ``coordinator_password`` (``TIDEMQ_COORDINATOR_PASSWORD``, or the config file), never in the
  setting itself, which shows on command lines, the status page and in ``config show``; one written
  there is refused.

Parsed here, where the settings live, so that ReplicationConfig refuses a bad one when it is loaded
(ConfigError) without importing the broker, and the broker (broker/replication/zk_address.py: the
ZooKeeper client's credentials and granted timeout) reads the same parts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
