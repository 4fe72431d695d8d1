"""The coordinator seam: what a broker group needs of ZooKeeper, and nothing more.

A ``Coordinator`` is one member's client of a coordination service (ZooKeeper's model): a
*session* that lives while the client keeps talking to the service and expires ``timeout_s``
after the service last heard from it; *nodes* by path, each with bytes, a version (bumped by
every write) and, for an *ephemeral* node, the session that owns it (it goes when the session
does); compare-and-set writes (``version``) and all-or-nothing ``transaction``s; a ``waker``
called when something this client read with ``watch=True`` changed, or its session's state did
(so a loop may sleep between looks: polling with wake-ups).

Two implementations: ``coord_zk.ZkCoordinator`` (kazoo, a real ZooKeeper) and
``tidemq.testing.memory_coordinator`` (in one process, sessions that expire on the Clock seam,
links that a test cuts): the election, the in-sync set and the leases (coordinator.py) run
unchanged over either.

Outcomes: a write that loses its compare-and-set, a create of a node that exists, a delete of one
that is gone answer False (expected: someone else moved first); ``get`` of a missing node answers
None. ``Unreachable`` (an exception) means the request could not be made now: the service cannot
be reached, the session expired; the caller looks again at its next step. ``session_id``
changes when an expired session is replaced by a new one: ephemeral nodes of the old one are gone.

Session states (``SessionState``): CONNECTED (requests go through); SUSPENDED (the connection is
lost: the session may still live on the service, or may have expired without this client
knowing); LOST (the service said it expired; the client makes a new one and is CONNECTED again
with another ``session_id``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence


class SessionState(enum.Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"


class Unreachable(Exception):
    """The request could not be made now (no connection, session expired, timed out)."""


@dataclass(frozen=True, slots=True)
class NodeStat:
    """A node as one read found it."""
    data: bytes
    version: int
    owner: int          # the session owning an ephemeral node; 0 for a persistent one


# the operations of a transaction: all apply, or none
@dataclass(frozen=True, slots=True)
class Check:
    path: str
    version: int        # the node must exist with this version


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: bytes
    ephemeral: bool = False     # the node must not exist


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: bytes
    version: int | None = None  # None: whatever its version (the node must exist)


Op = Check | Create | SetData


class Coordinator(Protocol):
    """One member's session with the coordination service (see the module doc)."""

    @property
    def state(self) -> SessionState: ...

    @property
    def session_id(self) -> int: ...

    @property
    def timeout_s(self) -> float:
        """The session timeout granted (the service may grant another than asked)."""
        ...

    def set_waker(self, wake: Callable[[], None]) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> None:
        """Close the session: its ephemeral nodes go at once."""
        ...

    def ensure_path(self, path: str) -> None: ...

    def get(self, path: str, watch: bool = False) -> NodeStat | None: ...

    def children(self, path: str, watch: bool = False) -> list[str]: ...

    def create(self, path: str, data: bytes, ephemeral: bool = False) -> bool: ...

    def set(self, path: str, data: bytes, version: int | None = None) -> bool: ...

    def delete(self, path: str, version: int | None = None) -> bool: ...

    def transaction(self, ops: Sequence[Op]) -> bool: ...
