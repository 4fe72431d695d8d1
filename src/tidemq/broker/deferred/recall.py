"""RecallMessage (RocketMQ 5.3.2+): withdraw a DELAY message before its time.

A DELAY message parked in the schedule topic (timer.py) is answered, in its SendResultEntry, a
*recall handle*: RocketMQ's form (``v1 topic brokerName deliverMs messageId``, base64url) with the
schedule offset added before the message id (which comes last, so it may hold anything), so a
recall finds the message with one read (spaces of the broker name become ``_``)::

    base64url("v1 <topic> <broker name> <deliver ms> <schedule offset> <message id>")

RecallMessage{topic, recall_handle} then:

* OK with the message id: the message will never be delivered (Timer.recall: durable before the
  answer); recalling it again answers OK again (as RocketMQ, which puts one more delete marker);
* ILLEGAL_DELIVERY_TIME (40012): its time has come, it was delivered (or is being moved) and cannot be
  taken back. RocketMQ's broker answers ILLEGAL_OPERATION ("recall failed, timestamp invalid"),
  which its proxy turns into INTERNAL_SERVER_ERROR, a code the clients retry; this one says what
  happened and is not retried;
* BAD_REQUEST: a handle that is not one (not base64, another version, fewer words), or one of
  another topic than the request's (RocketMQ: "topic not match") or of another broker;
* NOT_FOUND: a well-formed handle naming no waiting message (cleaned away, or never one of this
  broker's: the message at its offset is another);
* MESSAGE_PROPERTY_CONFLICT_WITH_TYPE: the topic takes no DELAY messages (its message type), as
  RocketMQ's proxy checks before it recalls.
"""

from __future__ import annotations

import base64
import binascii
from typing import NamedTuple

VERSION = "v1"


class Handle(NamedTuple):
    topic: str
    broker: str
    deliver_ms: int
    message_id: str
    offset: int          # in the schedule topic's queue 0


def broker_word(name: str) -> str:
    """The broker name as a handle holds it."""
    return name.replace(" ", "_") or "_"


def encode(h: Handle) -> str:
    raw = " ".join((VERSION, h.topic, broker_word(h.broker), str(h.deliver_ms), str(h.offset), h.message_id))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")


def decode(handle: str) -> Handle | None:
    """The handle's parts, or None when it is not one of ours (at most 1 KiB read)."""
    if not handle or len(handle) > 1024:
        return None
    try:
        raw = base64.urlsafe_b64decode(handle.encode("ascii")).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeError):
        return None
    words = raw.split(" ", 5)
    if len(words) != 6 or words[0] != VERSION or not words[3].isdecimal() or not words[4].isdecimal():
        return None
    if len(words[3]) > 18 or len(words[4]) > 18:
        return None
    return Handle(words[1], words[2], int(words[3]), words[5], int(words[4]))


def answer(request, timer, store, broker_name: str, leading: bool) -> tuple[int, str, str]:
    """RecallMessage: (code, text, message id) as the module's docstring says."""
    from ...protocol.stubs import Code
    from ..topic_names import SCHEDULE_TOPIC
    from .parking import PROP_DELIVER_MS, PROP_REAL_TOPIC, NOT_READABLE, read_at
    from .timer import Recall

    topic = request.topic.name
    if not leading:
        return Code.FORBIDDEN, "this broker follows its group's leader: recall there", ""
    if not topic or store.queue_count(topic) == 0:
        return Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist", ""
    kind = store.message_type(topic)
    if kind not in (None, "mixed", "delay"):
        return (Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                f"TopicMessageType validate failed, the expected type is {kind.upper()}, but actual type is DELAY", "")
    h = decode(request.recall_handle)
    if h is None:
        return Code.BAD_REQUEST, "recall failed, the recall handle is invalid", ""
    if h.topic != topic:
        return Code.BAD_REQUEST, f"recall failed, topic not match: the handle is of topic {h.topic!r}", ""
    if h.broker != broker_word(broker_name):
        return Code.BAD_REQUEST, f"recall failed, the handle is of broker {h.broker!r}, not this one", ""
    s = read_at(store, SCHEDULE_TOPIC, h.offset)
    if (s is None or s is NOT_READABLE or s.msg_id != h.message_id or s.properties.get(PROP_REAL_TOPIC) != topic
            or s.properties.get(PROP_DELIVER_MS) != str(h.deliver_ms)):
        return Code.NOT_FOUND, f"recall failed, no delayed message {h.message_id!r} waits here (cleaned away?)", ""
    try:
        r = timer.recall(h.offset, h.deliver_ms, store.clock.now_ms())
    except OSError as e:
        return Code.INTERNAL_SERVER_ERROR, f"recall failed, the timer's checkpoint could not be written: {e}", ""
    if r is Recall.RECALLED:
        return Code.OK, "", h.message_id
    if r is Recall.DUE:
        return (Code.ILLEGAL_DELIVERY_TIME, f"recall failed, message {h.message_id!r} was due at {h.deliver_ms} "
                                            f"and has been delivered", "")
    return Code.NOT_FOUND, f"recall failed, no delayed message {h.message_id!r} waits here", ""
