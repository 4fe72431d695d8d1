"""How the broker's own state reaches a follower: copied as its own stream (``State``, every
``replication_state_interval_ms``), not rebuilt from the log.

The commit log carries the messages, the schedule topic (delayed messages) and the half topic
(transaction half messages): those a follower has by copying the log. What lives beside the
log, a follower copies from the leader's memory as one JSON document and writes into the same
files a leader keeps (state/layout.py), so that a promoted follower opens them as any broker
opens its state at start:

    topics            the topic table: queue counts, space policies (when not evict), own settings
                      (retention, message size limit: when one is set), deleted topics
                      with the log offset where each ended (the store's config/topics.json; applied
                      to the follower's table)
    consumer_offsets  committed offsets of pull consumers (broker/consumer_offsets.json)
    pop               the pop state's snapshot (cursors, in-flight messages) and its receipt-handle
                      key: handles given out by the old leader stay valid (broker/pop/)
    timer             the timer's progress through the schedule topic (broker/timer/checkpoint.json)
    transactions      the transaction decisions (broker/transactions/)
    acl               users and their policies (broker/acl/acl.json: protection/acl.py), so a promoted
                      follower enforces what its leader did
    sealed            1 when the secrets in it (each user's secret key, the receipt-handle key) are
                      sealed under the group's secret_key (authentication on: protection/sealed.py);
                      a member with authentication on refuses a copy whose secrets are in clear
    groups            consumer-group settings (broker/groups.json: consume/groups.py): retry policy,
                      retry_max, orderly, consume enable
    quotas            byte-rate quotas per user, client id and topic (broker/quotas.json:
                      protection/quotas.py)

Each file is written in the format the broker that opens it reads: the consumer offsets and the
timer's progress as checked documents (tidemq/checked.py: CRC, the previous version kept as
``.bak``), each journal as its snapshot (a checked document) with the journal emptied
(state/journal.write_state). A document whose parts do not have the shape their owner checks at
open is refused whole (ValueError), before anything is written: a promoted follower never finds
a file it would set aside as damaged.

What changed on the leader after the last copy is lost by a failover, and each part is built to
take that as it takes a restart: acks and deliveries after it come again (at least once, as after
kill -9); a delayed message or a committed transaction moved after it is found in its real topic
by its message id (parking.already_moved) and not moved twice; offsets committed after it are
committed again by their consumers.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os

from ... import checked
from ...io import FileIO
from ...store.topics import MessageKind, SpacePolicy, TopicSettings
from ..consume import group_offsets
from ...protocol.group_settings import load_doc as load_groups
from ..deferred.timer import check_progress
from ..state import journal
from ..protection import handle_key, sealed
from ..protection.acl import AclState
from ..protection.members import MemberCredentials
from ..state.layout import StateLayout

log = logging.getLogger("tidemq.broker")


def _secret_key(service) -> str | None:
    """The group's key secrets are sealed under (protection/sealed.py): the broker's ``secret_key``
    with authentication on, else None (nothing to seal with: they go as they are)."""
    return answer_key(getattr(service, "config", None))


def answer_key(cfg) -> str | None:
    """The broker's ``secret_key`` with authentication on (``cfg`` its settings), else None."""
    return cfg.secret_key if cfg is not None and cfg.auth_enabled else None


def node_key(node) -> str | None:
    """The ``secret_key`` of a replication node's broker with authentication on (the one its member calls
    are signed with: protection/members.py), else None."""
    keys = MemberCredentials.of(node).keys
    return keys[1] if keys is not None else None


# The whole answer is authenticated (not only its secrets): with authentication on and TLS off, whoever
# sits on the member channel could otherwise change users' policies, topics or offsets in the copy, or
# send an older answer again. The follower asks with a fresh random challenge; the leader answers
#     b"mac1:" hex(HMAC-SHA256(k, len|group | len|challenge | body)) b"\n" body
# with k derived from secret_key under its own label (sealed.derived_key), body the JSON answer as sent.
ANSWER_PREFIX = b"mac1:"
ANSWER_LABEL = b"tidemq state answer v1 mac"
CHALLENGE_BYTES = 16
CHALLENGE_BYTES_MAX = 64            # what a leader accepts from a follower's request


class Unauthenticated(ValueError):
    """A state answer whose MAC is missing or wrong: changed on the way, an older answer replayed, or
    sent under another key. Nothing of it is applied."""


