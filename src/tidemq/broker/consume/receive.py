"""ReceiveMessage / AckMessage / ChangeInvisibleDuration / ForwardMessageToDeadLetterQueue over
PopState and the store.

A receive pops from every queue of the topic for the group, starting at a
rotating queue (the clients pick a queue at random: the broker must not answer
"empty" while another queue has messages): first messages whose invisible time
is over (delivered again with attempt + 1, or moved to ``%DLQ%<group>`` once
the group's retry_max + 1 deliveries were made: groups.py), then new ones from the cursor.
A message is stored in the dead-letter queue once: a kill -9 after its put and before the pop
journal said it was done finds it there by the index (``_in_dlq``) and does not store it again.
With nothing to give it long-polls: it waits for a send, an ack of a FIFO
group, or the next invisible time to end, until the client's long-polling
timeout (bounded by its deadline). A receive with ``auto_renew`` (the push
consumers) has its messages renewed while its client is alive (renew.py). The state
of who has what in flight is pop_state.py.

FIFO consumer groups (a group created ``--orderly``, or without settings one in
``fifo_consumer_groups``: groups.py; RocketMQ's consumeMessageOrderly)
consume in order, as RocketMQ's orderly pop does: a message group always lands in
one queue (wire.fifo_queue), and a queue gives the group nothing while a
message it handed out is still invisible. A batch may carry several consecutive
messages of a queue, in order; once all of them are acked (or dead-lettered) the
queue moves on; when an invisible time runs out, the un-acked ones come back
first, in offset order, with attempt + 1. Message groups that share a queue wait
for each other; other queues and other groups are not held. The hold is derived
from the in-flight state alone, which the pop journal keeps across a kill -9.

Lite consumers (lite.py) and topics with PRIORITY messages take a queue by select.py instead of
in offset order (not FIFO groups): a lite consumer gets only its lite topics' messages, higher
priorities come first among a queue's visible ones.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ...config import BrokerConfig
from ...io import Clock
from ...protocol.stubs import Code, pb, spb, status
from ...store import GetStatus, Message, MessageStore, PutStatus
from ...store.unit_repair import WalkFailed
from ...record.codec import PROP_UNIQ_KEY, valid_topic
from ..observe.outcomes import DEAD_LETTERED, OK, REDELIVERED, Outcomes
from ..protection.access import sub_allowed_now
from ..sessions.telemetry import client_id_of
from ..puts import StorePuts
from ..state.layout import state_dir
from ..topic_names import dlq_topic, read_refusal
from ..wire import INTERNAL, PROP_ORIGIN_QUEUE_OFFSET, PROP_ORIGIN_TOPIC, PROP_PRIORITY, PROP_TRACE_CONTEXT, to_wire
from .groups import GroupTable
from .attempts import ATTEMPT_ID_CHARS_MAX, Attempts
from .filters import EVERYTHING, Subscription, subscription
from .pop_state import NOT_READABLE, HandleError, PopState
from .select import Selector, pop_selected
from .pull import readable_waker
from .reused import reused_from

log = logging.getLogger("tidemq.broker")

# units of one queue a property filter (SQL92) may pass in one look: each is decoded and evaluated
# (~20-30 us), so a long stretch that does not match is crossed in steps, the event loop served between
FILTER_PASS_UNITS_MAX = 4096
# the same for a tag filter alone: a tag hash compared per unit (well under a microsecond), so a
# look passes more, but a backlog of millions of other tags is still crossed in steps
TAG_PASS_UNITS_MAX = 65_536
EXPIRED_LOOK_S = 1.0     # a waiting receive looks again this often while a visible message could not be given
# read_at's NOT_READABLE: the record is there but not readable now
_NOT_NOW = frozenset((GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.OFFSET_OVERFLOW_BADLY,
                      GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.SERVICE_NOT_AVAILABLE))
SKIP = (GetStatus.OFFSET_TOO_SMALL, GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING,
        GetStatus.OFFSET_FOUND_NULL, GetStatus.MESSAGE_DAMAGED)


class Consumption:
    def __init__(self, store: MessageStore, config: BrokerConfig, pop: PopState, clock: Clock | None = None,
                 got: Outcomes | None = None, puts: StorePuts | None = None, groups: GroupTable | None = None) -> None:
        """``puts``: where a dead letter's put runs (broker/puts.py; None: inline, for tests that
        build a Consumption alone); ``groups``: the consumer groups' settings (groups.py; None: every
        group at the broker's defaults)."""
        self.store = store
        self.puts = puts
        self.got = got if got is not None else Outcomes()     # messages handed out, by topic and status
        self.clock = clock or store.clock
        self.config = config
        self.pop = pop
        self.groups = groups if groups is not None else GroupTable(
            store.fio, state_dir(store.config.root_dir), config.delivery_attempts_max,
            config.fifo_consumer_groups)
        self.quotas = None              # protection/quotas.Quotas: fetch byte rates (None: none)
        self.acl = None                 # protection/acl.Acl with authentication on: checked again after a wait
        self.arrivals = asyncio.Event()
        self._rr: dict[tuple[str, str], int] = {}
        # (group, topic, queue, offset) -> (message, why): out of delivery attempts, to be moved to the
        # dead-letter queue by ``bury`` (a put, which may wait: never inside pop_batch)
        self._dying: dict[tuple, tuple] = {}
        # the same keys while their dead-letter put runs (it may wait): no other bury or forward moves them
        self._burying: dict[tuple, asyncio.Event] = {}
        self.more_to_scan = False              # the last pop_batch stopped at FILTER_PASS_UNITS_MAX
        self.attempts = Attempts(pop)          # what a receive with an attempt id took (attempts.py)
        self.lite = None                           # lite.LiteSubscriptions (the service's), None: no lite topics
        self.priority_topics: set[str] = set()     # topics PRIORITY messages were sent to or read from
        self.aside: dict = {}                      # select.py: (group, topic, queue) -> {offset: lite topic} set aside

    def cursors_within_queues(self, ends: dict | None = None) -> int:
        """Bring every cursor that stands past its queue's end back to that end (a new leader's, at
        its start; ``ends``, by (topic, queue id): where a failure of the commit log cut the queues
        back, LogFailure.queue_ends), and forget what is in flight past it: the messages sent from
        now on get the offsets from that end on; a cursor past them would skip them for good, an old
        delivery's attempts (and its receipt handle) would count for them. How many queues were set
        right."""
        moved = 0
        for (g, t, q), st in list(self.pop.queues.items()):
            if ends is not None:
                end = ends.get((t, q))
                if end is None:
                    continue
            elif not 0 <= q < self.store.queue_count(t):
                continue
            else:
                end = self.store.max_offset(t, q)
            gone = [o for o in st.inflight if o >= end]
            if st.cursor > end or gone:
                log.warning("group %s, %s queue %d: its cursor %d stood past the queue's end %d (a failover or a "
                            "crash took that tail back); moved back to it, %d in flight there forgotten", g, t, q,
                            st.cursor, end, len(gone))
                for o in gone:
                    self.pop.drop(g, t, q, o)
                if st.cursor > end:
                    self.pop.rewind(g, t, q, end)
                moved += 1
        return moved

    def cursors_where_reused(self) -> int:
        """At a leader's start: every cursor whose last record (QueueState.last) is another record now
        (a failure of the log took it and the next messages took its offsets; a kill -9 came before
        the broker's listener rewound the cursor) comes back to the first offset whose record lies past
        it, the cut, and what is in flight from there is forgotten. How many queues were set right."""
        unit_at = self.pop.unit_at
        if unit_at is None:
            return 0
        moved = 0
        for (g, t, q), st in list(self.pop.queues.items()):
            cut = reused_from(lambda o: unit_at(t, q, o), st.last, st.cursor)
            if cut is None:
                continue
            gone = [o for o in st.inflight if o >= cut]
            log.warning("group %s, %s queue %d: its cursor %d counted a record that offset %d no longer holds (a "
                        "failure of the log took it, and its offsets were taken again); moved back to %d, %d in "
                        "flight there forgotten", g, t, q, st.cursor, st.last[0], cut, len(gone))
            for o in gone:
                self.pop.drop(g, t, q, o)
            self.pop.rewind(g, t, q, cut)
            moved += 1
        if moved:
            self.pop.flush()
        return moved

    def read_at(self, topic: str, qid: int, offset: int):
        """The message at ``offset`` of a queue (None: not there any more; NOT_READABLE: not now)."""
        return self._read(topic, qid, offset)

    def give_up(self, group: str, topic: str, qid: int, offset: int, m, why: str) -> None:
        """Out of delivery attempts: to the dead-letter queue at the next ``bury``."""
        self._dying.setdefault((group, topic, qid, offset), (m, why))

    def selector(self, group: str, topic: str, client: str) -> Selector | None:
        """How a receive of ``client`` takes the queues of ``topic`` (select.py); None: in offset order."""
        if self.groups.orderly(group):
            return None
        sets = self.lite.sets(group, topic, client) if self.lite is not None else None
        by_priority = topic in self.priority_topics
        if sets is None and not by_priority:
            return None
        return Selector(sets[0] if sets else None, sets[1] if sets else None, by_priority)

    def notify_arrival(self) -> None:
        self.arrivals.set()

    def now_ms(self) -> int:
        return self.clock.now_ms()

    # Popping ----------------------------------------------------------------------------
    def _read(self, topic: str, qid: int, offset: int):
        g = self.store.get("%pop", topic, qid, offset, max_count=1)
        if g.status is GetStatus.FOUND and g.messages[0].queue_offset == offset:
            return g.messages[0]
        return NOT_READABLE if g.status in _NOT_NOW else None

    async def _to_dlq(self, group: str, m, why: str) -> str | None:
        """Store ``m`` in ``%DLQ%<group>``; None when done, else what went wrong."""
        topic = dlq_topic(group)
        if self.store.queue_count(topic) == 0:
            self.store.create_topic(topic, 1)
        elif self._in_dlq(topic, m):
            log.info("message %s of %s is in %s already (stored before a restart)", m.msg_id, m.topic, topic)
            return None
        # the trace context goes with it (a trace follows a message into its DLQ); its lite topic and
        # priority do not (the dead-letter queue is a topic of its own, read in order)
        props = {k: v for k, v in m.properties.items() if k not in INTERNAL or k == PROP_TRACE_CONTEXT}
        props.update({PROP_UNIQ_KEY: m.msg_id, PROP_ORIGIN_TOPIC: m.topic,
                      PROP_ORIGIN_QUEUE_OFFSET: str(m.queue_offset)})
        dead = Message(topic=topic, body=m.body, tags=m.tags, keys=m.keys or None, properties=props, queue_id=0)
        r = await self.puts.run(self.store.put, dead) if self.puts is not None else self.store.put(dead)
        if r.status is not PutStatus.PUT_OK:
            log.error("cannot move message %s to %s: %s %s", m.msg_id, topic, r.status.name, r.error)
            return f"{r.status.name} {r.error or ''}".strip()
        log.info("message %s of %s moved to %s %s", m.msg_id, m.topic, topic, why)
        return None

    def _in_dlq(self, topic: str, m) -> bool:
        """Whether ``m`` (this very message: topic and queue offset) is in dead-letter topic ``topic``
        already: stored there before a kill -9 that came before the pop journal said it was done (the
        store's hash index, the whole log; without the index: False, at least once)."""
        if not self.store.config.index_enabled:
            return False
        where = str(m.queue_offset)
        found = self.store.query_by_key(topic, m.msg_id, max_count=32, begin_ms=m.store_timestamp_ms, whole_log=True)
        return any(d.properties.get(PROP_ORIGIN_TOPIC) == m.topic
                   and d.properties.get(PROP_ORIGIN_QUEUE_OFFSET) == where for d in found)

    def pop_batch(self, group: str, topic: str, batch: int, invisible_ms: int, sub: Subscription | None = None,
                  renew_for: str = "", client: str = "") -> list:
        """Up to ``batch`` messages that ``sub`` wants (filters.py; None: all), in flight for
        ``invisible_ms``; with ``renew_for`` (a client id) the broker renews their invisible time while
        that client is alive (renew.py); ``client``: who receives (a lite consumer gets its lite
        topics' messages only). Messages the filter does not want are passed (the group's cursor moves
        over them: consumed for the group, as RocketMQ acks them), never delivered."""
        if sub is None:
            sub = EVERYTHING
        self.more_to_scan = False
        out: list = []
        n = self.store.queue_count(topic)
        now = self.now_ms()
        in_order = self.groups.orderly(group)
        sel = self.selector(group, topic, client)
        start = self._rr.get((group, topic), 0)
        self._rr[(group, topic)] = start + 1
        for k in range(n):
            if len(out) >= batch:
                break
            self._pop_queue(group, topic, (start + k) % n, out, batch, now, invisible_ms, sub, in_order, renew_for,
                            sel)
        return out

    def _pop_queue(self, group: str, topic: str, q: int, out: list, batch: int, now: int, invisible_ms: int,
                   sub: Subscription, in_order: bool, renew_for: str, sel: Selector | None = None) -> None:
        """Expired in-flight messages of one queue (in offset order), then new ones from the cursor.
        In order (a FIFO group): nothing while one handed out is still invisible, and nothing past
        a message that could not be moved to the dead-letter queue."""
        st = self.pop.state(group, topic, q)
        if in_order and st.holds(now):
            return
        renew_until = now + int(self.config.auto_renew_s_max * 1000) if renew_for else 0
        attempts_max = self.groups.attempts_max(group)      # retry_max + 1 deliveries, then the DLQ
        if sel is not None:
            pop_selected(self, group, topic, q, out, batch, now, invisible_ms, sub, renew_for, renew_until, sel,
                         attempts_max)
            return
        for o in sorted(o for o, i in st.inflight.items() if i.visible_at_ms <= now):
            if len(out) >= batch:
                return
            inf = st.inflight[o]
            m = self._read(topic, q, o)
            if m is NOT_READABLE:                           # there, not readable now: stays in flight
                if in_order:
                    return
                continue
            if m is None:                                   # cleaned from the store meanwhile
                self.pop.drop(group, topic, q, o)
                continue
            if inf.attempt >= attempts_max:
                self._dying.setdefault((group, topic, q, o), (m, f"after {inf.attempt} deliveries"))
                if in_order:
                    return                  # nothing past it before it is moved (bury)
                continue
            h = self.pop.deliver(group, topic, q, o, inf.attempt + 1, now + invisible_ms, renew_for, renew_until)
            out.append(to_wire(m, inf.attempt + 1, h, invisible_ms))
            self.got.add(topic, REDELIVERED)
        passed = 0
        pass_max = FILTER_PASS_UNITS_MAX if sub.match is not None else TAG_PASS_UNITS_MAX if sub.tags else None
        while len(out) < batch:
            cursor = st.cursor
            if pass_max is not None and passed >= pass_max:
                self.more_to_scan = True        # the rest at the next look (receive yields to the loop first)
                break
            try:
                g = self.store.get(group, topic, q, cursor, max_count=batch - len(out), tags=sub.tags, match=sub.match)
            except WalkFailed:
                # the walk aside for the queue's damaged unit at the cursor failed (store/unit_repair.py
                # said why; walked again later): nothing more of this queue now; what was popped goes out
                break
            passed += max(0, g.next_offset - cursor)
            if g.status is GetStatus.FOUND:
                for m in g.messages:
                    h = self.pop.deliver(group, topic, q, m.queue_offset, 1, now + invisible_ms, renew_for, renew_until,
                                         m.commitlog_offset)
                    out.append(to_wire(m, 1, h, invisible_ms))
                    if PROP_PRIORITY in m.properties:          # from the next receive on: by priority
                        self.priority_topics.add(topic)
                self.got.add(topic, OK, len(g.messages))
                self.pop.skip_to(group, topic, q, g.next_offset)
            elif g.status in SKIP and g.next_offset > cursor:
                self.pop.skip_to(group, topic, q, g.next_offset)
            else:
                break
            if g.next_offset <= cursor:
                break

    async def bury(self) -> int:
        """Move the messages pop_batch found out of delivery attempts to their groups' dead-letter
        queues; one that could not be moved stays in flight and is tried again at the next receive.
        How many were moved. One message is moved by one bury at a time (``_burying``): another
        receive that finds it out of attempts while its put waits leaves it to that one."""
        moved = 0
        while True:
            key = next((k for k in self._dying if k not in self._burying), None)
            if key is None:
                return moved
            m, why = self._dying.pop(key)
            group, topic, q, o = key
            if not self._still_inflight(key):
                continue                           # done meanwhile (acked, moved by a forward)
            err = await self._moving_to_dlq(key, self._to_dlq(group, m, why))
            if err is None:
                self.pop.drop(group, topic, q, o)
                self._dying.pop(key, None)         # found again while it was being moved: done now
                self.got.add(topic, DEAD_LETTERED)
                moved += 1

    def _still_inflight(self, key: tuple) -> bool:
        group, topic, q, o = key
        return o in self.pop.state(group, topic, q).inflight

    async def _moving_to_dlq(self, key: tuple, put):
        """Await ``put`` (a _to_dlq) with ``key`` marked as being moved."""
        done = self._burying[key] = asyncio.Event()
        try:
            return await put
        finally:
            del self._burying[key]
            done.set()

    def next_visible_ms(self, group: str, topic: str) -> int | None:
        best = None
        for q in range(self.store.queue_count(topic)):
            for i in self.pop.state(group, topic, q).inflight.values():
                if best is None or i.visible_at_ms < best:
                    best = i.visible_at_ms
        return best

    # RPCs -------------------------------------------------------------------------------
    async def receive(self, request, context):
        group = request.group.name
        topic = request.message_queue.topic.name
        if not group or not valid_topic(group):
            yield spb.ReceiveMessageResponse(status=status(Code.ILLEGAL_CONSUMER_GROUP, f"bad group {group!r}"))
            return
        if not valid_topic(topic) or self.store.queue_count(topic) == 0:
            yield spb.ReceiveMessageResponse(status=status(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist"))
            return
        why = read_refusal(topic)
        if why is not None:
            yield spb.ReceiveMessageResponse(status=status(Code.FORBIDDEN, why))
            return
        if not self.groups.settings(group).consume_enable:
            yield spb.ReceiveMessageResponse(status=status(Code.FORBIDDEN, f"consumption is disabled for group "
                                                                           f"{group!r} (tidemq group update)"))
            return
        sub, bad = subscription(request.filter_expression)
        if bad is not None:
            yield spb.ReceiveMessageResponse(status=bad)
            return
        if len(request.attempt_id) > ATTEMPT_ID_CHARS_MAX:
            yield spb.ReceiveMessageResponse(status=status(Code.BAD_REQUEST, f"attempt_id is longer than "
                                                                             f"{ATTEMPT_ID_CHARS_MAX} characters"))
            return
        batch = request.batch_size if request.batch_size > 0 else 32
        batch = min(batch, self.config.receive_batch_max)
        if request.HasField("invisible_duration") and (request.invisible_duration.seconds or
                                                       request.invisible_duration.nanos):
            d = request.invisible_duration
            invisible_ms = d.seconds * 1000 + d.nanos // 1_000_000
            bad = self._invisible_problem(invisible_ms)
            if bad is not None:
                yield spb.ReceiveMessageResponse(status=status(Code.ILLEGAL_INVISIBLE_TIME, bad))
                return
        else:
            invisible_ms = int(self.config.invisible_duration_default_s * 1000)
        wait_s = min(request.long_polling_timeout.seconds + request.long_polling_timeout.nanos / 1e9,
                     self.config.long_polling_s_max)
        remaining = context.time_remaining()
        if remaining is not None:
            wait_s = min(wait_s, remaining - 1.0)
        deadline = time.monotonic() + max(0.0, wait_s)
        renew_for = client_id_of(context) if request.auto_renew else ""
        ents, over = self.quotas.fetch_admit(context, topic) if self.quotas is not None else ([], None)
        if over is not None:
            yield spb.ReceiveMessageResponse(status=status(Code.TOO_MANY_REQUESTS, over))
            return
        wake = readable_waker(self.store, self.arrivals)
        client = client_id_of(context) if self.lite is not None and self.lite.subs else ""   # who: lite topics
        msgs = self.attempts.again(group, topic, request.attempt_id, self.now_ms())   # a repeated receive
        waited = False
        while msgs is None:
            why = sub_allowed_now(self.acl, topic, group) if waited else None
            if why is not None:          # revoked while it waited: nothing popped, nothing handed out
                yield spb.ReceiveMessageResponse(status=status(Code.FORBIDDEN, why))
                return
            self.arrivals.clear()
            walks = self.store.walks_kept()     # (a damaged unit's walk kept after the pop wakes the wait)
            msgs = self.pop_batch(group, topic, batch, invisible_ms, sub, renew_for, client)
            if self._dying and await self.bury() and not msgs:
                msgs = None
                continue                # moved: what was behind a dead letter may be deliverable now
            if not msgs and self.more_to_scan and deadline > time.monotonic():
                msgs = None
                await asyncio.sleep(0)          # a long stretch the filter passes: other calls go first
                continue
            left = deadline - time.monotonic()
            if msgs or left <= 0:
                now_ms = self.now_ms()
                self.attempts.remember(group, topic, request.attempt_id, msgs, now_ms + invisible_ms, now_ms)
                break
            msgs = None
            nxt = self.next_visible_ms(group, topic)
            if nxt is not None:         # one visible already was not deliverable (NOT_READABLE, ...): a look a second
                due_ms = nxt - self.now_ms()
                left = min(left, max(0.01, due_ms / 1000) if due_ms > 0 else EXPIRED_LOOK_S)
            wake(walks)           # what was appended and is not readable yet wakes us once it is
            waited = True
            try:
                await asyncio.wait_for(self.arrivals.wait(), timeout=left)
            except asyncio.TimeoutError:
                pass
        if msgs and ents:
            msgs = await self._throttled(group, msgs, invisible_ms, ents)
        now = self.now_ms()
        ts = pb.Message().system_properties.store_timestamp.__class__(seconds=now // 1000,
                                                                      nanos=(now % 1000) * 1_000_000)
        if msgs:
            yield spb.ReceiveMessageResponse(status=status(Code.OK))
            for m in msgs:
                yield spb.ReceiveMessageResponse(message=m)
        else:
            yield spb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
        yield spb.ReceiveMessageResponse(delivery_timestamp=ts)

    async def _throttled(self, group: str, msgs: list, invisible_ms: int, ents: list) -> list:
        """The fetch quota's delay (protection/quotas.py) before ``msgs`` go out: their invisible time
        counts from when they are handed out, not from when they were popped. Through the wait they stay
        invisible (for it and their own invisible time: journaled, so a crash meanwhile brings them
        back when that is over), after it they are invisible ``invisible_ms`` from then on; one that is
        not this delivery any more (the clock moved past its invisible time and another receive took
        it) is not handed out: its handle would be stale."""
        delay_s = self.quotas.charge("fetch", ents, sum(len(m.body) for m in msgs), refuse=False).delay_s
        if delay_s <= 0:
            return msgs
        self._still_ours(group, msgs, self.now_ms() + int(delay_s * 1000) + invisible_ms)
        await asyncio.sleep(delay_s)
        return self._still_ours(group, msgs, self.now_ms() + invisible_ms)

    def _still_ours(self, group: str, msgs: list, visible_at_ms: int) -> list:
        """The deliveries of ``msgs`` still current, each invisible until ``visible_at_ms`` (their
        handles unchanged; renewed for their client as before)."""
        out = []
        for m in msgs:
            try:
                topic, qid, offset, seq = self.pop.parse(group, m.system_properties.receipt_handle)
            except HandleError:
                continue
            cur = self.pop.state(group, topic, qid).inflight.get(offset)
            if cur is None or cur.seq != seq:
                log.warning("message at %s:%d:%d of group %s was delivered again while its answer was held by a "
                            "quota: not handed out twice", topic, qid, offset, group)
                continue
            self.pop.renew(group, topic, qid, offset, visible_at_ms, cur.client)
            out.append(m)
        return out

    def _invisible_problem(self, ms: int) -> str | None:
        """Why an invisible time a client asks for is refused (ILLEGAL_INVISIBLE_TIME), or None."""
        most = self.config.invisible_duration_s_max
        if ms <= 0 or ms > most * 1000:
            return f"invisible duration must be > 0 and at most invisible_duration_s_max={most:g} s (got {ms} ms)"
        return None

    def ack(self, request):
        group = request.group.name
        most = self.config.ack_entries_max
        if len(request.entries) > most:         # bounded before any is looked at: nothing acked
            return spb.AckMessageResponse(status=status(
                Code.PAYLOAD_TOO_LARGE, f"{len(request.entries)} entries: one AckMessage carries at most "
                                        f"ack_entries_max={most}; nothing acked"))
        entries = []
        for e in request.entries:
            try:
                self.pop.ack(group, e.receipt_handle, request.topic.name)
                code, msg = Code.OK, ""
            except HandleError as err:
                code, msg = Code.INVALID_RECEIPT_HANDLE, str(err)
            entries.append(spb.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle,
                                                     status=status(code, msg)))
        if self.groups.orderly(group):
            self.notify_arrival()          # an ack can free a queue held for the group: waiting receives look again
        if not entries:
            return spb.AckMessageResponse(status=status(Code.BAD_REQUEST, "no entry to ack"))
        if len(entries) == 1:
            top = entries[0].status
        elif all(x.status.code == Code.OK for x in entries):
            top = status(Code.OK)
        else:
            top = status(Code.MULTIPLE_RESULTS)
        return spb.AckMessageResponse(status=top, entries=entries)

    def change_invisible(self, request):
        d = request.invisible_duration
        ms = d.seconds * 1000 + d.nanos // 1_000_000
        bad = self._invisible_problem(ms)
        if bad is not None:
            return spb.ChangeInvisibleDurationResponse(status=status(Code.ILLEGAL_INVISIBLE_TIME, bad),
                                                       receipt_handle=request.receipt_handle)
        try:
            h = self.pop.change_invisible(request.group.name, request.receipt_handle, self.now_ms() + ms,
                                          request.topic.name)
        except HandleError as err:
            return spb.ChangeInvisibleDurationResponse(status=status(Code.INVALID_RECEIPT_HANDLE, str(err)),
                                                       receipt_handle=request.receipt_handle)
        if self.groups.orderly(request.group.name):
            self.notify_arrival()          # a held queue may now free sooner than a waiting receive thinks
        return spb.ChangeInvisibleDurationResponse(status=status(Code.OK), receipt_handle=h)

    async def forward_to_dlq(self, request):
        """ForwardMessageToDeadLetterQueue (the FIFO push consumer, once its local retries are spent):
        the message goes to ``%DLQ%<group>`` and is done for the group, as if acked. A repeated
        forward of a message already done answers OK (the client resends until it sees OK)."""
        group = request.group.name
        try:
            topic, qid, offset, inflight = self.pop.current(group, request.receipt_handle, request.topic.name)
        except HandleError as err:
            return spb.ForwardMessageToDeadLetterQueueResponse(status=status(Code.INVALID_RECEIPT_HANDLE, str(err)))
        key = (group, topic, qid, offset)
        while key in self._burying:               # a bury or another forward of it is storing it now
            await self._burying[key].wait()
            try:
                topic, qid, offset, inflight = self.pop.current(group, request.receipt_handle, request.topic.name)
            except HandleError as err:
                return spb.ForwardMessageToDeadLetterQueueResponse(status=status(Code.INVALID_RECEIPT_HANDLE,
                                                                                 str(err)))
        if inflight:
            m = self._read(topic, qid, offset)
            if m is NOT_READABLE:
                return spb.ForwardMessageToDeadLetterQueueResponse(status=status(
                    Code.INTERNAL_SERVER_ERROR, "the message is not readable now (the store is not running, or "
                                                "a new leader has not confirmed it yet): send again"))
            if m is None:
                log.warning("message at %s:%d:%d of group %s was cleaned from the store before it could be "
                            "dead-lettered", topic, qid, offset, group)
            else:
                why = f"by the client after {request.delivery_attempt} attempt(s)"
                err = await self._moving_to_dlq(key, self._to_dlq(group, m, why))
                if err is not None:
                    return spb.ForwardMessageToDeadLetterQueueResponse(status=status(
                        Code.INTERNAL_SERVER_ERROR, f"cannot store the message in {dlq_topic(group)}: {err}"))
            self.pop.drop(group, topic, qid, offset)
            if self.groups.orderly(group):
                self.notify_arrival()
        return spb.ForwardMessageToDeadLetterQueueResponse(status=status(Code.OK))
