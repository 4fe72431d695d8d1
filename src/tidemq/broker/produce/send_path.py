"""The one way a send goes, whatever its wire format: ``SendPath.send(batch, caller) -> Verdicts``.

The lanes (send_message.py: SendMessage; send_records.py: SendRecords frames) only parse their
wire format into a SendBatch (batch.py) and encode the verdicts back. Here, once each, in order:

0. **who** (with authentication on: protection/access.py, acl.py): the caller's user must be allowed
   ``pub`` on each topic, once per topic; a message to a topic it may not publish to is answered
   FORBIDDEN naming the user, the action and the topic (before anything else: a topic's existence
   is not revealed, nor auto-created, for someone who may not publish to it);
1. **gate**: the produce quotas of the caller's user, client id and topics (protection/quotas.py:
   past their bound refused TOO_MANY_REQUESTS, else the answer delayed by their debt); then
   (protection/flow.SendGate) the connection's in-flight bounds, then resource alarms and
   the flush backlog, holding the send within its deadline; refused there, every message is
   answered TOO_MANY_REQUESTS with the reason (HELD);
2. **checks**: an empty body (MESSAGE_BODY_EMPTY); the topic, once per topic: a valid name, not a
   system topic, known or auto-created (``topic_check``); the message's type against the topic's
   (``tidemq topic create --message-type``: RocketMQ's proxy check, MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
   when a topic of one kind is sent another); a LITE message's lite topic (ILLEGAL_LITE_TOPIC), a
   PRIORITY message's priority;
3. **dedup** (resends.py): a resend of a message stored before is answered with its first store's
   offset (DUPLICATE, code OK), one appended but not confirmed is answered its code again and never
   appended twice;
4. **route** (SendMessage's Messages only): a FIFO message to the queue its message group hashes
   to, a DELAY message due later parked in the schedule topic (answered with its recall handle,
   deferred/recall.py), a TRANSACTION message in the half topic (deferred/);
5. **put** (MessageStore.put_batch / put_encoded / put_slices, by payload; on a thread when puts
   may wait for followers, appended inline with the fsync awaited on the loop under SYNC_FLUSH,
   inline otherwise: broker/puts.py), each message's outcome as a verdict (``put_code``);
6. **remember** what was stored (the dedup window; the appended-but-unconfirmed), wake long-polling
   consumers and the timer;
7. **count** what each message was answered, by topic and code (observe/outcomes.py: the metric
   tidemq_messages_put_total; duplicates as DUPLICATE).

The store validates every record itself (store/validate.py): what a lane did not refuse and the
store does comes back as a verdict with the store's reason.

``SendPath.send_one`` is the same steps for SendMessage's common request (one message read by the
compiled lane) where each finds what almost every send finds, in one pass with no per-call objects;
anywhere else it declines before any effect and the lane calls ``send`` (tests/broker/produce/
test_send_path.py holds the two to the same answers, stores and counts).
"""

from __future__ import annotations

import asyncio
import re
from typing import Callable

import numpy as np

from ...config import BrokerConfig
from ...protocol.stubs import Code, MessageType, pb
from ...record.codec import topic_problem
from ...store import MessageStore, PutReason, PutStatus, StoreNotRunning, StoreState
from ...store.topics import MessageKind
from ..deferred import recall
from ..deferred.parking import PROP_DELIVER_MS, park
from ..observe.outcomes import DUPLICATE as DUPLICATE_STATUS
from ..observe.outcomes import OK as OK_STATUS
from ..observe.outcomes import Outcomes
from ..protection.flow import SendGate
from ..puts import PutsClosed, StorePuts
from ..topic_names import SCHEDULE_TOPIC, SYSTEM_TOPICS
from ..wire import PROP_LITE_TOPIC, PROP_PRIORITY, fifo_queue, priority_of
from .batch import DUPLICATE as DUPLICATE_VERDICT
from .batch import HELD, OPEN, REFUSED, STORED, Caller, Encoded, Messages, SendBatch, Slices, Verdicts
from .dedup import key_at
from .resends import Resends, Unconfirmed