def _answer_tag(key: str, group: str, challenge: bytes, body: bytes) -> bytes:
    g = group.encode()
    return hmac.new(sealed.derived_key(key, ANSWER_LABEL),
                    len(g).to_bytes(4, "big") + g + len(challenge).to_bytes(4, "big") + challenge + body,
                    hashlib.sha256).digest()


def sign_answer(body: bytes, key: str | None, group: str, challenge: bytes) -> bytes:
    """The state answer ``body`` as the leader sends it: as it is without a key, else MAC'd, bound to the
    follower's ``challenge`` and the group."""
    if key is None:
        return body
    return ANSWER_PREFIX + _answer_tag(key, group, challenge, body).hex().encode() + b"\n" + body


def open_answer(raw: bytes, key: str | None, group: str, challenge: bytes) -> bytes:
    """The answer's body once its MAC checks (constant time); Unauthenticated when it is missing or wrong.
    Without a key, ``raw`` as it is (the open default)."""
    if key is None:
        return raw
    head = len(ANSWER_PREFIX) + 2 * sealed.TAG_BYTES
    if not raw.startswith(ANSWER_PREFIX) or raw[head:head + 1] != b"\n":
        raise Unauthenticated("the leader's state answer carries no MAC (authentication is on here)")
    try:
        tag = bytes.fromhex(raw[len(ANSWER_PREFIX):head].decode("ascii"))
    except ValueError:
        raise Unauthenticated("the leader's state answer carries no MAC (authentication is on here)") from None
    body = raw[head + 1:]
    if not hmac.compare_digest(tag, _answer_tag(key, group, challenge, body)):
        raise Unauthenticated("the leader's state answer does not check under this member's secret_key "
                              "(changed on the way, an older answer replayed, or another key)")
    return body


def _seal(doc: dict, key: str) -> dict:
    """``doc`` with every user's secret key and the receipt-handle key sealed under ``key``."""
    doc["pop"]["secret"] = sealed.seal(key, "pop secret", doc["pop"]["secret"].encode())
    acl = doc.get("acl")
    if isinstance(acl, dict) and isinstance(acl.get("users"), dict):
        acl = doc["acl"] = {**acl, "users": {n: {**u, "secret_key": sealed.seal(key, f"acl user {n}",
                                                                                 str(u["secret_key"]).encode())}
                                             for n, u in acl["users"].items()}}
    doc["sealed"] = 1
    return doc


def _open(doc: dict, key: str | None) -> dict:
    """``doc`` with its secrets opened (sealed.Unsealed when they do not open here: another key, changed,
    or sent in clear to a member with authentication on)."""
    if key is None:
        if doc.get("sealed"):
            raise sealed.Unsealed("the leader sealed its secrets, and this member has no secret_key to open them")
        return doc
    if doc.get("sealed") != 1:
        raise sealed.Unsealed("the leader sent its secrets in clear, and this member has authentication on")
    doc = {**doc, "pop": {**doc["pop"], "secret": sealed.open_sealed(key, "pop secret", doc["pop"]["secret"]).decode()}}
    acl = doc.get("acl")
    if isinstance(acl, dict) and isinstance(acl.get("users"), dict):
        doc["acl"] = {**acl, "users": {n: {**u, "secret_key": sealed.open_sealed(key, f"acl user {n}",
                                                                                 u.get("secret_key")).decode()}
                                       for n, u in acl["users"].items()}}
    return doc


def snapshot(store, service) -> dict:
    """The leader's broker state now (on the event loop, where consumers change it); its secrets
    sealed under the group's key with authentication on (protection/sealed.py)."""
    doc = _snapshot(store, service)
    key = _secret_key(service)
    return _seal(doc, key) if key is not None else doc


def _snapshot(store, service) -> dict:
    t = store.topics
    return {
        "log_end": store.commitlog_max_offset,
        "topics": {"topics": {n: ts.queue_count for n, ts in t.topics.items()}, "deleted": dict(t.deleted),
                   "policies": {n: ts.space_policy.value for n, ts in t.topics.items()
                                if ts.space_policy is not SpacePolicy.EVICT},
                   "types": {n: ts.message_kind.value for n, ts in t.topics.items()
                             if ts.message_kind is not MessageKind.MIXED},
                   "settings": {ts.name: ts.settings.document() for ts in t.with_settings()}},
        "consumer_offsets": [[g, tp, q, o] for (g, tp, q), o in service.group_offsets.offsets.items()],
        "pop": {"secret": service.pop.secret.decode(), "snapshot": service.pop.snapshot()},
        "timer": service.timer.snapshot(),
        "transactions": service.transactions.snapshot(),
        "acl": service.acl.document() if getattr(service, "acl", None) is not None else None,
        "groups": service.groups.document() if getattr(service, "groups", None) is not None else None,
        "quotas": service.quotas.document() if getattr(service, "quotas", None) is not None else None,
    }


