"""The group's records in the coordinator, signed with the cluster's key (authentication on).

Without it, whoever could write the coordinator's nodes (ZooKeeper without ``digest:`` credentials, or
someone holding them) decided a broker group's roles: a leader record naming any endpoint made every
member follow it (a follower copies the log it is served), a member record's ``log_end`` or a forged
in-sync set chose who was elected. With ``access_key`` / ``secret_key`` set, ``SignedCoordinator``
wraps the member's coordinator (coordination.py: ZooKeeper or the in-process one): every record a
member writes carries an HMAC under a key derived from ``secret_key`` (the same on every member; never
written to the coordinator), and every record it reads must carry a right one. Nothing else changes:
the election, the in-sync set and the leases (coordinator.py) run over it unchanged.

A record, as stored (the data as before, then the signature)::

    <data> 0x00 "tidemq-sig1:" <64 hex digits: HMAC-SHA256(key, path 0x00 owner 0x00 data)>

``path`` is the node's whole path (a record cannot be moved to another node, group or chroot);
``owner`` the session owning an ephemeral node (the lease, a member's entry: decimal; 0 for a
persistent node): ZooKeeper sets a node's owner and no client can change it, so a leader or member
record copied from an earlier session (a replay of a lease that ended) does not verify either.

A record that is unsigned or wrongly signed is **refused**: ``get`` raises ``RecordRefused``
(``.reason``: ``Refusal.UNSIGNED`` / ``BAD_SIGNATURE``), an ``Unreachable``: where the group's logic
has nothing better to do, it is a record it cannot read now. Where it does (coordinator.py): a refused
leader record is followed by nobody, and a leader steps down on it as when its record is gone (its own
lease overwritten is deleted: an election); a refused in-sync set elects nobody, and its leader writes
it again from its waits (also before it steps down, its log failed); a refused epoch is written again
from the set's; a refused member entry is skipped, and a member whose own entry was overwritten makes
it again; topology.py skips a refused topic. Each refusal is counted (``refused``: per reason, on the
status page's coordinator session) and logged at WARNING, once per node and reason every LOG_EVERY_S.

Older records written back (as they were signed): the epoch and the in-sync set are written in one
transaction, always with the same epoch (coordinator.py), so an in-sync set older than the epoch
record elects nobody and an epoch record older than the set's is gone past (never a second leader of
an epoch); a leader reads its set again on any change (a watch) and writes it again from its waits
when it is refused. What signing does not stop (ZooKeeper's ACLs do: ``digest:`` in ``coordinator``,
docs/replication.md): deleting a node (a lease deleted is an election; a member's ``ineligible`` mark
or the in-sync set deleted lets any live member be elected), an older set of the current epoch
written back after the leader is gone, and a topic written back. Binding ZooKeeper's version into the
signed bytes would not: whoever may delete a node makes it again and sets it until its version is
the signed one; only its creation's zxid cannot be made again, and a record made by a create cannot
sign it. A group whose records were written before authentication was turned on (or by a member
without the keys) has them refused until they are written again: start such a group's members with
the keys on an empty chroot, or delete the group's ``epoch`` and ``isr`` nodes while every member is
stopped (their logs' epoch files keep the epochs).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import logging
import time
from typing import Sequence

from .coordination import Check, Coordinator, Create, NodeStat, Op, SetData, Unreachable

log = logging.getLogger("tidemq.broker")

MARK = b"\x00tidemq-sig1:"
SIG_HEX = 64
LOG_EVERY_S = 60.0


class Refusal(enum.Enum):
    UNSIGNED = "unsigned"
    BAD_SIGNATURE = "bad_signature"

    @property
    def words(self) -> str:
        return "unsigned" if self is Refusal.UNSIGNED else "signed with another key, or changed"


class RecordRefused(Unreachable):
    """A record this member will not act on (see the module doc)."""

    def __init__(self, path: str, reason: Refusal, stat: NodeStat) -> None:
        super().__init__(f"the coordinator's record {path} is {reason.words}: refused")
        self.path, self.reason, self.owner, self.version = path, reason, stat.owner, stat.version


def record_key(secret_key: str) -> bytes:
    """The key records are signed with, derived from the broker's ``secret_key`` (never the key itself:
    the same secret signs calls, protection/auth.py)."""
    return hmac.new(secret_key.encode(), b"tidemq coordinator records v1", hashlib.sha256).digest()


def sign(key: bytes, path: str, owner: int, data: bytes) -> bytes:
    mac = hmac.new(key, b"%s\x00%d\x00%s" % (path.encode(), owner, data), hashlib.sha256).hexdigest()
    return data + MARK + mac.encode()


def verify(key: bytes, path: str, stat: NodeStat) -> tuple[bytes, Refusal | None]:
    """(the record's data, None) when ``stat`` is signed right, else (b"", why not)."""
    raw = stat.data
    cut = len(raw) - len(MARK) - SIG_HEX
    if cut < 0 or raw[cut:cut + len(MARK)] != MARK:
        return b"", Refusal.UNSIGNED
    data, mac = raw[:cut], raw[cut + len(MARK):]
    want = sign(key, path, stat.owner, data)[-SIG_HEX:]
    if not hmac.compare_digest(mac, want):
        return b"", Refusal.BAD_SIGNATURE
    return data, None


class SignedCoordinator:
    """A Coordinator whose records are signed and checked (the module doc); the rest passes through."""

    def __init__(self, inner: Coordinator, secret_key: str, group: str = "") -> None:
        self.inner = inner
        self.group = group
        self._key = record_key(secret_key)
        self._ephemeral: set[str] = set()         # paths this member made ephemeral (its set() binds its session)
        self.refused: dict[str, int] = {r.value: 0 for r in Refusal}
        self._said: dict[tuple[str, Refusal], float] = {}

    def __getattr__(self, name):                  # state, session_id, timeout_s, granted, on_granted, ...
        return getattr(self.inner, name)

    @property
    def state(self):
        return self.inner.state

    @property
    def session_id(self) -> int:
        return self.inner.session_id

    @property
    def timeout_s(self) -> float:
        return self.inner.timeout_s

    def set_waker(self, wake) -> None:
        self.inner.set_waker(wake)

    def start(self) -> None:
        self.inner.start()

    def stop(self) -> None:
        self.inner.stop()

    def ensure_path(self, path: str) -> None:
        self.inner.ensure_path(path)              # (containers: their data is never read)

    def children(self, path: str, watch: bool = False) -> list[str]:
        return self.inner.children(path, watch)

    def delete(self, path: str, version: int | None = None) -> bool:
        return self.inner.delete(path, version)

    # records ------------------------------------------------------------------------------------
    def _seal(self, path: str, data: bytes, ephemeral: bool) -> bytes:
        if ephemeral:
            self._ephemeral.add(path)
        return sign(self._key, path, self.inner.session_id if ephemeral else 0, data)

    def get(self, path: str, watch: bool = False) -> NodeStat | None:
        got = self.inner.get(path, watch)
        if got is None:
            return None
        data, refusal = verify(self._key, path, got)
        if refusal is not None:
            self._refuse(path, refusal, got)
        return NodeStat(data, got.version, got.owner)

    def _refuse(self, path: str, reason: Refusal, got: NodeStat) -> None:
        self.refused[reason.value] += 1
        now = time.monotonic()
        said = self._said.get((path, reason))
        if said is None or now - said >= LOG_EVERY_S:
            if len(self._said) > 4096:
                self._said.clear()
            self._said[(path, reason)] = now
            log.warning("broker group %s: the coordinator's record %s is %s (version %d, owner session %#x): "
                        "refused, not acted on; only a member with the group's secret_key can write the group's "
                        "records (is someone else writing the coordinator, or a member without the same keys?)",
                        self.group, path, reason.words, got.version, got.owner)
        raise RecordRefused(path, reason, got)

    def create(self, path: str, data: bytes, ephemeral: bool = False) -> bool:
        return self.inner.create(path, self._seal(path, data, ephemeral), ephemeral)

    def set(self, path: str, data: bytes, version: int | None = None) -> bool:
        return self.inner.set(path, self._seal(path, data, path in self._ephemeral), version)

    def transaction(self, ops: Sequence[Op]) -> bool:
        out: list[Op] = []
        for op in ops:
            if isinstance(op, Create):
                out.append(Create(op.path, self._seal(op.path, op.data, op.ephemeral), op.ephemeral))
            elif isinstance(op, SetData):
                out.append(SetData(op.path, self._seal(op.path, op.data, op.path in self._ephemeral), op.version))
            elif isinstance(op, Check):
                out.append(op)
            else:
                raise TypeError(f"not a transaction operation: {op!r}")
        return self.inner.transaction(out)
