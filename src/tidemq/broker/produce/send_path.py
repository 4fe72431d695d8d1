"""What every send goes through, whatever its wire format (SendMessage in send_message.py,
SendRecords in send_records.py):

* flow control first (protection/flow.SendGate: the connection's in-flight bounds, then resource
  alarms and the flush backlog, holding the send within its deadline): ``gated``;
* topic checks: a valid name, not a system topic, known or auto-created: ``topic_check``;
* the dedup window (dedup.py): (topic, message id) of recent stores, so that a resend after
  a timeout is answered with the first store's offset instead of being stored twice, and
  flagged as a duplicate (the SendRecords frame's ``duplicates``, SendMessage's
  ``tidemq-duplicates`` trailer: protocol/data.py), with the text DUPLICATE for people:
  ``seen`` / ``remember`` (a batch by its dedup keys: ``seen_keys`` / ``remember_keys``); a
  resend of a message appended but not confirmed (FLUSH_*_TIMEOUT) is
  never appended again: ``remember_unconfirmed``, ``Unconfirmed``;
* the put (on a thread under SYNC_FLUSH or SYNC replication, inline otherwise) and the store outcome as a
  protocol status code: ``put_batch`` / ``put_one`` / ``put_slices``, ``put_code``;
* waking long-polling consumers and the timer after a store: ``stored``;
* what each message was answered, counted by topic and status (observe/outcomes.py, the
  metric tidemq_messages_put_total): ``answered``.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Awaitable, Callable, TypeVar

from ...config import BrokerConfig
from ...protocol.stubs import Code
from ...store import MessageStore, PutReason, PutStatus, StoreNotRunning
from ...record.codec import PROP_UNIQ_KEY, topic_problem
from ..observe.outcomes import DUPLICATE as DUPLICATE_STATUS
from ..observe.outcomes import Outcomes
from ..protection.flow import SendGate
from ..topic_names import SYSTEM_TOPICS
from .dedup import KEY_BYTES, DedupWindow

T = TypeVar("T")
DUPLICATE = "duplicate: already stored"
UNCONFIRMED_MAX = 10_000        # appended sends not yet confirmed (disk, followers) remembered for their resends
SENDABLE_MAX = 4096             # topic names remembered as valid by topic_check (its fast path)
# what an appended-but-unconfirmed put answered: its resend is not stored again (below)
APPENDED = (PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT)


class Unconfirmed(tuple):
    """``seen``'s answer for a resend of a message that is in the log but not yet where its
    acknowledgement needs it (on disk, on enough followers): (code, text) to answer again; it is
    never stored a second time."""


_RESOURCE_REFUSALS = frozenset((PutReason.DISK_FULL, PutReason.ARCHIVE_PENDING, PutReason.UNCONSUMED_BACKLOG))


def put_code(st: PutStatus, reason: PutReason | None) -> int:
    """A store outcome (PutResult.status, PutResult.reason) as a gRPC status code (how the
    official clients react: see the doc)."""
    if st is PutStatus.PUT_OK:
        return Code.OK
    if st is PutStatus.FLUSH_DISK_TIMEOUT:
        return Code.MASTER_PERSISTENCE_TIMEOUT
    if st is PutStatus.FLUSH_SLAVE_TIMEOUT:            # appended; the followers did not confirm in time
        return Code.SLAVE_PERSISTENCE_TIMEOUT
    if st is PutStatus.SLAVE_NOT_AVAILABLE:            # too few followers in sync (RocketMQ SLAVE_NOT_AVAILABLE)
        return Code.HA_NOT_AVAILABLE
    if reason is PutReason.NOT_LEADER:                 # a follower: the text names the leader
        return Code.FORBIDDEN
    # a full disk (or space kept for consumers' backlog) is a resource refusal: TOO_MANY_REQUESTS is
    # the one code the client does not retry at once; the store not running, write and dispatch
    # errors are internal (retried)
    if reason in _RESOURCE_REFUSALS:
        return Code.TOO_MANY_REQUESTS
    if reason is PutReason.BODY_TOO_LARGE:
        return Code.MESSAGE_BODY_TOO_LARGE
    if reason is PutReason.INVALID_TOPIC:
        return Code.ILLEGAL_TOPIC
    if reason is PutReason.PROPERTIES_TOO_LARGE or st is PutStatus.PROPERTIES_SIZE_EXCEEDED:
        return Code.MESSAGE_PROPERTIES_TOO_LARGE
    if reason is PutReason.TOPIC_NOT_FOUND or st is PutStatus.TOPIC_NOT_FOUND:
        return Code.TOPIC_NOT_FOUND
    if st is PutStatus.MESSAGE_ILLEGAL:       # bad body, queue id, property, field; record too large
        return Code.BAD_REQUEST
    return Code.INTERNAL_SERVER_ERROR


class SendPath:
    def __init__(self, store: MessageStore, config: BrokerConfig, gate: SendGate, puts: ThreadPoolExecutor,
                 on_stored: Callable[..., None]) -> None:
        self.store = store
        self.config = config
        self.gate = gate
        self._puts = puts
        self.in_thread = store.config.sync_flush          # puts that wait (a flush, followers) run on a thread
        self.auto_create = store.config.auto_create_topics  # off on a follower: topics are the leader's
        self.spread = None           # topic -> (queues, owned here) of a topic spread over broker groups, or None
        self._on_stored = on_stored
        self.recent = DedupWindow(config.send_dedup_window_entries)
        # after a start the window is empty: until then, ids it does not know are looked up in the
        # index (durable, rebuilt by recovery) among messages stored from ``_index_from_ms`` on
        span_s = config.send_dedup_after_restart_s if config.send_dedup_window_entries else 0.0
        if store.commitlog_max_offset == store.commitlog_min_offset:
            span_s = 0.0             # nothing was stored before this start: nothing to look up
        self._index_until_s = time.monotonic() + span_s
        self._index_from_ms = store.clock.now_ms() - int(span_s * 1000)
        self.latency = None          # observe/latency.LatencyBuckets of the puts, once the broker observes
        # the dedup key of (topic, message id) -> (queue offset, txn, log end) of puts answered
        # FLUSH_*_TIMEOUT: appended, so a resend must not append again; answered OK once the store
        # confirms the end
        self.unconfirmed: dict[bytes, tuple[int, str, int]] = {}
        self.outcomes = Outcomes(self._queue_count)     # messages by topic and the status they were answered
        self._sendable: set[str] = set()       # topic names topic_check found valid (at most SENDABLE_MAX)

    def _queue_count(self, topic: str) -> int:
        try:
            return self.store.queue_count(topic)
        except StoreNotRunning:
            return 0

    def answered(self, topics, codes: list[int], duplicates=()) -> None:
        """Count the answers to one request's messages: ``topics`` one per message (or one topic
        for all), ``codes`` one per message, ``duplicates`` the indexes answered from the dedup
        window (counted as DUPLICATE, not OK)."""
        out = self.outcomes
        if isinstance(topics, str) and not duplicates and len(set(codes)) == 1:
            out.add_code(topics, codes[0], len(codes))      # the common case: one update
            return
        dup = set(duplicates)
        for i, c in enumerate(codes):
            t = topics if isinstance(topics, str) else topics[i]
            if i in dup:
                out.add(t, DUPLICATE_STATUS)
            else:
                out.add_code(t, c)

    # flow control ---------------------------------------------------------------------------
    async def gated(self, context, nbytes: int, send: Callable[[], Awaitable[T]]) -> tuple[str | None, T | None]:
        """(None, what ``send`` returned) once the gate lets the send through, or (the refusal,
        None): TOO_MANY_REQUESTS for the caller to answer for every message."""
        peer = context.peer()
        refusal = self.gate.enter(peer, nbytes)
        if refusal is not None:
            return refusal, None
        try:
            if self.gate.blocked() is not None:          # rare: the common path makes no wait
                refusal = await self.gate.hold(context.time_remaining())
                if refusal is not None:
                    return refusal, None
            return None, await send()
        finally:
            self.gate.leave(peer, nbytes)

    # topics -----------------------------------------------------------------------------------
    def ensure_topic(self, name: str) -> int:
        """Queue count of the topic (0: unknown); ValueError for a name that can never be a topic."""
        problem = topic_problem(name)
        if problem is not None:
            raise ValueError(problem)
        if name in SYSTEM_TOPICS:
            raise ValueError(f"{name!r} is a system topic of the broker")
        n = self.store.queue_count(name)
        spread = self.spread(name) if self.spread is not None else None
        if spread is not None and spread[1] and (n < spread[0] or set(self.store.write_queues(name)) != set(spread[1])):
            # a topic spread over broker groups, not made here yet: made now as the cluster says (never
            # auto-created with other queues, whose messages no route would find)
            self.store.create_spread_topic(name, spread[0], spread[1])
            return self.store.queue_count(name)
        if n == 0 and self.auto_create:
            self.store.create_topic(name)
            n = self.store.queue_count(name)
        return n

    def topic_check(self, name: str) -> tuple[int, int, str]:
        """(queue count, Code.OK, "") for a topic messages can be sent to, else (0, code, why)."""
        if name in self._sendable and self.spread is None:          # the common case: checked before
            n = self.store.queue_count(name)
            if n:
                return n, Code.OK, ""
        try:
            n = self.ensure_topic(name)
        except ValueError as e:
            return 0, Code.ILLEGAL_TOPIC, str(e)
        if n == 0:
            return 0, Code.TOPIC_NOT_FOUND, f"topic {name!r} does not exist"
        if len(self._sendable) < SENDABLE_MAX:
            self._sendable.add(name)           # a valid name, not a system topic: known from now on
        return n, Code.OK, ""

    # dedup window ---------------------------------------------------------------------------
    def seen(self, topic: str, message_id: str) -> tuple[int, str] | Unconfirmed | None:
        """(queue offset, transaction id) of a recent store of this message id, Unconfirmed for a
        resend of one stored but not confirmed yet, or None."""
        if not message_id:
            return None
        key = self.recent.key(topic, message_id)
        if self.unconfirmed and key in self.unconfirmed:
            return self._unconfirmed(key)
        earlier = self.recent.get_key(key)
        if earlier is None and self._index_until_s and time.monotonic() < self._index_until_s:
            earlier = self._stored_before_start(topic, message_id)
        return earlier

    def seen_keys(self, topic: str, keys, message_id: Callable[[int], str]) -> dict[int, tuple[int, str] | Unconfirmed]:
        """``seen`` of a batch by its dedup keys (``keys``: dedup.KEY_BYTES each, zero: no usable id;
        ``message_id(i)``: message i's id, asked only on the rare paths): {index: (queue offset,
        transaction id), or Unconfirmed}."""
        found = self.recent.find_keys(keys)
        n = len(keys) // KEY_BYTES
        if self.unconfirmed:
            u = self.unconfirmed
            for i in range(n):
                k = bytes(keys[KEY_BYTES * i:KEY_BYTES * (i + 1)])
                if k in u:
                    found[i] = self._unconfirmed(k)
        if self._index_until_s and time.monotonic() < self._index_until_s:
            for i in range(n):
                if i not in found and any(keys[KEY_BYTES * i:KEY_BYTES * (i + 1)]):
                    earlier = self._stored_before_start(topic, message_id(i))
                    if earlier is not None:
                        found[i] = earlier
        return found

    def _unconfirmed(self, key: bytes) -> tuple[int, str] | Unconfirmed:
        """A resend of a message appended but answered FLUSH_*_TIMEOUT: Unconfirmed while the store
        still does not confirm it, else (queue offset, transaction id), moved to the window."""
        offset, txn, end = self.unconfirmed[key]
        why = self.store.confirm(end)
        if why is not None:
            return Unconfirmed((put_code(why.status, why), f"stored, not yet confirmed ({why.name})"))
        del self.unconfirmed[key]
        self.recent.put_key(key, offset, txn)
        return offset, txn

    def _stored_before_start(self, topic: str, message_id: str) -> tuple[int, str] | None:
        """A message of this id stored shortly before the broker started (the index has its
        UNIQ_KEY), remembered in the window; None when there is none (or no index)."""
        if self.store.index is None:
            return None
        found = [m for m in self.store.query_by_key(topic, message_id, 4, self._index_from_ms)
                 if m.properties.get(PROP_UNIQ_KEY) == message_id]      # its id, not a key of another
        if not found:
            return None
        offset = found[0].queue_offset
        self.recent.put(topic, message_id, offset)
        return offset, ""

    def remember(self, topic: str, message_id: str, offset: int, txn: str = "") -> None:
        self.recent.put(topic, message_id, offset, txn)

    def remember_unconfirmed(self, topic: str, message_id: str, status: PutStatus, queue_offset: int, end: int,
                             txn: str = "") -> None:
        """A put that was appended (its record ends at log offset ``end``) but answered
        FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT (``status``): its resend is answered from here
        (OK once confirmed), never appended a second time."""
        if not message_id or status not in APPENDED:
            return
        if len(self.unconfirmed) >= UNCONFIRMED_MAX:
            self.unconfirmed.pop(next(iter(self.unconfirmed)))
        self.unconfirmed[self.recent.key(topic, message_id)] = (queue_offset, txn, end)

    def remember_keys(self, keys, offsets, stored) -> None:
        """Messages just stored, by their dedup keys: ``offsets`` their queue offsets, ``stored`` a
        bool array of the ones stored (their ids usable)."""
        self.recent.put_keys(keys, offsets, stored)

    # the put ------------------------------------------------------------------------------------
    async def put_batch(self, msgs, defer_dispatch: bool = False):
        """The put; ``defer_dispatch`` (honoured for an inline put, not ``in_thread``): the
        consume-queue units and index entries are written after the answer leaves (the next loop
        round, or before anything reads or puts: store/put_lock.py), as RocketMQ dispatches."""
        began = time.perf_counter()
        if self.in_thread:
            out = await asyncio.get_running_loop().run_in_executor(self._puts, self.store.put_batch, msgs)
        elif defer_dispatch:
            out = self.store.put_batch(msgs, defer_dispatch=True)
            asyncio.get_running_loop().call_soon(self.store.drain_dispatch)
        else:
            out = self.store.put_batch(msgs)     # microseconds: no thread hop
        if self.latency is not None:
            self.latency.observe(time.perf_counter() - began)
        return out

    def put_one(self, topic: str, entry: tuple, born_ms: int | None, born_host: str | None, sys_flag: int):
        """An inline put (not ``in_thread``) of one message with its properties encoded
        (MessageStore.put_encoded), its dispatch after the answer (``put_batch``'s defer_dispatch)."""
        began = time.perf_counter()
        out = self.store.put_encoded(topic, (entry,), born_ms, born_host, sys_flag, defer_dispatch=True)
        asyncio.get_running_loop().call_soon(self.store.drain_dispatch)
        if self.latency is not None:
            self.latency.observe(time.perf_counter() - began)
        return out

    async def put_slices(self, topic: str, *args):
        began = time.perf_counter()
        if self.in_thread:
            out = await asyncio.get_running_loop().run_in_executor(self._puts, self.store.put_slices, topic, *args)
        else:
            out = self.store.put_slices(topic, *args)
        if self.latency is not None:
            self.latency.observe(time.perf_counter() - began)
        return out

    def stored(self, parked: bool = False) -> None:
        """Something was stored: long-polling receives wake up, and the timer when a delayed
        message was parked (``parked``)."""
        self._on_stored(parked)
