"""Topics and their queue counts, kept in ``<root>/config/topics.json``.

Written atomically (write, fsync, rename, fsync dir): after any crash the file
is the old or the new version, never a torn one. Queues found on disk that the
file does not know (a crash between the first put and the file write) are added
back at start, so no message becomes unreachable.

A checked document (tidemq/checked.py: a CRC over the document, ``topics.json.bak`` a mirror of
the version in effect, checked.write_mirrored): a damaged disk is recognised, never read as
topics -- a flipped digit in a deleted topic's end hid the intact messages of the topic made again
after it, one in a retention made cleanup delete messages early. A damaged file falls back to its
mirror (WARNING; the damaged file is kept as ``topics.json.damaged``; after a crash between the
two writes the mirror may be the version before the last change); with no intact
copy the store refuses to start (StoreError: the space policies and retentions it would lose are
what keeps messages from cleanup), and the damaged files stay where they are for the operator.
A file written before the checked format (plain JSON) is read as it is.

Each topic has a *space policy* (``SpacePolicy``, Pulsar's backlog quota in spirit): what
happens when space is short and the oldest segment still holds messages of the topic that a
subscribed consumer group has not consumed. ``evict`` (the default, RocketMQ's behaviour):
cleanup deletes them, and says which groups lost which offsets. ``refuse``: cleanup keeps them
and writes are refused until the groups have consumed them (store/backlog.py, cleaner.py).

Per-topic settings (``TopicSettings``, Kafka's topic-level configs; unset: the store's): a retention by
time (``retention_hours``: the topic's messages may go once this old, instead of
file_reserved_time_hours) and by size (``retention_bytes``: its oldest messages may go while it holds
more), and the largest body a send to it may carry (``max_message_bytes``, at most the store's
message_body_bytes_max; checked on the broker's send path). The commit log is shared: a segment is
deleted only when every topic with messages in it allows it (cleaner.py, topic_retention.py).

    {"topics": {"T": {"queue_count": 8, "space_policy": "refuse", "message_type": "fifo",
                    "settings": {"retention_hours": 2.0}}, ...},
     "deleted": {"U": 4096}}

(``space_policy`` written only when it is not ``evict``, ``message_type`` only when it is not
``mixed``, ``settings`` only when one is set.)

Each topic also has a *message type* (``MessageKind``, RocketMQ's topic attribute
``message.type``): the kind of message sends to it may carry (``normal``, ``fifo``, ``delay``,
``transaction``) or any (``mixed``, the default). The store only keeps it; the broker's send path
checks it (broker/produce/send_path.py).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import math
import os
import threading

from .. import checked
from ..io import FileIO, read_whole
from ..record import codec
from ..layout import TOPICS_FILE
from .types import StoreError

log = logging.getLogger("tidemq.store")


class SpacePolicy(str, enum.Enum):
    """What cleanup may do, when space is short, to messages of the topic that a subscribed group
    has not consumed: delete them (EVICT) or keep them and have writes refused (REFUSE)."""
    EVICT = "evict"
    REFUSE = "refuse"

    @classmethod
    def parse(cls, value) -> "SpacePolicy":
        """A policy from its name; ValueError naming the choices for anything else."""
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"space_policy is one of {', '.join(p.value for p in cls)} (got {value!r})") from None


class MessageKind(str, enum.Enum):
    """The messages a topic takes (RocketMQ's TopicMessageType): one kind, or every kind (MIXED)."""
    NORMAL = "normal"
    FIFO = "fifo"
    DELAY = "delay"
    TRANSACTION = "transaction"
    MIXED = "mixed"

    @classmethod
    def parse(cls, value) -> "MessageKind":
        """A kind from its name (any case); ValueError naming the choices for anything else."""
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ValueError(f"message_type is one of {', '.join(k.value for k in cls)} (got {value!r})") from None


@dataclasses.dataclass(frozen=True)
class TopicSettings:
    """A topic's own settings; None: the store's (file_reserved_time_hours, no size limit,
    message_body_bytes_max)."""
    retention_hours: float | None = None
    retention_bytes: int | None = None
    max_message_bytes: int | None = None

    NAMES = ("retention_hours", "retention_bytes", "max_message_bytes")
    BOUNDS = {"retention_hours": (0.0, 24 * 365 * 10.0), "retention_bytes": (0, 1 << 62),
              "max_message_bytes": (1, 128 * 1024 * 1024)}

    def changed(self, changes: dict, body_bytes_max: int | None = None) -> "TopicSettings":
        """A copy with ``changes`` (name -> a value, text like "2.5" or "1048576" too, or None / "" /
        "default": back to the store's); ValueError naming the setting, its type and bounds."""
        out = dataclasses.asdict(self)
        for name, v in changes.items():
            if name not in self.NAMES:
                raise ValueError(f"unknown topic setting {name!r}; the settings of a topic: "
                                 f"{', '.join(self.NAMES)}, space_policy")
            out[name] = _setting(name, v, body_bytes_max)
        return TopicSettings(**out)

    def document(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def _setting(name: str, v, body_bytes_max: int | None):
    if v is None or (isinstance(v, str) and v.strip().lower() in ("", "default", "none")):
        return None
    lo, hi = TopicSettings.BOUNDS[name]
    if name == "max_message_bytes" and body_bytes_max is not None:
        hi = body_bytes_max
    whole = name != "retention_hours"
    try:
        if isinstance(v, bool):
            raise ValueError
        x = float(v.replace("_", "")) if isinstance(v, str) else float(v)
        if whole and not x.is_integer():
            raise ValueError
    except (TypeError, ValueError, AttributeError):
        raise ValueError(f"{name}: {v!r} is not a {'whole ' if whole else ''}number") from None
    if not math.isfinite(x) or not lo <= x <= hi:
        raise ValueError(f"{name}: {v!r} is outside [{lo:g}, {hi:g}]"
                         + (" (message_body_bytes_max of the store)" if name == "max_message_bytes" else ""))
    return int(x) if whole else x


class TopicState:
    """In-memory state of one topic for the write path."""

    __slots__ = ("name", "name_bytes", "queue_count", "next_offsets", "queues", "rr", "tag_cache", "tail_prefix_crc",
                 "space_policy", "write_ids", "message_kind", "settings")

    def __init__(self, name: str, queue_count: int, space_policy: SpacePolicy = SpacePolicy.EVICT,
                 message_kind: MessageKind = MessageKind.MIXED) -> None:
        self.name = name
        self.space_policy = space_policy
        self.message_kind = message_kind
        self.settings = TopicSettings()
        self.name_bytes = name.encode("ascii")
        self.queue_count = queue_count
        self.next_offsets = [0] * queue_count   # next queue offset per queue id
        self.queues: list = [None] * queue_count  # ConsumeQueue per queue id (set by the store)
        self.rr = 0
        # the queues a put without a queue id goes to, round-robin: all of them, or (a topic spread over
        # several broker groups) the ones this store's group owns
        self.write_ids: range | tuple[int, ...] = range(queue_count)
        self.tag_cache: dict = {}   # tags -> (properties bytes, tags hash, tail CRC): the write path's cache
        self.tail_prefix_crc: dict = {}   # properties length -> codec.tail_prefix_crc (put_encoded's cache)


class TopicTable:
    def __init__(self, fio: FileIO, config_dir: str) -> None:
        self.fio = fio
        self.dir = config_dir
        self.path = os.path.join(config_dir, TOPICS_FILE)
        self.topics: dict[str, TopicState] = {}
        # deleted topics: name -> the log's end when it was deleted; its records before that offset
        # belong to the deleted topic (never dispatched again, never found), even once re-created
        self.deleted: dict[str, int] = {}
        self.body_limits: dict[str, int] = {}      # topic -> its max_message_bytes (only the topics with one)
        self.damaged = 0                           # damaged copies set aside at load (the previous version used)
        self._lock = threading.Lock()

    def load(self) -> None:
        self.fio.makedirs(self.dir)
        problems = []
        for candidate in (self.path, self.path + ".bak"):
            if not self.fio.exists(candidate):
                continue
            try:
                topics, deleted = parse(checked.decode(read_whole(self.fio, candidate)))
            except (ValueError, KeyError, TypeError, AttributeError) as e:    # (an OSError: raised)
                problems.append((candidate, f"{type(e).__name__}: {e}"))
                continue
            for bad, why in problems:          # never read again, kept for whoever looks
                try:
                    self.fio.rename(bad, bad + ".damaged")
                except OSError as e:
                    log.warning("%s could not be moved aside (%s)", bad, e)
            if problems:
                log.warning("topics: %s is damaged (%s); its previous version %s is used (the last change "
                            "before the damage is not in it)", problems[0][0], problems[0][1], candidate)
            elif candidate != self.path:
                log.info("topics: %s is missing, its previous version %s is used", self.path, candidate)
            self.damaged = len(problems)
            self.topics = topics
            self.deleted = deleted
            self.body_limits = {n: t.settings.max_message_bytes for n, t in topics.items()
                                if t.settings.max_message_bytes is not None}
            return
        if problems:
            raise StoreError(f"{self.path} is unreadable ({'; '.join(f'{p}: {w}' for p, w in problems)}); "
                             f"restore it or remove it (queues found on disk are added back)")

    def save(self) -> None:
        with self._lock:
            doc = {"topics": {n: _entry(t) for n, t in sorted(self.topics.items())}}
            if self.deleted:
                doc["deleted"] = dict(sorted(self.deleted.items()))
        checked.write_mirrored(self.fio, self.path, doc)     # its .bak: the version in effect too

    def delete(self, name: str, log_end: int) -> TopicState | None:
        """Forget a topic (None if unknown); its records before ``log_end`` stay dead. Saved before
        it returns (OSError: nothing changed)."""
        with self._lock:
            t = self.topics.pop(name, None)
            if t is None:
                return None
            was = self.deleted.get(name)
            self.deleted[name] = log_end
            self.body_limits.pop(name, None)
        try:
            self.save()
        except OSError:
            with self._lock:
                self.topics[name] = t
                if was is None:
                    self.deleted.pop(name, None)
                else:
                    self.deleted[name] = was
            raise
        return t

    def is_dead(self, topic: str, phys: int) -> bool:
        """Whether the record of ``topic`` at log offset ``phys`` belongs to a deleted topic."""
        return phys < self.deleted.get(topic, -1)

    def forget_deleted_before(self, log_min: int) -> None:
        """Deleted topics whose every record the cleaner has removed need no remembering."""
        if any(end <= log_min for end in self.deleted.values()):
            with self._lock:
                self.deleted = {n: end for n, end in self.deleted.items() if end > log_min}
            self.save()

    def set_settings(self, name: str, settings: TopicSettings) -> TopicSettings:
        """Replace a topic's settings, saved before it returns (KeyError: no such topic; OSError: not
        changed)."""
        with self._lock:
            t = self.topics[name]
            was, t.settings = t.settings, settings
        try:
            self.save()
        except OSError:
            t.settings = was
            raise
        self._limits()
        return settings

    def _limits(self) -> None:
        self.body_limits = {n: t.settings.max_message_bytes for n, t in list(self.topics.items())
                            if t.settings.max_message_bytes is not None}

    def with_settings(self) -> list[TopicState]:
        """The topics with a setting of their own."""
        return [t for t in list(self.topics.values()) if t.settings != _NONE]

    def get(self, name: str) -> TopicState | None:
        return self.topics.get(name)

    def refusing(self) -> list[TopicState]:
        """The topics whose space policy is REFUSE."""
        return [t for t in list(self.topics.values()) if t.space_policy is SpacePolicy.REFUSE]

    def create(self, name: str, queue_count: int, save: bool = True,
               space_policy: SpacePolicy | str | None = None,
               message_kind: MessageKind | str | None = None) -> TopicState:
        """Create a topic, grow its queue count, or set its space policy or message kind (None: a new
        topic's is EVICT / MIXED, an existing one's stays)."""
        problem = codec.topic_problem(name)
        if problem is not None:
            raise ValueError(problem)
        if queue_count < 1:
            raise ValueError("a topic needs at least one queue")
        policy = SpacePolicy.parse(space_policy) if space_policy is not None else None
        kind = MessageKind.parse(message_kind) if message_kind is not None else None
        changed = False
        with self._lock:
            t = self.topics.get(name)
            was = None if t is None else t.queue_count
            was_policy = None if t is None else t.space_policy
            was_kind = None if t is None else t.message_kind
            if t is None:
                t = self.topics[name] = TopicState(name, queue_count, policy or SpacePolicy.EVICT,
                                                   kind or MessageKind.MIXED)
                changed = True
            else:
                if queue_count > t.queue_count:
                    grow = queue_count - t.queue_count
                    t.next_offsets.extend([0] * grow)
                    t.queues.extend([None] * grow)
                    t.queue_count = queue_count
                    if isinstance(t.write_ids, range):
                        t.write_ids = range(queue_count)
                    changed = True
                if policy is not None and policy is not t.space_policy:
                    t.space_policy = policy
                    changed = True
                if kind is not None and kind is not t.message_kind:
                    t.message_kind = kind
                    changed = True
        if save and changed:
            try:
                self.save()
            except OSError:
                # not saved: not created (nor grown), so nobody puts into queues that were never bound
                with self._lock:
                    if was is None:
                        self.topics.pop(name, None)
                    else:
                        del t.next_offsets[was:], t.queues[was:]
                        t.queue_count = was
                        t.space_policy = was_policy
                        t.message_kind = was_kind
                        if isinstance(t.write_ids, range):
                            t.write_ids = range(was)
                raise
        return t


_NONE = TopicSettings()
QUEUES_MAX = 65_536          # the most queues a topic may have (StoreConfig.topic_queues_max's upper bound)


def parse(doc) -> tuple[dict[str, TopicState], dict[str, int]]:
    """The topics and deleted topics a document holds; raises (ValueError, KeyError, TypeError) on
    anything else, before anything is kept: a queue count outside [1, QUEUES_MAX], a negative end."""
    topics: dict[str, TopicState] = {}
    for name, t in doc.get("topics", {}).items():
        n = t["queue_count"]
        if type(n) is not int or not 1 <= n <= QUEUES_MAX:
            raise ValueError(f"topic {name!r}: queue_count {n!r} is not a count of queues")
        problem = codec.topic_problem(name)
        if problem is not None:
            raise ValueError(problem)
        ts = topics[name] = TopicState(name, n, SpacePolicy.parse(t.get("space_policy", SpacePolicy.EVICT.value)),
                                       MessageKind.parse(t.get("message_type", MessageKind.MIXED.value)))
        ts.settings = TopicSettings().changed(t.get("settings", {}))
    deleted = {}
    for name, end in doc.get("deleted", {}).items():
        if type(end) is not int or end < 0:
            raise ValueError(f"deleted topic {name!r}: {end!r} is not a log offset")
        deleted[str(name)] = end
    return topics, deleted


def _entry(t: TopicState) -> dict:
    """A topic's entry in topics.json."""
    out: dict = {"queue_count": t.queue_count}
    if t.space_policy is not SpacePolicy.EVICT:
        out["space_policy"] = t.space_policy.value
    if t.message_kind is not MessageKind.MIXED:
        out["message_type"] = t.message_kind.value
    if t.settings != _NONE:
        out["settings"] = t.settings.document()
    return out