DUPLICATE_TEXT = "duplicate: already stored"
SENDABLE_MAX = 4096             # topic names remembered as valid by topic_check (its fast path)

_RESOURCE_REFUSALS = frozenset((PutReason.DISK_FULL, PutReason.ARCHIVE_PENDING, PutReason.UNCONSUMED_BACKLOG))

MIXED = "mixed"
_ONE_KINDS = (MessageKind.NORMAL, MessageKind.MIXED)     # the topics send_one takes
# a message's protocol type -> the topic message type (store/topics.MessageKind) that takes it besides
# MIXED; LITE and PRIORITY messages go to MIXED topics only
_KIND_OF = {MessageType.MESSAGE_TYPE_UNSPECIFIED: "normal", MessageType.NORMAL: "normal",
            MessageType.FIFO: "fifo", MessageType.DELAY: "delay", MessageType.TRANSACTION: "transaction"}
LITE_TOPIC_RE = re.compile(r"[%|a-zA-Z0-9_-]+")


def kind_problem(topic_kind: str | None, mtype: int) -> str | None:
    """Why a topic of ``topic_kind`` does not take a message of protocol type ``mtype`` (RocketMQ's
    DefaultTopicMessageTypeValidator, in its words), or None."""
    if topic_kind is None or topic_kind == MIXED or _KIND_OF.get(mtype) == topic_kind:
        return None
    try:
        name = MessageType_name(mtype)
    except ValueError:
        name = str(mtype)
    return (f"TopicMessageType validate failed, the expected type is {topic_kind.upper()}, "
            f"but actual type is {name}")


def lite_topic_problem(name: str | None, size_max: int) -> str | None:
    """Why ``name`` cannot be a lite topic (ILLEGAL_LITE_TOPIC), or None."""
    if not name or len(name) > size_max or LITE_TOPIC_RE.fullmatch(name) is None:
        return (f"invalid lite topic {name!r}: use 1-{size_max} characters of [%|a-zA-Z0-9_-] "
                f"(lite_topic_bytes_max)")
    return None


MessageType_name = pb.MessageType.Name


