"""Consumer-group settings (RocketMQ's SubscriptionGroupConfig): per group its retry policy,
how many retries before the dead-letter queue, whether it consumes in order, whether it may
consume at all; and where they are kept.

**Settings.** ``retry_max`` (retries after the first delivery: a message is delivered at most
``retry_max + 1`` times, then moved to ``%DLQ%<group>``, RocketMQ's rule; Telemetry tells the
clients ``max_attempts = retry_max + 1``), ``retry_policy`` (what Telemetry sends as the backoff
of a failed consumption: ``exponential`` with initial, max and multiplier, or ``customized`` with
one delay per retry), ``orderly`` (consumeMessageOrderly: the group consumes in order, receive.py),
``consume_enable`` (false: ReceiveMessage and PullMessage of the group are refused, FORBIDDEN,
what RocketMQ's consumeEnable=false does).

**Defaults.** A group without settings (never created, or deleted) gets the broker's: retry_max
``delivery_attempts_max - 1``, the customized policy DEFAULT_BACKOFF_S, orderly when it is in
``fifo_consumer_groups``, consumption enabled. A created group keeps every field it was not given
at these defaults, taken when it is created.

**Where they are kept.** One checked document (tidemq/checked.py: CRC, the previous version kept as
``.bak``) in the broker's state, ``<root>/broker/groups.json``, copied to followers with the rest of
the broker's state (replication/state.py)::

    {"version": 1, "groups": {NAME: {"retry_max": int, "orderly": bool, "consume_enable": bool,
       "retry_policy": {"kind": "exponential", "initial_ms": int, "max_ms": int, "multiplier": float}
                     | {"kind": "customized", "delays_ms": [int, ...] (whole seconds)}}}}

A change is written before it is answered and is in effect for the next call; the table in memory
is replaced whole, so a reader never sees half a change.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import replace

from ... import checked
from ...io import FileIO

from ...protocol.group_settings import (
    DEFAULT_POLICY, GROUPS_FILE, VERSION, GROUPS_MAX, GroupSettings, load_doc
)

log = logging.getLogger("tidemq.broker")


class GroupTable:
    """The groups' settings in ``<state dir>/groups.json``; ``settings(group)`` what applies to a
    group (its own, or the broker's defaults)."""

    def __init__(self, fio: FileIO, state_dir: str, delivery_attempts_max: int = 16,
                 fifo_groups=()) -> None:
        self.fio = fio
        self.dir = state_dir
        self.path = os.path.join(state_dir, GROUPS_FILE)
        self.fifo_groups = frozenset(fifo_groups)
        self.default_retry_max = max(0, delivery_attempts_max - 1)
        self.groups: dict[str, GroupSettings] = {}      # replaced whole, never changed in place
        self._lock = threading.Lock()

    def load(self) -> "GroupTable":
        loaded = checked.load(self.fio, self.path, "consumer-group settings", check=load_doc)
        if loaded.doc is not None:
            self.groups = load_doc(loaded.doc)
        return self

    def defaults(self, group: str) -> GroupSettings:
        return GroupSettings(self.default_retry_max, DEFAULT_POLICY, group in self.fifo_groups, True)

    def settings(self, group: str) -> GroupSettings:
        s = self.groups.get(group)
        return s if s is not None else self.defaults(group)

    def orderly(self, group: str) -> bool:
        s = self.groups.get(group)
        return s.orderly if s is not None else group in self.fifo_groups

    def attempts_max(self, group: str) -> int:
        s = self.groups.get(group)
        return (s.retry_max if s is not None else self.default_retry_max) + 1

    def document(self) -> dict:
        return {"version": VERSION, "groups": {n: s.document() for n, s in sorted(self.groups.items())}}

    def _write(self, groups: dict[str, GroupSettings]) -> None:
        self.fio.makedirs(self.dir)
        doc = {"version": VERSION, "groups": {n: s.document() for n, s in sorted(groups.items())}}
        checked.write(self.fio, self.path, doc)
        self.groups = groups

    def create(self, group: str, changes: dict) -> GroupSettings:
        """KeyError when it exists."""
        with self._lock:
            if group in self.groups:
                raise KeyError(group)
            if len(self.groups) >= GROUPS_MAX:
                raise OverflowError(f"at most {GROUPS_MAX} groups have settings")
            s = replace(self.defaults(group), **changes)
            self._write({**self.groups, group: s})
        log.info("consumer group %s created: %s", group, s.document())
        return s

    def update(self, group: str, changes: dict) -> GroupSettings:
        """KeyError when it does not exist."""
        with self._lock:
            s = replace(self.groups[group], **changes)
            self._write({**self.groups, group: s})
        log.info("consumer group %s updated: %s", group, s.document())
        return s

    def delete(self, group: str) -> None:
        """KeyError when it does not exist."""
        with self._lock:
            if group not in self.groups:
                raise KeyError(group)
            self._write({n: s for n, s in self.groups.items() if n != group})
        log.info("consumer group %s deleted (back to the broker's defaults)", group)

    def replace(self, doc: dict, rewrite: bool = False) -> None:
        """The whole table from a leader's document (checked: ValueError), written, in effect at once
        (``rewrite``: written even when it is the table in effect: its file is gone)."""
        groups = load_doc(doc)
        with self._lock:
            if rewrite or groups != self.groups:
                self._write(groups)


def _duration(ms: int):
    from google.protobuf import duration_pb2
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def retry_policy_pb(s: GroupSettings):
    """The backoff Telemetry sends a consumer of a group with settings ``s`` (apache.rocketmq.v2.RetryPolicy):
    max_attempts = retry_max + 1 and the group's policy."""
    from ...protocol.stubs import pb
    p = s.retry_policy
    if p.kind == "exponential":
        return pb.RetryPolicy(max_attempts=s.attempts_max, exponential_backoff=pb.ExponentialBackoff(
            initial=_duration(p.initial_ms), max=_duration(p.max_ms), multiplier=p.multiplier))
    return pb.RetryPolicy(max_attempts=s.attempts_max,
                          customized_backoff=pb.CustomizedBackoff(next=[_duration(d) for d in p.delays_ms]))
