"""A message between the wire (apache.rocketmq.v2.Message) and the store, both directions.

Wire -> store (:func:`to_store`, a sent message): what the store keeps besides topic,
body, tags and keys is the client's message id as UNIQ_KEY (RocketMQ's name, so it is
indexed and is the message id on delivery), the message group as ``__SHARDINGKEY``
(RocketMQ's name), the type as ``__MSGTYPE``, and the born host string as ``__BORNHOST``
when it is not an ipv4 address. Body encoding GZIP is sys flag bit 0x1 (RocketMQ's
COMPRESSED_FLAG). A FIFO message's group picks its queue (:func:`fifo_queue`, in the send path).
Kept too, as properties (RocketMQ's names where it has them), and given back on delivery: the
trace context (``TRACE_CONTEXT``), a transaction message's orphan recovery time
(``CHECK_IMMUNITY_TIME_IN_SECONDS``, RocketMQ's, whole seconds rounded up), a LITE message's lite
topic (``__LITE_TOPIC``) and a PRIORITY message's priority (``__PRIORITY``).

Store -> wire (:func:`to_wire`, a delivered message): the properties above become system
properties again; the ones the broker writes itself (INTERNAL) are not shown to the
client. The body digest is MD5 in upper-case hex: the one digest the Python, Node and
Java clients all verify the same way (docs/broker-protocol.md, 5.2; DESIGN.md said
CRC32, which only the Python client checks as we would write it).
"""

from __future__ import annotations

import hashlib
import zlib

from google.protobuf import duration_pb2, timestamp_pb2

from ..protocol.stubs import MESSAGE_TYPE_NAMES, DigestType, Encoding, MessageType, pb
from ..store import Message
from ..record.codec import PROP_KEYS, PROP_TAGS, PROP_UNIQ_KEY, RECORD_CRC_NAME, StoredMessage, check_property_text
from .deferred.parking import PARKING, PROP_DELIVER_MS
from .topic_names import DLQ_PREFIX

PROP_ORIGIN_TOPIC = "ORIGIN_TOPIC"      # a dead letter's topic before %DLQ%<group> (consume/receive.py)
PROP_ORIGIN_QUEUE_OFFSET = "ORIGIN_QUEUE_OFFSET"    # ... and its queue offset there

PROP_MESSAGE_GROUP = "__SHARDINGKEY"
PROP_MESSAGE_TYPE = "__MSGTYPE"
PROP_BORN_HOST = "__BORNHOST"
PROP_TRACE_CONTEXT = "TRACE_CONTEXT"
PROP_ORPHAN_CHECK_S = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROP_LITE_TOPIC = "__LITE_TOPIC"
PROP_PRIORITY = "__PRIORITY"
SYS_FLAG_COMPRESSED = 0x1

SUPPORTED_TYPES = (MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION,
                   MessageType.LITE, MessageType.PRIORITY)
# every property the broker writes itself: refused as a user property of a sent message (SendMessage:
# ILLEGAL_MESSAGE_PROPERTY_KEY, as RocketMQ's proxy refuses its MessageConst.STRING_HASH_SET; SendRecords:
# BAD_REQUEST), never shown as one on delivery. A dead letter's origin among them: sent by a client (to a
# %DLQ% topic, which a client may send to, as RocketMQ's proxy lets it), it would forge the
# dead_letter_queue a consumer is shown; a dead letter's origin topic is shown there. The record's own CRC
# property too (the store refused it as a malformed property: BAD_REQUEST)
INTERNAL = frozenset((PROP_TAGS, PROP_KEYS, PROP_UNIQ_KEY, PROP_MESSAGE_GROUP, PROP_MESSAGE_TYPE, PROP_BORN_HOST,
                      PROP_DELIVER_MS, PROP_TRACE_CONTEXT, PROP_ORPHAN_CHECK_S, PROP_LITE_TOPIC, PROP_PRIORITY,
                      PROP_ORIGIN_TOPIC, PROP_ORIGIN_QUEUE_OFFSET, RECORD_CRC_NAME, *PARKING))
