"""Messages between the wire (apache.rocketmq.v2.Message) and the store.

What the store keeps of a sent message (besides topic, body, tags and keys):
the client's message id as UNIQ_KEY (RocketMQ's name, so it is indexed and is the
message id on delivery), the message group as ``__SHARDINGKEY`` (RocketMQ's
name), the type as ``__MSGTYPE``, and the born host string as ``__BORNHOST``
when it is not an ipv4 address. Body encoding GZIP is sys flag bit 0x1
(RocketMQ's COMPRESSED_FLAG).
"""

from __future__ import annotations

import zlib

from ..store import Message
from ..store.codec import PROP_UNIQ_KEY
from .proto import MESSAGE_TYPE_NAMES, Encoding, MessageType, pb

PROP_MESSAGE_GROUP = "__SHARDINGKEY"
PROP_MESSAGE_TYPE = "__MSGTYPE"
PROP_BORN_HOST = "__BORNHOST"
SYS_FLAG_COMPRESSED = 0x1

SUPPORTED_TYPES = (MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION)


def fifo_queue(message_group: str, queue_count: int) -> int:
    """FIFO: a stable hash of the group picks the queue, so one group stays in order."""
    return zlib.crc32(message_group.encode("utf-8")) % queue_count


def to_store(m: "pb.Message", queue_count: int) -> Message:
    sp = m.system_properties
    props = dict(m.user_properties)
    if sp.message_id:
        props[PROP_UNIQ_KEY] = sp.message_id
    qid = None
    if sp.HasField("message_group") and sp.message_group:
        props[PROP_MESSAGE_GROUP] = sp.message_group
        qid = fifo_queue(sp.message_group, queue_count)
    props[PROP_MESSAGE_TYPE] = MESSAGE_TYPE_NAMES.get(sp.message_type or MessageType.NORMAL, "NORMAL")
    born_ms = sp.born_timestamp.seconds * 1000 + sp.born_timestamp.nanos // 1_000_000 if sp.HasField(
        "born_timestamp") else None
    born_host = None
    if sp.born_host:
        parts = sp.born_host.split(".")
        if len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts):
            born_host = sp.born_host + ":0"
        else:
            props[PROP_BORN_HOST] = sp.born_host
    return Message(topic=m.topic.name, body=m.body, tags=sp.tag if sp.HasField("tag") and sp.tag else None,
                   keys=[k for k in sp.keys if k] or None, properties=props, queue_id=qid,
                   born_timestamp_ms=born_ms, born_host=born_host,
                   sys_flag=SYS_FLAG_COMPRESSED if sp.body_encoding == Encoding.GZIP else 0)
