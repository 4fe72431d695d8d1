"""Offset-based consumption (PullMessage, QueryOffset) and consumer-group offsets
(GetOffset, UpdateOffset, kept by group_offsets.py): what tidemq.client and the Spark
source use. :func:`long_poll` is PullMessage's and PullRecords' (pull_records.py) wait
for new messages.

Consumers are served only what the store says cannot be taken back (MessageStore.readable_end:
under SYNC_FLUSH what is on disk; under SYNC replication what the in-sync set has; store/reader.py
says which reads are limited). A record appended but not readable yet reads as "nothing new"
(OFFSET_OVERFLOW_ONE), and QueryOffset END is the queue's readable end. A long poll woken by an
arrival that finds nothing readable waits for the store to say that what was appended has
become readable (``readable_waker``: MessageStore.notify_readable) or for the next arrival,
whichever comes first: it neither spins nor sleeps out its timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ...protocol.stubs import Code, pb, spb, status
from ...said import Conditions
from ...store import GetResult, GetStatus, MessageStore, StoreNotRunning
from ...store.unit_repair import WalkFailed
from ...record.codec import valid_topic
from ..observe.outcomes import OK, Outcomes
from ..protection.access import sub_allowed_now
from ..topic_names import read_refusal
from ..wire import to_wire
from .filters import subscription
from .group_offsets import GroupOffsets

PULL_BYTES_MAX = 64 << 20       # message bytes one PullMessage answers at most
QUEUES_SAID_MAX = 1024          # queues whose failed unit walk a WalkFailures keeps saying once for

log = logging.getLogger(__name__)


class WalkFailures:
    """Pulls that met a consume-queue unit whose walk aside failed (store/unit_repair.py WalkFailed,
    remembered FAILED_FOR_S; the store said why, with its traceback): answered INTERNAL_SERVER_ERROR
    at the same offset (a status the clients retry: the walk is tried again after that time), said
    once per queue (said.Conditions) until a pull of that queue is served again."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.queues: dict[tuple[str, int], Conditions] = {}

    def failed(self, topic: str, queue_id: int, e: WalkFailed) -> str:
        """The answer's message for ``e`` (a pull of ``topic``/``queue_id``), said once per queue."""
        text = (f"queue {queue_id} of topic {topic!r}: the consume-queue unit at offset {e.queue_offset} is "
                f"not readable now (looking for its record failed; pull again)")
        c = self.queues.get((topic, queue_id))
        if c is None and len(self.queues) < QUEUES_SAID_MAX:
            c = self.queues[(topic, queue_id)] = Conditions(log, self.what)
        if c is not None:
            c.failed("WalkFailed", text)
        return text

    def served(self, topic: str, queue_id: int) -> None:
        """A pull of the queue answered from the store again: said once if it had failed."""
        if self.queues:
            c = self.queues.pop((topic, queue_id), None)
            if c is not None:
                c.recovered(f"queue {queue_id} of topic {topic!r} is readable again")


def readable_waker(store: MessageStore, arrivals: asyncio.Event):
    """A function for a long poll about to wait: it asks the store to set ``arrivals`` (from
    whichever thread makes it so, through this event loop) once everything appended so far is
    readable; nothing when it is readable already (the next arrival wakes the poll then)."""
    loop = asyncio.get_running_loop()

    def fire() -> None:
        try:
            loop.call_soon_threadsafe(arrivals.set)
        except RuntimeError:
            pass                             # the loop is closed: nobody waits any more

    def arm(walking: int | None = None) -> None:
        try:
            store.notify_readable(fire, walking)
        except StoreNotRunning:
            pass                             # the next fetch answers SERVICE_NOT_AVAILABLE

    return arm


WALK_WAIT_S_MAX = 60.0     # a fetch waits this long at most for a damaged unit's walk aside (no call deadline)


