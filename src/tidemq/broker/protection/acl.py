"""Users and their permissions (RocketMQ 5's ACL 2.0 model), deny by default, and where they are kept.

**Users.** A user is an access key (its name) with a secret key, SUPER or NORMAL. The broker's own
``access_key`` / ``secret_key`` settings are the first super user: always there, never stored,
never deleted (the members of a group sign with them). A SUPER user may do everything; a NORMAL
one what its policies allow.

**Policies.** A user's policy names a resource, actions, a decision and, optionally, the source
addresses it applies to::

    resource   topic:PATTERN | group:PATTERN | cluster
    PATTERN    a literal name (orders), a prefix (orders*: every name starting with "orders"), or *
    actions    pub, sub, create, update, delete, get, list, all (all: every one of them)
    decision   allow | deny
    source_ips CIDRs (10.0.0.0/8, 127.0.0.1/32, ::1/128); none: from anywhere

A request is allowed when some policy of its user allows the action on the resource from the
request's address and none denies it: **deny wins**, and with no policy that matches it is denied
(a NORMAL user starts with nothing). Which action each RPC needs: access.py.

**Where they are kept.** One checked document (tidemq/checked.py: CRC, the previous version kept
as ``.bak``) in the broker's state, ``<root>/broker/acl/acl.json``, the directory made 0700 (it
holds the secret keys the signatures are checked with), copied to followers with the rest of the
broker's state (replication/state.py)::

    {"version": int, "users": {NAME: {"secret_key": str, "super": bool}},
     "policies": {NAME: [{"resource": str, "actions": [str], "decision": "allow"|"deny",
                          "source_ips": [str]}]}}

A change is written before it is answered and takes effect at once (the next call is checked
against it); the state in memory is an immutable ``AclState`` replaced whole, so a check never
sees half a change.
"""

from __future__ import annotations

import enum
import ipaddress
import logging
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Iterable

from ... import checked
from ...io import FileIO

log = logging.getLogger("tidemq.broker")

ACL_DIR = "acl"
ACL_FILE = "acl.json"

ACTIONS = ("pub", "sub", "create", "update", "delete", "get", "list", "all")
ALL = "all"
KINDS = ("topic", "group", "cluster")
CLUSTER = "cluster"
NAME_RE = re.compile(r"[%|a-zA-Z0-9_-]{1,255}")      # a user's name (its access key)
PATTERN_RE = re.compile(r"\*|[%|a-zA-Z0-9_-]{1,255}\*?")
SECRET_BYTES_MIN = 8
SECRET_BYTES_MAX = 1024
USERS_MAX = 10_000
POLICIES_PER_USER_MAX = 1_000
SOURCE_IPS_MAX = 64
CACHE_MAX = 100_000               # decisions remembered until the next change


class Decision(str, enum.Enum):
    ALLOW = "allow"
    DENY = "deny"


class AclError(ValueError):
    """A user or policy that cannot be (a bad name, pattern, action, CIDR; an unknown user)."""


@dataclass(frozen=True)
class Resource:
    """``kind`` topic / group / cluster and its ``pattern`` (cluster: "")."""
    kind: str
    pattern: str = ""

    @staticmethod
    def parse(text: str) -> "Resource":
        if not isinstance(text, str):
            raise AclError("a resource is topic:PATTERN, group:PATTERN or cluster")
        if text == CLUSTER:
            return Resource(CLUSTER)
        kind, sep, pattern = text.partition(":")
        if not sep or kind not in ("topic", "group"):
            raise AclError(f"resource {text[:80]!r}: give topic:PATTERN, group:PATTERN or cluster")
        if PATTERN_RE.fullmatch(pattern) is None:
            raise AclError(f"resource {text[:80]!r}: PATTERN is a name of [%|a-zA-Z0-9_-], a prefix (name*) or *")
        return Resource(kind, pattern)

    def __str__(self) -> str:
        return self.kind if self.kind == CLUSTER else f"{self.kind}:{self.pattern}"

    def matches(self, kind: str, name: str) -> bool:
        if kind != self.kind:
            return False
        p = self.pattern
        if kind == CLUSTER or p == "*":
            return True
        if p.endswith("*"):
            return name.startswith(p[:-1])
        return name == p