# SystemProperties fields (by number) the common message never has: encoded_one leaves a message with
# any of them to to_store (as tidemq._accel.send_one does: it takes none of them)
_NOT_ONE = ("trace_context", "orphaned_transaction_recovery_duration", "dead_letter_queue", "lite_topic",
            "priority")


def fifo_queue(message_group: str, queue_count: int) -> int:
    """FIFO: a stable hash of the group picks the queue, so one group stays in order."""
    return zlib.crc32(message_group.encode("utf-8")) % queue_count


# Wire -> store ----------------------------------------------------------------------------
def to_store(m: "pb.Message") -> Message:
    """The store Message of a sent message, queue id None (a FIFO message's queue is picked by the
    send path: fifo_queue over the queues this broker writes)."""
    sp = m.system_properties
    props = dict(m.user_properties)
    if sp.message_id:
        props[PROP_UNIQ_KEY] = sp.message_id
    if sp.HasField("message_group") and sp.message_group:
        props[PROP_MESSAGE_GROUP] = sp.message_group
    props[PROP_MESSAGE_TYPE] = MESSAGE_TYPE_NAMES.get(sp.message_type or MessageType.NORMAL, "NORMAL")
    if sp.HasField("trace_context") and sp.trace_context:
        props[PROP_TRACE_CONTEXT] = sp.trace_context
    if sp.HasField("orphaned_transaction_recovery_duration"):
        d = sp.orphaned_transaction_recovery_duration
        props[PROP_ORPHAN_CHECK_S] = str(max(0, d.seconds + (1 if d.nanos > 0 else 0)))
    if sp.HasField("lite_topic"):
        props[PROP_LITE_TOPIC] = sp.lite_topic
    if sp.HasField("priority"):
        props[PROP_PRIORITY] = str(sp.priority)
    born_host = None
    if sp.born_host:
        if is_ipv4(sp.born_host):
            born_host = sp.born_host + ":0"
        else:
            props[PROP_BORN_HOST] = sp.born_host
    return Message(topic=m.topic.name, body=m.body, tags=sp.tag if sp.HasField("tag") and sp.tag else None,
                   keys=[k for k in sp.keys if k] or None, properties=props,
                   born_timestamp_ms=born_ms_of(sp), born_host=born_host, sys_flag=sys_flag_of(sp))


def is_ipv4(host: str) -> bool:
    """A dotted ipv4 address (the store keeps it in the record's born host field; anything else
    is the ``__BORNHOST`` property). Digits are what int() reads (str.isdecimal): str.isdigit takes
    a superscript two, which int() refuses."""
    parts = host.split(".")
    return len(parts) == 4 and all(p.isdecimal() and int(p) < 256 for p in parts)


def born_ms_of(sp: "pb.SystemProperties") -> int | None:
    if not sp.HasField("born_timestamp"):
        return None
    return sp.born_timestamp.seconds * 1000 + sp.born_timestamp.nanos // 1_000_000


def sys_flag_of(sp: "pb.SystemProperties") -> int:
    return SYS_FLAG_COMPRESSED if sp.body_encoding == Encoding.GZIP else 0


ONE_TYPES = (MessageType.NORMAL, MessageType.MESSAGE_TYPE_UNSPECIFIED)
_ONE_HEAD = f"{PROP_UNIQ_KEY}\x01{{}}\x02{PROP_MESSAGE_TYPE}\x01NORMAL\x02"


def encoded_one(m: "pb.Message") -> tuple | None:
    """The common sent message as the store's pre-encoded entry, or None for the general path
    (to_store): a NORMAL message with an id, maybe a tag, no keys, user properties, group or
    delivery time, an ipv4 born host or none. (topic, (body, properties), id, born ms, born host
    "ipv4:0" or None, sys flag): the properties to_store's Message gets from the store (UNIQ_KEY,
    __MSGTYPE, TAGS), in the same order, the same bytes (MessageStore.put_encoded's entry)."""
    sp = m.system_properties
    if (sp.message_type not in ONE_TYPES or m.user_properties or sp.keys or sp.HasField("message_group")
            or sp.HasField("delivery_timestamp") or any(sp.HasField(f) for f in _NOT_ONE)):
        return None
    mid, body = sp.message_id, m.body
    if not mid or not body or not check_property_text(mid):
        return None
    tags = sp.tag if sp.HasField("tag") else ""
    host = sp.born_host
    if host:
        if not is_ipv4(host):
            return None
        host += ":0"
    props = _ONE_HEAD.format(mid)
    if tags:
        if not check_property_text(tags):
            return None
        props = f"{props}{PROP_TAGS}\x01{tags}\x02"
    return m.topic.name, (body, props.encode("utf-8")), mid, born_ms_of(sp), host or None, sys_flag_of(sp)