def apply(doc: dict, store, service, state_dir: str) -> None:
    """Write the leader's state ``doc`` where this broker keeps its own, and update what the
    follower serves from memory (topics, consumer offsets). ValueError when ``doc`` is not one, or when
    its secrets do not open here (sealed.Unsealed)."""
    try:
        doc = _open(doc, _secret_key(service))
        topics = {str(n): int(c) for n, c in doc["topics"]["topics"].items()}
        deleted = {str(n): int(e) for n, e in doc["topics"].get("deleted", {}).items()}
        policies = {str(n): SpacePolicy.parse(p) for n, p in doc["topics"].get("policies", {}).items()}
        kinds = {str(n): MessageKind.parse(k) for n, k in doc["topics"].get("types", {}).items()}
        settings = {str(n): TopicSettings().changed(s) for n, s in doc["topics"].get("settings", {}).items()}
        offsets = {(str(g), str(t), int(q)): int(o) for g, t, q, o in doc["consumer_offsets"]}
        secret = str(doc["pop"]["secret"])
        if not handle_key.valid(secret):
            raise ValueError("the receipt-handle key is not 64 hex digits")
        pop, timer, txn = doc["pop"]["snapshot"], doc.get("timer"), doc["transactions"]
        if not isinstance(pop, dict) or not isinstance(txn, dict):
            raise TypeError("pop and transactions are objects")
        if timer is not None:
            check_progress(timer)
        acl = doc.get("acl")
        if acl is not None:
            AclState.from_doc(acl)                  # (checked before anything is written)
        groups = doc.get("groups")
        if groups is not None:
            load_groups(groups)                     # (checked before anything is written)
        quotas = doc.get("quotas")
        if quotas is not None and not isinstance(quotas, dict):
            raise TypeError("quotas is an object")
    except sealed.Unsealed as e:
        raise sealed.Unsealed(f"the leader's state refused: its secrets {e}") from None
    except (KeyError, TypeError, ValueError, AttributeError, checked.Damaged) as e:
        raise ValueError(f"not a broker state document: {e!r}") from None
    for name, end in deleted.items():
        if store.topics.deleted.get(name) != end and store.queue_count(name):
            store.delete_topic(name, end)
    for name, count in topics.items():
        policy = policies.get(name, SpacePolicy.EVICT)
        kind = kinds.get(name, MessageKind.MIXED)
        if (store.queue_count(name) < count or store.space_policy(name) != policy.value
                or store.message_type(name) != kind.value):
            store.create_topic(name, max(count, store.queue_count(name)), policy.value, kind.value)
        own = settings.get(name, TopicSettings())
        if store.topic_settings(name) != own:           # the leader's own settings of the topic, as they are
            store.topics.set_settings(name, own)
    fio: FileIO = store.fio
    layout = StateLayout(state_dir)
    fio.makedirs(layout.dir)
    # a part equal to what this member holds in memory is written again when its file is gone (the state
    # directory removed while the follower ran): a promoted follower opens its files, not its memory
    if offsets != service.group_offsets.offsets or not fio.exists(layout.consumer_offsets):
        group_offsets.write(fio, layout.consumer_offsets, offsets)
        service.group_offsets.offsets = offsets
    fio.makedirs(layout.pop_dir)
    handle_key.store(fio, layout.pop_secret, secret.encode())
    journal.write_state(fio, layout.pop_dir, pop)
    if timer is not None:
        fio.makedirs(os.path.dirname(layout.timer_checkpoint))
        checked.write(fio, layout.timer_checkpoint, timer)
    journal.write_state(fio, layout.transactions_dir, txn)
    if acl is not None and getattr(service, "acl", None) is not None:
        service.acl.replace(acl, not fio.exists(service.acl.path))      # written, and in effect here at once
    if groups is not None and getattr(service, "groups", None) is not None:
        service.groups.replace(groups, not fio.exists(service.groups.path))
    q = getattr(service, "quotas", None)
    if quotas is not None and q is not None and (quotas != q.document()
                                                 or (q.path is not None and not fio.exists(q.path))):
        q.replace(quotas)                           # the leader's quotas, in effect here at once
        q.save()