async def long_poll(fetch, arrivals: asyncio.Event, wait_s: float, context, wake=None) -> GetResult:
    """``fetch()`` until it finds something or ``wait_s`` (bounded by the call's deadline) has
    passed; a put wakes it through ``arrivals``, and so does the store once what was appended is
    readable (``wake``: readable_waker's, called before each wait). PullMessage's and PullRecords'
    long polling."""
    remaining = context.time_remaining()
    if remaining is not None:
        wait_s = min(wait_s, remaining - 0.5)
    deadline = time.monotonic() + max(0.0, wait_s)
    # a damaged unit's walk of the log runs aside (store/unit_repair.py): waited for past the poll's own
    # wait (its record is there: the answer is the walk's, as if it had run here) within the call's time;
    # a call with no deadline waits WALK_WAIT_S_MAX for it only if it asked to wait at all (asked not to:
    # answered at once, nothing yet, read again)
    if remaining is not None:
        walk_deadline = time.monotonic() + remaining - 0.5
    else:
        walk_deadline = deadline if wait_s <= 0 else time.monotonic() + WALK_WAIT_S_MAX
    while True:
        arrivals.clear()
        g = fetch()
        if g.status is not GetStatus.OFFSET_OVERFLOW_ONE and g.status is not GetStatus.NO_MESSAGE_IN_QUEUE:
            return g
        walking = getattr(g, "walking", None)
        left = (walk_deadline if walking is not None else deadline) - time.monotonic()
        if left <= 0:
            return g
        if wake is not None:
            wake(walking)
        try:
            await asyncio.wait_for(arrivals.wait(), timeout=left)
        except asyncio.TimeoutError:
            pass