def parse_actions(actions: Iterable[str]) -> frozenset[str]:
    if isinstance(actions, str) or not isinstance(actions, (list, tuple, set, frozenset)):
        raise AclError(f"actions are a list of {', '.join(ACTIONS)}")
    out = set()
    for a in actions:
        a = a.strip().lower() if isinstance(a, str) else a
        if a not in ACTIONS:
            raise AclError(f"action {a!r} is not one of {', '.join(ACTIONS)}")
        out.add(a)
    if not out:
        raise AclError("give at least one action")
    return frozenset(out)


def parse_networks(source_ips) -> tuple:
    if source_ips is None:
        return ()
    if isinstance(source_ips, str) or not isinstance(source_ips, (list, tuple)) or len(source_ips) > SOURCE_IPS_MAX:
        raise AclError(f"source_ips is a list of at most {SOURCE_IPS_MAX} CIDRs")
    try:
        return tuple(ipaddress.ip_network(s, strict=False) for s in source_ips)
    except (ValueError, TypeError) as e:
        raise AclError(f"source_ips: {e}") from None


@dataclass(frozen=True)
class Policy:
    resource: Resource
    actions: frozenset
    decision: Decision = Decision.ALLOW
    networks: tuple = ()

    def applies(self, kind: str, name: str, action: str, ip) -> bool:
        if not (action in self.actions or ALL in self.actions) or not self.resource.matches(kind, name):
            return False
        if not self.networks:
            return True
        return ip is not None and any(ip.version == n.version and ip in n for n in self.networks)

    def to_doc(self) -> dict:
        return {"resource": str(self.resource), "actions": sorted(self.actions, key=ACTIONS.index),
                "decision": self.decision.value, "source_ips": [str(n) for n in self.networks]}

    @staticmethod
    def from_doc(d) -> "Policy":
        if not isinstance(d, dict):
            raise AclError("a policy is an object")
        try:
            decision = Decision(d.get("decision", "allow"))
        except ValueError:
            raise AclError("decision is allow or deny") from None
        return Policy(Resource.parse(d.get("resource")), parse_actions(d.get("actions") or ()), decision,
                      parse_networks(d.get("source_ips")))


@dataclass(frozen=True)
class User:
    name: str
    secret_key: str = field(repr=False)
    super: bool = False


def check_name(name) -> str:
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
        raise AclError("a user name is 1-255 characters of [%|a-zA-Z0-9_-] (it is the access key)")
    return name


def check_secret(secret) -> str:
    if not isinstance(secret, str) or not SECRET_BYTES_MIN <= len(secret.encode()) <= SECRET_BYTES_MAX:
        raise AclError(f"a secret key is {SECRET_BYTES_MIN}-{SECRET_BYTES_MAX} bytes")
    return secret


@dataclass(frozen=True)
class AclState:
    """Users and their policies at one version (replaced whole on every change)."""
    version: int = 0
    users: dict = field(default_factory=dict)           # name -> User (the stored ones)
    policies: dict = field(default_factory=dict)        # name -> tuple[Policy]

    def to_doc(self) -> dict:
        return {"version": self.version,
                "users": {n: {"secret_key": u.secret_key, "super": u.super} for n, u in sorted(self.users.items())},
                "policies": {n: [p.to_doc() for p in ps] for n, ps in sorted(self.policies.items()) if ps}}

    @staticmethod
    def from_doc(doc) -> "AclState":
        """The state a document holds; AclError (a ValueError) when it is not one."""
        if not isinstance(doc, dict) or not isinstance(doc.get("users", {}), dict) \
                or not isinstance(doc.get("policies", {}), dict):
            raise AclError("not an ACL document")
        version = doc.get("version", 0)
        if type(version) is not int or version < 0:
            raise AclError("version is a whole number")
        users = {}
        for name, u in doc.get("users", {}).items():
            if not isinstance(u, dict) or not isinstance(u.get("super", False), bool):
                raise AclError(f"user {name!r} is not one")
            users[check_name(name)] = User(name, check_secret(u.get("secret_key")), u.get("super", False))
        if len(users) > USERS_MAX:
            raise AclError(f"more than {USERS_MAX} users")
        policies = {}
        for name, ps in doc.get("policies", {}).items():
            if name not in users or not isinstance(ps, list) or len(ps) > POLICIES_PER_USER_MAX:
                raise AclError(f"policies of {name!r}: not a known user's list")
            policies[name] = tuple(Policy.from_doc(p) for p in ps)
        return AclState(version, users, policies)