def put_code(st: PutStatus, reason: PutReason | None) -> int:
    """A store outcome (PutResult.status, PutResult.reason) as a gRPC status code (how the
    official clients react: see docs/broker-protocol.md)."""
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
    def __init__(self, store: MessageStore, config: BrokerConfig, gate: SendGate, puts: StorePuts,
                 on_stored: Callable[[bool], None], timer=None, transactions=None) -> None:
        """``on_stored(parked)``: something was stored (long polls wake up; ``parked``: a delayed
        message went to the schedule topic, the timer wakes up); ``timer`` / ``transactions``
        (deferred/): their bounds and the half topic, for routing DELAY and TRANSACTION messages."""
        self.store = store
        self.config = config
        self.gate = gate
        self.puts = puts
        self.timer = timer
        self.transactions = transactions
        self.auto_create = store.config.auto_create_topics  # off on a follower: topics are the leader's
        self.spread = None           # topic -> (queues, owned here) of a topic spread over broker groups, or None
        self._on_stored = on_stored
        self.resends = Resends(store, config)
        self.outcomes = Outcomes(self._queue_count)     # messages by topic and the code they were answered
        self._sendable: set[str] = set()       # topic names topic_check found valid (at most SENDABLE_MAX)
        self.acl = None              # protection/acl.Acl with authentication on: pub checked per topic (step 0)
        self.quotas = None           # protection/quotas.Quotas: produce byte rates, in the gate step (step 1)
        self.on_forbidden = None     # (user, peer, topic, text) -> None: a refusal counted and logged
        self.on_priority = None      # (topic) -> None: a PRIORITY message is sent to it (consume/select.py)

    def _queue_count(self, topic: str) -> int:
        try:
            return self.store.queue_count(topic)
        except StoreNotRunning:
            return 0

    # the path ---------------------------------------------------------------------------------
    async def send(self, batch: SendBatch, caller: Caller) -> Verdicts:
        """Every message of ``batch`` through the steps above: one verdict each. A put that waits for
        nothing (ASYNC_FLUSH, no SYNC followers) runs inline with no coroutine in between
        (StorePuts.now), its dispatch left for after the answer (StorePuts.dispatch_later)."""
        v = Verdicts(batch.n)
        if batch.refused:
            for i, (code, text) in batch.refused.items():
                v.refuse(i, code, text)
        if self.acl is not None and not self._authorize(batch, v, caller):
            self._count(batch, v)
            return v
        delay_s = 0.0
        q = self.quotas
        if q is not None and q.limits:              # quotas (protection/quotas.py): past the bound, refused
            ents = q.applying("produce", caller.user, caller.client_id,
                              (batch.topic,) if batch.topic is not None else set(batch.topics))
            qv = q.charge("produce", ents, batch.nbytes, refuse=True)
            if qv.refused is not None:
                v.refuse_all(Code.TOO_MANY_REQUESTS, qv.refused)
                self._count(batch, v)
                return v
            delay_s = qv.delay_s
        gate, peer, nbytes = self.gate, caller.peer, batch.nbytes
        refusal = gate.enter(peer, nbytes)
        kind = REFUSED
        if refusal is None:
            try:
                if gate.blocked() is not None:          # rare: the common path makes no wait
                    refusal = await gate.hold(caller.time_remaining())
                    kind = HELD
                if refusal is None:
                    self._check(batch, v)
                    if v.decided < v.n:
                        keys = batch.keys if batch.keys is not None else self._keys(batch)
                        self._dedup(batch, v, keys)
                        parked, halves = False, ()
                        if type(batch.payload) is Messages:
                            parked, halves = self._route(batch.payload, v, caller)
                        if v.decided < v.n:
                            await self._put(batch, v, keys, halves, parked)
                            if parked:
                                self._recall_handles(batch, v)
            finally:
                gate.leave(peer, nbytes)
        if refusal is not None:
            v.refuse_all(Code.TOO_MANY_REQUESTS, refusal, kind)
        self._count(batch, v)
        if delay_s > 0:                              # over its quota: the answer waits (Kafka's throttle)
            left = caller.time_remaining()
            await asyncio.sleep(delay_s if left is None else max(0.0, min(delay_s, left - 0.25)))
        return v

    def send_one(self, topic: str, entry: tuple, mid: str, key: bytes, born_ms: int | None, born_host: str | None,
                 sys_flag: int, peer: str) -> "int | Verdicts | None":
        """``send`` of the lane's common request (one message read by tidemq._accel.send_one: an
        Encoded payload of one entry, ``key`` its dedup key), taking the steps above in the same
        order with no SendBatch, Verdicts or step call where every step finds what almost every send
        finds: no authentication, no quota limit, the connection within its bounds and nothing
        holding sends, a body, a topic sent to before of a kind that takes NORMAL and a body within
        its own limit (max_message_bytes), no earlier store of the id, a put that waits for nothing
        (ASYNC_FLUSH, no SYNC followers). Answers the queue offset the message was stored at; the Verdicts ``send``
        answers where the connection's bound refused it or the store refused the put; None, having
        done nothing, where a step would find anything else: the caller sends it through ``send``.
        tests/broker/produce/test_send_path.py holds it to ``send`` case by case."""
        if not entry[0] or self.acl is not None or topic not in self._sendable or self.spread is not None:
            return None
        q = self.quotas
        if q is not None and q.limits:
            return None
        store = self.store
        if store.puts_may_wait or not self.puts.leading:     # (a follower's service: send says what it may)
            return None
        nbytes = len(entry[0])
        topics = store.topics
        limits = topics.body_limits
        if limits and nbytes > limits.get(topic, nbytes):     # the topic's own max_message_bytes: refused
            return None
        # store.message_type and store.queue_count in one look-up (a store not running: send's way)
        t = topics.topics.get(topic)
        if (t is None or not t.queue_count or t.message_kind not in _ONE_KINDS
                or store.state is not StoreState.RUNNING):
            return None                 # (no such topic any more: topic_check's way)
        gate = self.gate
        if gate.blocked() is not None:
            return None
        resends = self.resends
        if not resends.surely_new(key):
            return None
        refusal = gate.enter(peer, nbytes)
        if refusal is not None:         # the connection at its bound (counted there): refused, as send does
            v = Verdicts(1)
            v.refuse_all(Code.TOO_MANY_REQUESTS, refusal, REFUSED)
            self.outcomes.add_code(topic, Code.TOO_MANY_REQUESTS)
            return v
        try:
            r = self.puts.one(topic, entry, born_ms, born_host, sys_flag)     # (the store's compiled put)
            self.puts.dispatch_later()
            if type(r) is tuple:
                off, phys = r
            elif r.status is PutStatus.PUT_OK and not r.refused and r.size[0] > 0:
                off, phys = int(r.qoff[0]), int(r.phys[0])
            else:
                off = None
            if off is not None:
                resends.window.put_key(key, off, phys)
                self._on_stored(False)
                self.outcomes.add_known(topic, OK_STATUS)         # (its queues seen above)
                return off
            # refused by the store: the verdict as send makes it
            batch = SendBatch(1, Encoded((entry,), born_ms, born_host, sys_flag), lambda _i: mid, nbytes,
                              topic=topic, keys=key)
            v = Verdicts(1)
            if self._record(batch, v, r, None, key, ()):
                self._on_stored(False)
        finally:
            gate.leave(peer, nbytes)
        self._count(batch, v)
        return v

    def _dedup(self, batch: SendBatch, v: Verdicts, keys: bytes) -> None:
        """Step 3: the open messages sent before answered as such."""
        found = self.resends.find(keys, v.open() if v.decided else range(v.n), batch.topic_of, batch.id_of)
        if not found:
            return
        for i, earlier in found.items():
            if isinstance(earlier, Unconfirmed):        # in the log, not confirmed: never appended twice
                reason, text = earlier
                v.refuse(i, put_code(reason.status, reason), text)
            else:                                       # a resend of a stored message: answered again
                v.duplicate(i, earlier[0], earlier[1], DUPLICATE_TEXT)

    def _recall_handles(self, batch: SendBatch, v: Verdicts) -> None:
        """The recall handle of each DELAY message stored in the schedule topic (deferred/recall.py)."""
        p = batch.payload
        for i, m in enumerate(p.messages):
            if m.topic == SCHEDULE_TOPIC and v.kinds[i] == STORED:
                mid = batch.id_of(i) or v.ids.get(i, "")
                v.recalls[i] = recall.encode(recall.Handle(batch.topic_of(i), self.config.broker_name,
                                                           p.delivery_ms[i], mid, v.offsets[i]))

    # 0. who -----------------------------------------------------------------------------------
    def _authorize(self, batch: SendBatch, v: Verdicts, caller: Caller) -> bool:
        """Messages to topics the caller may not pub: FORBIDDEN. False when none is left to send."""
        from ..protection.acl import peer_ip
        user = caller.user
        if user is None:                          # authentication on, and no identity: never served
            v.refuse_all(Code.FORBIDDEN, "forbidden: the call carries no authenticated user")
            return False
        ip = peer_ip(caller.peer)
        if batch.topic is not None:
            ok, why = self.acl.allowed(user, "topic", batch.topic, "pub", ip)
            if ok:
                return True
            self._forbidden(user, caller.peer, why)
            v.refuse_all(Code.FORBIDDEN, why)
            return False
        decided: dict[str, tuple[bool, str]] = {}
        for i in range(batch.n):
            t = batch.topics[i]
            got = decided.get(t)
            if got is None:
                got = decided[t] = self.acl.allowed(user, "topic", t, "pub", ip)
                if not got[0]:
                    self._forbidden(user, caller.peer, got[1])
            if not got[0] and v.kinds[i] == OPEN:
                v.refuse(i, Code.FORBIDDEN, got[1])
        return v.any_open()

    def _forbidden(self, user: str, peer: str, why: str) -> None:
        if self.on_forbidden is not None:
            self.on_forbidden(user, peer, why)

    # 2. checks --------------------------------------------------------------------------------
    def _check(self, batch: SendBatch, v: Verdicts) -> None:
        """Empty bodies, then each topic once: refused messages get their verdict."""
        p = batch.payload
        if type(p) is Encoded:
            entries = p.entries
            if len(entries) == 1:               # the lane's common request
                empty = () if entries[0][0] else (0,)
            else:
                empty = [i for i, e in enumerate(entries) if not e[0]]
        elif type(p) is Slices:
            empty = np.flatnonzero(np.asarray(p.fields).reshape(-1, 10)[:, 9] == 0).tolist()
        else:
            empty = [i for i, m in enumerate(p.messages) if not m.body]
        for i in empty:
            if v.kinds[i] == OPEN:
                v.refuse(i, Code.MESSAGE_BODY_EMPTY, "the body is empty")
        if batch.topic is not None:
            _, code, why = self.topic_check(batch.topic)
            if code != Code.OK:
                if not v.decided:
                    v.refuse_all(code, why)
                else:
                    for i in v.open():
                        v.refuse(i, code, why)
                return
        else:
            checked: dict[str, tuple] = {}
            for i in v.open():
                t = batch.topics[i]
                got = checked.get(t)
                if got is None:
                    got = checked[t] = self.topic_check(t)
                if got[1] != Code.OK:
                    v.refuse(i, got[1], got[2])
        if self.store.topics.body_limits:
            self._check_body_limits(batch, v)
        self._check_kinds(batch, v)

    def _check_body_limits(self, batch: SendBatch, v: Verdicts) -> None:
        """A topic's own max_message_bytes (`tidemq topic config T --set max_message_bytes=N`):
        a larger body is refused MESSAGE_BODY_TOO_LARGE, naming the topic's limit."""
        limits = self.store.topics.body_limits
        p = batch.payload
        if type(p) is Encoded:
            sizes = [len(e[0]) for e in p.entries]
        elif type(p) is Slices:
            sizes = np.asarray(p.fields).reshape(-1, 10)[:, 9].tolist()
        else:
            sizes = [len(m.body) if m.body else 0 for m in p.messages]
        for i in v.open():
            t = batch.topic if batch.topic is not None else batch.topics[i]
            most = limits.get(t)
            if most is not None and sizes[i] > most:
                v.refuse(i, Code.MESSAGE_BODY_TOO_LARGE, f"body of {sizes[i]} bytes exceeds topic {t}'s "
                                                         f"max_message_bytes={most}")

    def _check_kinds(self, batch: SendBatch, v: Verdicts) -> None:
        """Each open message's type against its topic's message type; a LITE message's lite topic and
        a PRIORITY message's priority."""
        p, kind_of = batch.payload, self.store.message_type
        if type(p) is not Messages:                 # the other lanes' messages are NORMAL, of one topic
            problem = kind_problem(kind_of(batch.topic), MessageType.NORMAL)
            if problem is not None:
                for i in v.open():
                    v.refuse(i, Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, problem)
            return
        kind = kind_of(batch.topic) if batch.topic is not None else None
        for i in v.open():
            mtype = p.types[i]
            problem = kind_problem(kind if batch.topic is not None else kind_of(batch.topics[i]), mtype)
            if problem is not None:
                v.refuse(i, Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, problem)
                continue
            if mtype != MessageType.LITE and mtype != MessageType.PRIORITY:
                continue
            props = p.messages[i].properties
            if mtype == MessageType.LITE:
                problem = lite_topic_problem(props.get(PROP_LITE_TOPIC), self.config.lite_topic_bytes_max)
                if problem is not None:
                    v.refuse(i, Code.ILLEGAL_LITE_TOPIC, problem)
            elif mtype == MessageType.PRIORITY:
                prio = priority_of(props)                   # (None: none, or no integer)
                if prio is None or prio < 0:
                    v.refuse(i, Code.BAD_REQUEST, f"a PRIORITY message needs a priority >= 0 "
                                                  f"(got {props.get(PROP_PRIORITY)!r})")
                elif self.on_priority is not None:
                    self.on_priority(batch.topic_of(i))

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

    # 3. dedup keys ------------------------------------------------------------------------------
    def _keys(self, batch: SendBatch) -> bytes:
        """The dedup keys of a batch whose lane did not compute them."""
        key, topic_of, id_of = self.resends.key, batch.topic_of, batch.id_of
        if batch.n == 1:
            return key(topic_of(0), id_of(0))
        return b"".join(key(topic_of(i), id_of(i)) for i in range(batch.n))

    # 4. routes ----------------------------------------------------------------------------------
    def _route(self, p: Messages, v: Verdicts, caller: Caller) -> tuple[bool, set[int]]:
        """FIFO queues, DELAY parking, TRANSACTION halves for the open messages: (a delayed message
        was parked, the indexes of the half messages)."""
        parked, halves = False, set()
        store = self.store
        for i in v.open():
            m, mtype = p.messages[i], p.types[i]
            group = p.groups[i]
            if group:                        # FIFO: hashed to one of the queues this broker writes
                ids = store.write_queues(m.topic)
                q = fifo_queue(group, store.queue_count(m.topic))
                m.queue_id = q if q in ids else ids[q % len(ids)]
            if mtype == MessageType.TRANSACTION:
                t = self.transactions
                if t.undecided >= self.config.transaction_undecided_max:
                    v.refuse(i, Code.TOO_MANY_REQUESTS, f"{t.undecided} transactions undecided "
                                                        f"(transaction_undecided_max)")
                    continue
                p.messages[i] = t.half(m, caller.client_id)
                halves.add(i)
            elif mtype == MessageType.DELAY and p.delivery_ms[i] is not None:
                refusal = self._delay(p, i)
                if refusal is not None:
                    v.refuse(i, *refusal)
                    continue
                parked = parked or p.messages[i].topic == SCHEDULE_TOPIC
        return parked, halves

    def _delay(self, p: Messages, i: int) -> tuple[int, str] | None:
        """A DELAY message: its delivery time kept, parked in the schedule topic when due later;
        the refusal (code, text) of a time too far away or a full timer."""
        m, due = p.messages[i], p.delivery_ms[i]
        now = self.store.clock.now_ms()
        if due - now > self.config.timer_delay_s_max * 1000:
            return Code.ILLEGAL_DELIVERY_TIME, (f"delivery time {due} ms is more than "
                                                f"timer_delay_s_max={self.config.timer_delay_s_max:g} away")
        m.properties[PROP_DELIVER_MS] = str(due)
        if due <= now:
            return None
        if self.timer.pending >= self.config.timer_pending_max:
            return Code.TOO_MANY_REQUESTS, f"{self.timer.pending} delayed messages waiting (timer_pending_max)"
        p.messages[i] = park(m, SCHEDULE_TOPIC)
        return None

    # 5-6. put, remember -------------------------------------------------------------------------
    async def _put(self, batch: SendBatch, v: Verdicts, keys: bytes, halves, parked: bool) -> None:
        store, puts, p = self.store, self.puts, batch.payload
        may_wait = store.puts_may_wait
        inline = not may_wait or store.puts_wait_for_disk_only        # (StorePuts.inline)
        where = None
        try:
            if type(p) is Encoded:
                entries = p.entries
                if v.decided:                   # some answered already (a resend, a refusal): the others
                    where = v.open()
                    entries = [entries[i] for i in where]
                put = (store.put_encoded, batch.topic, entries, p.born_ms, p.born_host, p.sys_flag, inline)
            elif type(p) is Slices:
                skip = np.array(v.kinds, np.uint8) != OPEN if v.decided else None
                put = (store.put_slices, batch.topic, p.raw, p.fields, p.extra, skip, p.born)
            else:
                where = v.open()
                put = (store.put_batch, [p.messages[i] for i in where], inline)
            # a put that waits for nothing runs now, with no coroutine in between (StorePuts.now); one
            # that waits is remembered as appended while it waits (a resend meanwhile, or after its
            # caller went, is answered from the log, never stored twice: resends.remember_appended);
            # one whose caller went is settled all the same, then moved to the window or forgotten
            # (resends.settled_gone): an entry left there for good kept send_one off the lane
            if not may_wait:
                r = puts.now(*put)
            else:
                resends = self.resends
                r = await puts.timed(*put, on_appended=lambda r: resends.remember_appended(keys, r, where),
                                     on_gone=lambda r: resends.settled_gone(keys, r, where))
        except PutsClosed as e:         # a change of role closed this service's puts: nothing was put
            for i in v.open():
                v.refuse(i, Code.INTERNAL_SERVER_ERROR, str(e))
            return
        if inline and type(p) is not Slices:
            # the dispatch was left for after the answer (store/put_lock.py): one message finds
            # every cache cold, and RocketMQ answers before it dispatches too
            puts.dispatch_later()
        if self._record(batch, v, r, where, keys, halves):
            self._on_stored(parked)

    def _record(self, batch: SendBatch, v: Verdicts, r, where, keys: bytes, halves) -> bool:
        """The store's outcomes as verdicts (``where``: the batch index of each result, None: the
        same); what was stored remembered. True when something was stored."""
        size, qid, qoff = r.size, r.qid, r.qoff
        ok = r.status is PutStatus.PUT_OK
        if ok and where is None and not v.decided and not r.refused:     # the store took the batch whole
            if batch.n == 1:
                v.stored(0, qid[0], qoff[0])
                physs = [r.phys[0]]
            else:
                v.all_stored(qid.tolist(), qoff.tolist())
                physs = r.phys.tolist()
        else:
            physs = [-1] * batch.n                       # each stored record's commit-log offset
            code, text = (Code.OK, "") if ok else (put_code(r.status, r.reason), r.error or r.status.name)
            for k in range(len(size)):
                if size[k] <= 0:
                    continue
                i = k if where is None else where[k]
                if v.kinds[i] != OPEN:
                    continue
                if ok:
                    v.stored(i, qid[k], qoff[k])
                    physs[i] = r.phys[k]
                else:
                    v.refuse(i, code, text)
                    # appended, not confirmed (disk, followers): its resend is answered, never stored again
                    self.resends.remember_unconfirmed(key_at(keys, i), r.status, qoff[k], r.phys[k],
                                                      r.phys[k] + size[k])
            for k, res in r.refused.items():
                i = k if where is None else where[k]
                if v.kinds[i] == OPEN:
                    v.refuse(i, put_code(res.status, res.reason), res.error or res.status.name)
            if not ok or STORED not in v.kinds:
                return False
        txns: dict[int, str] = {}
        if type(batch.payload) is Messages:               # (the other lanes' messages all have ids)
            for k in range(len(size)):
                i = k if where is None else where[k]
                if v.kinds[i] != STORED:
                    continue
                one = r[k]
                if i in halves:
                    txns[i] = v.txns[i] = one.offset_msg_id or ""      # the half message's id
                if not batch.id_of(i):
                    v.ids[i] = one.msg_id or ""                     # sent without an id: the store's
        self.resends.remember(keys, v.offsets, physs, v.kinds, txns)
        return True

    # 7. count -----------------------------------------------------------------------------------
    def _count(self, batch: SendBatch, v: Verdicts) -> None:
        """What each message was answered, by topic and code; one update in the common case."""
        out, codes = self.outcomes, v.codes
        if batch.topic is not None and DUPLICATE_VERDICT not in v.kinds and codes.count(codes[0]) == batch.n:
            out.add_code(batch.topic, codes[0], batch.n)
            return
        for i in range(batch.n):
            t = batch.topic_of(i)
            if v.kinds[i] == DUPLICATE_VERDICT:
                out.add(t, DUPLICATE_STATUS)
            else:
                out.add_code(t, codes[i])
