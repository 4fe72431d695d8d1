"""Messages parked in a system topic until the broker moves them to their real topic.

Delayed messages wait in the schedule topic (timer.py), transaction half messages
in the half topic (transactions.py), as RocketMQ does: one queue each, the real
topic and queue in properties (RocketMQ's names REAL_TOPIC / REAL_QID). Moving one
back is a put of a copy into the real topic with the same UNIQ_KEY (the client's
message id) and without the parking properties.

Exactly once across kill -9: a move is a put, then a durable note that it was
done. A crash between the two leaves a message that looks unmoved; the services
ask :func:`already_moved` (the store's hash index: is there a message with this
UNIQ_KEY in the real topic?) for every message that may have been moved before
the restart. The original send never went to the real topic, so a hit is the move.
"""

from __future__ import annotations

import logging
import uuid
from typing import Callable, Iterator

from ...store import GetStatus, Message, MessageStore
from ...store.unit_repair import WalkFailed
from ...record.codec import PROP_KEYS, PROP_TAGS, PROP_UNIQ_KEY, StoredMessage

log = logging.getLogger("tidemq.broker")


PROP_REAL_TOPIC = "REAL_TOPIC"
PROP_REAL_QID = "REAL_QID"
PROP_DELIVER_MS = "TIMER_DELIVER_MS"                # epoch ms a delayed message becomes visible
PROP_TXN_CLIENT = "TRAN_CLIENT_ID"                  # x-mq-client-id of the half message's sender
PARKING = frozenset((PROP_REAL_TOPIC, PROP_REAL_QID, PROP_TXN_CLIENT))


def delivery_ms(ts) -> int:
    """A Timestamp as epoch ms. The Python client puts epoch *milliseconds* in ``seconds``
    (docs/broker-protocol.md, P11): a value above 1e11 seconds (year 5138) is read as ms."""
    if ts.seconds > 10**11:
        return ts.seconds
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def park(m: Message, topic: str, extra: dict[str, str] | None = None) -> Message:
    """``m`` (bound for its real topic) as a message of system topic ``topic``, queue 0."""
    props = dict(m.properties or {})
    if not props.get(PROP_UNIQ_KEY):
        props[PROP_UNIQ_KEY] = uuid.uuid4().hex.upper()     # a move is recognised by it
    props[PROP_REAL_TOPIC] = m.topic
    if m.queue_id is not None:
        props[PROP_REAL_QID] = str(m.queue_id)
    if extra:
        props.update(extra)
    return Message(topic=topic, body=m.body, tags=m.tags, keys=m.keys or None, properties=props, queue_id=0,
                   flag=m.flag, sys_flag=m.sys_flag, born_timestamp_ms=m.born_timestamp_ms, born_host=m.born_host)


def unpark(s: StoredMessage, queue_count: int) -> Message:
    """The parked message ``s`` as the message of its real topic (same UNIQ_KEY)."""
    props = {k: v for k, v in s.properties.items() if k not in PARKING and k not in (PROP_TAGS, PROP_KEYS)}
    qid = s.properties.get(PROP_REAL_QID)
    q = int(qid) if qid is not None and qid.isdigit() and int(qid) < queue_count else None
    return Message(topic=s.properties[PROP_REAL_TOPIC], body=s.body, tags=s.tags, keys=s.keys or None,
                   properties=props, queue_id=q, flag=s.flag, sys_flag=s.sys_flag,
                   born_timestamp_ms=s.born_timestamp_ms, born_host=s.born_host)


def already_moved(store: MessageStore, s: StoredMessage) -> bool:
    """Whether the parked message ``s`` was put into its real topic already (by UNIQ_KEY).
    Without the hash index this cannot be known: False (at-least-once), said in the log."""
    if not store.config.index_enabled:
        log.warning("index disabled: message %s may be moved to its topic twice after a crash", s.msg_id)
        return False
    topic = s.properties.get(PROP_REAL_TOPIC, "")
    # the whole log: a copy past the readable end (a promoted leader's high watermark not yet where its
    # old leader's was) is in this log all the same; moved again, it was there twice
    return bool(store.query_by_key(topic, s.msg_id, max_count=1, begin_ms=s.store_timestamp_ms, whole_log=True))


def batches(store: MessageStore, topic: str, offset: int, limit: int) -> Iterator[tuple[int, list[StoredMessage]]]:
    """Queue 0 of a system topic read from ``offset``, at most ``limit`` offsets on:
    (the next offset, the messages) per batch.
    A consume-queue unit there whose walk aside failed (store/unit_repair.py WalkFailed: looked for
    again later) ends it: read again from it at the next round."""
    start = offset
    while offset - start < limit:
        try:
            g = store.get("%sys", topic, 0, offset, max_count=min(32, limit - (offset - start)))
        except WalkFailed:
            return
        if g.next_offset <= offset:
            return
        offset = g.next_offset
        yield offset, g.messages


# read_at's answer for a message that is there but not readable now: past the readable end (a promoted
# leader's high watermark behind its old leader's), the store not running, or its consume-queue unit
# damaged and the walk aside for its record failed (WalkFailed: walked again later). Read it again later
NOT_READABLE = object()
_NOT_NOW = frozenset((GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.OFFSET_OVERFLOW_BADLY, GetStatus.NO_MESSAGE_IN_QUEUE,
                      GetStatus.SERVICE_NOT_AVAILABLE))


def read_at(store: MessageStore, topic: str, offset: int):
    """The message at ``offset`` of queue 0 of a system topic (None: cleaned away; NOT_READABLE)."""
    try:
        g = store.get("%sys", topic, 0, offset, max_count=1)
    except WalkFailed:
        return NOT_READABLE
    if g.messages and g.messages[0].queue_offset == offset:
        return g.messages[0]
    return NOT_READABLE if g.status in _NOT_NOW else None


def may_be_taken_back(store: MessageStore) -> Callable[[int], bool]:
    """For a copy put before its fsync (ASYNC_FLUSH: a timer's move, a commit's put), by where it ends
    in the log: True while a failure of the log may still take it back, or took it and its cut_back
    (service.after_log_failure, on the loop) has not run yet -- the failure moved the flushed offset
    to where the log resumes, past what it took, before its listeners heard of it."""
    flushed = store.commit_log.flushed_offset       # (first: a failure is recorded before it moves this)
    failures = store.log_failures
    return lambda end: end > flushed or any(f.covers(end) for f in failures)


def ensure_topic(store: MessageStore, topic: str) -> None:
    if store.queue_count(topic) == 0:
        store.create_topic(topic, 1)