def peer_ip(peer: str):
    """The address of a gRPC peer ("ipv4:10.0.0.1:5555", "ipv6:[::1]:5555"), or None (unix:...)."""
    kind, _, rest = (peer or "").partition(":")
    host = rest.rsplit(":", 1)[0] if kind in ("ipv4", "ipv6") else ""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0]) if host else None
    except ValueError:
        return None


class Acl:
    """The users and policies of a broker: checks (``secret_of``, ``allowed``), changes (written, then
    in effect) and the document a follower copies (``document`` / ``replace``)."""

    def __init__(self, fio: FileIO, state_dir: str, first: User | None) -> None:
        """``first``: the super user of the broker's settings (None: authentication is off)."""
        self.fio = fio
        self.dir = os.path.join(state_dir, ACL_DIR)
        self.path = os.path.join(self.dir, ACL_FILE)
        self.first = first
        self._lock = threading.Lock()          # changes come from the admin's threads
        # the state in effect and the decisions made from it, replaced together (a decision made
        # from a state a change replaced meanwhile goes into that state's cache, never the new one)
        self._now: tuple[AclState, dict] = (AclState(), {})

    @property
    def state(self) -> AclState:
        return self._now[0]

    @property
    def enabled(self) -> bool:
        return self.first is not None

    def load(self) -> "Acl":
        """Read the document (a damaged one falls back to its previous version: checked.py)."""
        loaded = checked.load(self.fio, self.path, "users and ACLs", check=AclState.from_doc)
        if loaded.doc is not None:
            self._set(AclState.from_doc(loaded.doc))
        return self

    # checks ---------------------------------------------------------------------------------
    def secret_of(self, access_key: str) -> str | None:
        """The secret key of a user (the broker's first super user included), or None."""
        f = self.first
        if f is not None and access_key == f.name:
            return f.secret_key
        u = self.state.users.get(access_key)
        return u.secret_key if u is not None else None

    def is_super(self, name: str, state: AclState | None = None) -> bool:
        if self.first is not None and name == self.first.name:
            return True
        u = (state or self.state).users.get(name)
        return u is not None and u.super

    def allowed(self, user: str, kind: str, name: str, action: str, ip=None) -> tuple[bool, str]:
        """(allowed, why not): may ``user`` do ``action`` on ``kind``:``name`` from ``ip``? Deny wins;
        nothing that matches: denied."""
        state, cache = self._now
        key = (user, kind, name, action, ip)
        got = cache.get(key)
        if got is not None:
            return got
        got = self._decide(state, user, kind, name, action, ip)
        if len(cache) >= CACHE_MAX:
            cache.clear()
        cache[key] = got
        return got

    def allowed_any(self, user: str, kind: str, name: str, actions: tuple, ip=None) -> tuple[bool, str]:
        """(allowed, why not): may ``user`` do one of ``actions``? The refusal names them all."""
        whys = []
        for action in actions:
            ok, why = self.allowed(user, kind, name, action, ip)
            if ok:
                return True, ""
            whys.append(why)
        if len(actions) == 1:
            return False, whys[0]
        what = CLUSTER if kind == CLUSTER else f"{kind} {name!r}"
        return False, f"forbidden: user {user!r} may not {' or '.join(actions)} on {what}"

    def _decide(self, state: AclState, user: str, kind: str, name: str, action: str, ip) -> tuple[bool, str]:
        if self.is_super(user, state):
            return True, ""
        what = CLUSTER if kind == CLUSTER else f"{kind} {name!r}"
        allow = None
        for p in state.policies.get(user, ()):
            if p.applies(kind, name, action, ip):
                if p.decision is Decision.DENY:
                    return False, (f"forbidden: user {user!r} may not {action} on {what}: denied by its policy on "
                                   f"{p.resource}")
                allow = p
        if allow is not None:
            return True, ""
        return False, f"forbidden: user {user!r} may not {action} on {what} (no policy allows it)"

    # changes --------------------------------------------------------------------------------
    def _set(self, state: AclState) -> None:
        self._now = (state, {})

    def _write(self, state: AclState) -> None:
        """Write ``state`` (the next version) and put it in effect."""
        if not self.fio.exists(self.dir):
            self.fio.makedirs(self.dir)
        try:
            os.chmod(self.dir, 0o700)          # it holds the secret keys
        except OSError:
            pass
        checked.write_mirrored(self.fio, self.path, state.to_doc())   # damage never brings back a revoked right
        self._set(state)

    def _change(self, users=None, policies=None) -> AclState:
        s = self.state
        return AclState(s.version + 1, dict(s.users) if users is None else users,
                        dict(s.policies) if policies is None else policies)

    def create_user(self, name: str, secret_key: str, super_: bool = False) -> User:
        check_name(name)
        check_secret(secret_key)
        with self._lock:
            if (self.first is not None and name == self.first.name) or name in self.state.users:
                raise AclError(f"user {name!r} exists")
            if len(self.state.users) >= USERS_MAX:
                raise AclError(f"there are {USERS_MAX} users already")
            users = dict(self.state.users)
            users[name] = User(name, secret_key, bool(super_))
            self._write(self._change(users=users))
            return users[name]

    def delete_user(self, name: str) -> None:
        with self._lock:
            if self.first is not None and name == self.first.name:
                raise AclError(f"user {name!r} is the broker's own (access_key): it cannot be deleted")
            if name not in self.state.users:
                raise KeyError(name)
            users, policies = dict(self.state.users), dict(self.state.policies)
            del users[name]
            policies.pop(name, None)
            self._write(self._change(users, policies))

    def users(self) -> list[dict]:
        out = [{"name": self.first.name, "super": True, "builtin": True}] if self.first is not None else []
        return out + [{"name": n, "super": u.super, "builtin": False} for n, u in sorted(self.state.users.items())]

    def _known(self, name: str) -> None:
        if name not in self.state.users:
            if self.first is not None and name == self.first.name:
                raise AclError(f"user {name!r} is the broker's own super user: it needs no policy")
            raise KeyError(name)

    def grant(self, name: str, resource: str, actions, decision: str = "allow", source_ips=None) -> list[dict]:
        """Add ``actions`` to the user's policy on ``resource`` with this decision and source_ips (one
        is made when there is none); the user's policies after."""
        res, acts, nets = Resource.parse(resource), parse_actions(actions), parse_networks(source_ips)
        try:
            dec = Decision(decision)
        except ValueError:
            raise AclError("decision is allow or deny") from None
        with self._lock:
            self._known(name)
            ps = list(self.state.policies.get(name, ()))
            for i, p in enumerate(ps):
                if p.resource == res and p.decision is dec and set(p.networks) == set(nets):
                    ps[i] = Policy(res, p.actions | acts, dec, p.networks)
                    break
            else:
                if len(ps) >= POLICIES_PER_USER_MAX:
                    raise AclError(f"user {name!r} has {POLICIES_PER_USER_MAX} policies already")
                ps.append(Policy(res, acts, dec, nets))
            policies = dict(self.state.policies)
            policies[name] = tuple(ps)
            self._write(self._change(policies=policies))
            return [p.to_doc() for p in ps]

    def revoke(self, name: str, resource: str, actions, decision: str | None = None) -> list[dict]:
        """Take ``actions`` off the user's policies on exactly ``resource`` (allow and deny ones, or those
        of ``decision``); a policy left with none goes. The user's policies after."""
        res, acts = Resource.parse(resource), parse_actions(actions)
        dec = Decision(decision) if decision is not None else None
        with self._lock:
            self._known(name)
            ps = []
            for p in self.state.policies.get(name, ()):
                if p.resource == res and (dec is None or p.decision is dec):
                    left = frozenset() if ALL in acts else p.actions - acts
                    if ALL in p.actions and ALL not in acts:
                        left = frozenset(ACTIONS) - {ALL} - acts
                    if not left:
                        continue
                    p = Policy(p.resource, left, p.decision, p.networks)
                ps.append(p)
            policies = dict(self.state.policies)
            policies[name] = tuple(ps)
            self._write(self._change(policies=policies))
            return [p.to_doc() for p in ps]

    def policies(self, name: str | None = None) -> dict[str, list[dict]]:
        s = self.state
        if name is not None:
            self._known(name)
            return {name: [p.to_doc() for p in s.policies.get(name, ())]}
        return {n: [p.to_doc() for p in ps] for n, ps in sorted(s.policies.items()) if ps}

    # the copy a follower keeps ----------------------------------------------------------------
    def document(self) -> dict:
        return self.state.to_doc()

    def replace(self, doc, rewrite: bool = False) -> None:
        """A follower's copy of its leader's document (AclError when it is not one): written, in effect
        (``rewrite``: written even when it is the one in effect: its file is gone)."""
        state = AclState.from_doc(doc)
        with self._lock:
            if rewrite or state.to_doc() != self.state.to_doc():
                self._write(state)