class Pull:
    def __init__(self, store: MessageStore, offsets: GroupOffsets, arrivals: asyncio.Event,
                 bytes_max: int = PULL_BYTES_MAX, got: Outcomes | None = None, wait_s_max: float = 30.0,
                 groups=None) -> None:
        """``wait_s_max``: the longest a PullMessage long-polls, whatever it asks (long_polling_s_max);
        ``groups``: the consumer groups' settings (groups.GroupTable; None: every group may consume)."""
        self.groups = groups
        self.store = store
        self.got = got if got is not None else Outcomes()     # messages handed out, by topic and status
        self.wait_s_max = wait_s_max
        self.offsets = offsets
        self.arrivals = arrivals
        self.bytes_max = bytes_max
        self.quotas = None          # protection/quotas.Quotas: fetch byte rates (None: none)
        self.acl = None             # protection/acl.Acl with authentication on: checked again after a wait
        self.walk_failures = WalkFailures("PullMessage")

    def _queue(self, mq) -> tuple[str, int, "pb.Status | None"]:
        topic, qid = mq.topic.name, mq.id
        if not valid_topic(topic) or not 0 <= qid < self.store.queue_count(topic):
            return topic, qid, status(Code.TOPIC_NOT_FOUND, f"no queue {qid} in topic {topic!r}")
        why = read_refusal(topic)
        if why is not None:
            return topic, qid, status(Code.FORBIDDEN, why)
        return topic, qid, None

    async def pull(self, request, context):
        topic, qid, bad = self._queue(request.message_queue)
        if bad is not None:
            yield spb.PullMessageResponse(status=bad)
            return
        if (self.groups is not None and request.group.name
                and not self.groups.settings(request.group.name).consume_enable):
            yield spb.PullMessageResponse(status=status(Code.FORBIDDEN, f"consumption is disabled for group "
                                                                        f"{request.group.name!r}"))
            return
        sub, refusal = subscription(request.filter_expression)      # SQL92 or tags, by the filter's type
        if refusal is not None:
            yield spb.PullMessageResponse(status=refusal)
            return
        batch = request.batch_size if request.batch_size > 0 else 32
        group = request.group.name or "%pull"
        wait_s = min(request.long_polling_timeout.seconds + request.long_polling_timeout.nanos / 1e9,
                     self.wait_s_max)
        offset = request.offset
        ents, over = self.quotas.fetch_admit(context, topic) if self.quotas is not None else ([], None)
        if over is not None:
            yield spb.PullMessageResponse(status=status(Code.TOO_MANY_REQUESTS, over))
            return
        try:
            g = await long_poll(lambda: self.store.get(group, topic, qid, offset, max_count=batch,
                                                       max_bytes=self.bytes_max, tags=sub.tags, match=sub.match),
                                self.arrivals, wait_s, context, readable_waker(self.store, self.arrivals))
        except WalkFailed as e:              # nothing readable before the damaged unit: read again later
            yield spb.PullMessageResponse(status=status(Code.INTERNAL_SERVER_ERROR,
                                                        self.walk_failures.failed(topic, qid, e)))
            yield spb.PullMessageResponse(next_offset=offset)
            return
        self.walk_failures.served(topic, qid)
        why = sub_allowed_now(self.acl, topic, request.group.name) if wait_s > 0 else None
        if why is not None:                  # revoked while it waited: nothing handed out
            yield spb.PullMessageResponse(status=status(Code.FORBIDDEN, why))
            return
        if g.status is GetStatus.FOUND:
            if ents:
                await self.quotas.fetch_charge(ents, sum(len(m.body) for m in g.messages))
            self.got.add(topic, OK, len(g.messages))
            yield spb.PullMessageResponse(status=status(Code.OK))
            for m in g.messages:
                yield spb.PullMessageResponse(message=to_wire(m, 1, "", 0))
        elif g.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
            yield spb.PullMessageResponse(status=status(Code.ILLEGAL_OFFSET, f"{g.status.name}: queue holds "
                                                        f"[{g.min_offset}, {g.max_offset})"))
        elif g.status is GetStatus.SERVICE_NOT_AVAILABLE:
            yield spb.PullMessageResponse(status=status(Code.INTERNAL_SERVER_ERROR, "the store is not running"))
        else:
            yield spb.PullMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, g.status.name))
        yield spb.PullMessageResponse(next_offset=g.next_offset)

    def query_offset(self, request):
        topic, qid, bad = self._queue(request.message_queue)
        if bad is not None:
            return spb.QueryOffsetResponse(status=bad)
        policy = request.query_offset_policy
        if policy == pb.QueryOffsetPolicy.BEGINNING:
            off = self.store.min_offset(topic, qid)
        elif policy == pb.QueryOffsetPolicy.END:
            off = self.store.readable_max_offset(topic, qid)     # never past what a consumer can read
        else:
            ts = request.timestamp
            off = self.store.offset_for_timestamp(topic, qid, ts.seconds * 1000 + ts.nanos // 1_000_000)
        return spb.QueryOffsetResponse(status=status(Code.OK), offset=off)

    def get_offset(self, request):
        topic, qid, bad = self._queue(request.message_queue)
        if bad is not None:
            return spb.GetOffsetResponse(status=bad)
        if not request.group.name:
            return spb.GetOffsetResponse(status=status(Code.ILLEGAL_CONSUMER_GROUP, "no group"))
        off = self.offsets.get(request.group.name, topic, qid)
        if off is None:
            return spb.GetOffsetResponse(status=status(Code.OFFSET_NOT_FOUND, "no offset committed"))
        return spb.GetOffsetResponse(status=status(Code.OK), offset=off)

    def update_offset(self, request):
        topic, qid, bad = self._queue(request.message_queue)
        if bad is not None:
            return spb.UpdateOffsetResponse(status=bad)
        if not request.group.name or not valid_topic(request.group.name):
            return spb.UpdateOffsetResponse(status=status(Code.ILLEGAL_CONSUMER_GROUP, "bad group"))
        if request.offset < 0:
            return spb.UpdateOffsetResponse(status=status(Code.ILLEGAL_OFFSET, "negative offset"))
        self.offsets.set(request.group.name, topic, qid, request.offset)
        return spb.UpdateOffsetResponse(status=status(Code.OK))