def priority_of(props) -> int | None:
    """A stored message's priority (None: not a PRIORITY message, or a value that is not one)."""
    p = props.get(PROP_PRIORITY)
    if p is None:
        return None
    try:
        return int(p)
    except ValueError:
        return None


I32_MIN, I32_MAX, I64_MIN, I64_MAX = -2**31, 2**31 - 1, -2**63, 2**63 - 1


def _number(value: str | None, low: int, high: int) -> int | None:
    """A stored property's integer in [low, high] (its protobuf field's range), or None: the broker
    writes these names itself, but a client may have sent a user property of the name with anything
    in it (to_store keeps the user's properties); delivering such a message leaves the field out."""
    if not value:
        return None
    try:
        v = int(value)
    except ValueError:
        return None
    return v if low <= v <= high else None


# Store -> wire ----------------------------------------------------------------------------
def _ts(ms: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def to_wire(m: StoredMessage, attempt: int, handle: str, invisible_ms: int) -> "pb.Message":
    props = m.properties
    mtype = getattr(MessageType, props.get(PROP_MESSAGE_TYPE, "NORMAL"), MessageType.NORMAL)
    sp = pb.SystemProperties(
        message_id=m.msg_id,
        body_digest=pb.Digest(type=DigestType.MD5, checksum=hashlib.md5(m.body).hexdigest().upper()),
        body_encoding=Encoding.GZIP if m.sys_flag & SYS_FLAG_COMPRESSED else Encoding.IDENTITY,
        message_type=mtype,
        born_timestamp=_ts(m.born_timestamp_ms),
        born_host=props.get(PROP_BORN_HOST) or m.born_host.rsplit(":", 1)[0],
        store_timestamp=_ts(m.store_timestamp_ms),
        store_host=m.store_host,
        queue_id=m.queue_id,
        queue_offset=m.queue_offset,
        receipt_handle=handle,
        invisible_duration=duration_pb2.Duration(seconds=invisible_ms // 1000, nanos=(invisible_ms % 1000) * 1_000_000),
        delivery_attempt=attempt,
    )
    tags = m.tags
    if tags:
        sp.tag = tags
    if m.keys:
        sp.keys.extend(m.keys)
    group = props.get(PROP_MESSAGE_GROUP)
    if group:
        sp.message_group = group
    deliver = _number(props.get(PROP_DELIVER_MS), I64_MIN * 1000, I64_MAX * 1000 + 999)     # (seconds: an int64)
    if deliver is not None:
        sp.delivery_timestamp.CopyFrom(_ts(deliver))
    origin = props.get(PROP_ORIGIN_TOPIC)
    if origin and m.topic.startswith(DLQ_PREFIX):     # a dead letter: where it came from (receive.py _to_dlq)
        sp.dead_letter_queue.CopyFrom(pb.DeadLetterQueue(topic=origin, message_id=m.msg_id))
    trace = props.get(PROP_TRACE_CONTEXT)
    if trace:
        sp.trace_context = trace
    orphan = _number(props.get(PROP_ORPHAN_CHECK_S), 0, I64_MAX)
    if orphan is not None:
        sp.orphaned_transaction_recovery_duration.seconds = orphan
    lite = props.get(PROP_LITE_TOPIC)
    if lite:
        sp.lite_topic = lite
    prio = priority_of(props)
    if prio is not None and I32_MIN <= prio <= I32_MAX:
        sp.priority = prio
    return pb.Message(topic=pb.Resource(name=m.topic), body=m.body, system_properties=sp,
                      user_properties={k: v for k, v in props.items() if k not in INTERNAL})
