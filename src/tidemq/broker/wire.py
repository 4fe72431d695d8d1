"""A stored message as the clients receive it (apache.rocketmq.v2.Message).

The body digest is MD5 in upper-case hex: the one digest the Python, Node and
Java clients all verify the same way (docs/broker-protocol.md, 5.2; DESIGN.md
said CRC32, which only the Python client checks as we would write it).
"""

from __future__ import annotations

import hashlib

from google.protobuf import duration_pb2, timestamp_pb2

from ..store.codec import PROP_KEYS, PROP_TAGS, PROP_UNIQ_KEY, StoredMessage
from .convert import PROP_BORN_HOST, PROP_MESSAGE_GROUP, PROP_MESSAGE_TYPE, SYS_FLAG_COMPRESSED
from .proto import DigestType, Encoding, MessageType, pb
from .sysmsg import PARKING, PROP_DELIVER_MS

INTERNAL = frozenset((PROP_TAGS, PROP_KEYS, PROP_UNIQ_KEY, PROP_MESSAGE_GROUP, PROP_MESSAGE_TYPE, PROP_BORN_HOST,
                      PROP_DELIVER_MS, *PARKING))


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
    deliver = props.get(PROP_DELIVER_MS)
    if deliver:
        sp.delivery_timestamp.CopyFrom(_ts(int(deliver)))
    return pb.Message(topic=pb.Resource(name=m.topic), body=m.body, system_properties=sp,
                      user_properties={k: v for k, v in props.items() if k not in INTERNAL})
