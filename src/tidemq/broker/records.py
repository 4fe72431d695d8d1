"""Raw record reads for bulk readers: ``/tidemq.Data/PullRecords``; the service also
serves ``/tidemq.Data/SendRecords``, raw batch sends (send_records.py).

PullMessage streams one protobuf Message per message: right for the official
clients, but the per-message protobuf and stream cost bounds a bulk reader at a
few thousand messages a second. This method answers a pull with the records as
the commit log stores them, back to back in one response, which tidemq.client
and the Spark source decode in bulk (store/codec's layout, spark/decode).

Request (JSON): {"topic", "queue_id", "offset", "max_count", "max_bytes", "wait_ms"}.
Response (bytes): ``u32 header length | header JSON | i32 LE sizes | records``;
header: {"code", "message", "status", "next_offset", "min_offset", "max_offset", "count"},
code as in the gRPC protocol's Code (OK, MESSAGE_NOT_FOUND, ILLEGAL_OFFSET,
TOPIC_NOT_FOUND, BAD_REQUEST, INTERNAL_SERVER_ERROR).
"""

from __future__ import annotations

import asyncio
import json
import struct

import grpc

from ..store import GetStatus, MessageStore
from ..store.codec import valid_topic
from .proto import Code
from .pull import long_poll
from .send_records import RecordSends

SERVICE = "tidemq.Data"
HEAD = struct.Struct("<I")
MAX_COUNT = 65536
MAX_BYTES = 64 << 20


def frame(header: dict, sizes=None, data: bytes = b"") -> bytes:
    """``sizes``: a little-endian i32 numpy array (or None)."""
    h = json.dumps(header).encode()
    return b"".join((HEAD.pack(len(h)), h, sizes.tobytes() if sizes is not None else b"", data))


def unframe(raw: bytes) -> tuple[dict, memoryview, memoryview]:
    """(header, sizes bytes (i32 little-endian), records bytes)."""
    (hl,) = HEAD.unpack_from(raw, 0)
    header = json.loads(bytes(raw[4:4 + hl]))
    mv = memoryview(raw)
    s0 = 4 + hl
    s1 = s0 + 4 * int(header.get("count", 0))
    return header, mv[s0:s1], mv[s1:]


class Records:
    def __init__(self, store: MessageStore, arrivals: asyncio.Event, max_message_bytes: int,
                 sends: RecordSends | None = None) -> None:
        self.store = store
        self.arrivals = arrivals
        self.max_message_bytes = max_message_bytes        # what gRPC lets the response carry
        self.sends = sends

    async def pull(self, raw: bytes, context) -> bytes:
        try:
            req = json.loads(raw)
            topic = str(req["topic"])
            qid, offset = int(req["queue_id"]), int(req["offset"])
            max_count = max(1, min(int(req.get("max_count", 4096)), MAX_COUNT))
            max_bytes = int(req.get("max_bytes", 16 << 20))
            wait_s = max(0.0, min(float(req.get("wait_ms", 0)) / 1000, 60.0))
        except (ValueError, KeyError, TypeError) as e:
            return frame({"code": Code.BAD_REQUEST, "message": f"malformed PullRecords request: {e}"})
        # the response must fit the gRPC limit: sizes, header and records together
        max_bytes = max(1, min(max_bytes, MAX_BYTES, self.max_message_bytes - 4 * max_count - 4096))
        if not valid_topic(topic) or not 0 <= qid < self.store.queue_count(topic):
            return frame({"code": Code.TOPIC_NOT_FOUND, "message": f"no queue {qid} in topic {topic!r}"})
        g = await long_poll(lambda: self.store.get_raw(topic, qid, offset, max_count, max_bytes), self.arrivals,
                            wait_s, context)
        head = {"status": g.status.name, "next_offset": g.next_offset, "min_offset": g.min_offset,
                "max_offset": g.max_offset, "count": 0}
        if g.status is GetStatus.FOUND:
            sizes, data = g.records
            head.update(code=Code.OK, count=len(sizes))
            return frame(head, sizes, data)
        if g.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
            head.update(code=Code.ILLEGAL_OFFSET,
                        message=f"{g.status.name}: queue holds [{g.min_offset}, {g.max_offset})")
        elif g.status is GetStatus.SERVICE_NOT_AVAILABLE:
            head.update(code=Code.INTERNAL_SERVER_ERROR, message="the store is not running")
        else:
            head.update(code=Code.MESSAGE_NOT_FOUND, message=g.status.name)
        return frame(head)

    def handler(self) -> grpc.GenericRpcHandler:
        methods = {"PullRecords": grpc.unary_unary_rpc_method_handler(self.pull)}
        if self.sends is not None:
            methods["SendRecords"] = grpc.unary_unary_rpc_method_handler(self.sends.send)
        return grpc.method_handlers_generic_handler(SERVICE, methods)
