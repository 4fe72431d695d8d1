"""The frames of ``/tidemq.Data/PullRecords``: records of one queue by offset, as the commit
log stores them, back to back in one response (no protobuf per message). Bytes in, values
out; no I/O.

Request: UTF-8 JSON ``{"topic", "queue_id", "offset", "max_count", "max_bytes", "wait_ms", "end"}``;
all after ``offset`` may be left out (4096, 16 MiB, 0, none). ``max_count`` is clamped to
1 .. COUNT_MAX, ``wait_ms`` to 0 .. WAIT_MS_MAX; the broker clamps ``max_bytes`` to what it
can answer (BYTES_MAX and its gRPC message limit). ``end`` (PullRecordsStream only): the
offset the stream stops at, exclusive.

``/tidemq.Data/PullRecordsStream`` takes the same request and answers a stream of responses,
each as PullRecords answers, each from where the one before ended (broker/consume/pull_records.py
says when it ends).

Response::

    u32 LE    header length h
    h         header, UTF-8 JSON: {"code", "message", "status", "next_offset", "min_offset",
              "max_offset", "count", "crc32", "bytes_max"}
    4*count   record sizes, i32 LE
    ...       the records, back to back, in the commit-log layout of record/codec.py

``crc32`` (with records only): the CRC-32 of the sizes and the records as sent. The broker
checked every record's own CRCs before sending it; this one shows the frame arrived as sent,
so a reader that checks it (tidemq.client: RecordsResult.checked) need not check every record
again. A broker that does not send it leaves that to the reader.

``bytes_max`` (with records only): the broker's own bound on an answer, whatever a request asks:
its records and their sizes (4 bytes each) fit in it. A reader that keeps pulls under way sizes
them to it, so that an answer ends where its count says and the pull after it, asked from there,
is the one it needs next (the Spark JVM reader's BrokerRangeReader). Absent: not known.

The header may end in spaces (JSON's whitespace): a broker that lays the records out first,
with room for the header before them (record/framing.py), pads the header to that room.

``code`` is the protocol's Code (OK, MESSAGE_NOT_FOUND, ILLEGAL_OFFSET, TOPIC_NOT_FOUND,
BAD_REQUEST, INTERNAL_SERVER_ERROR), ``status`` the store's GetStatus name; what each code
means and where ``next_offset`` points: docs/broker-protocol.md, 4.11.
"""

from __future__ import annotations

import json
import struct
from typing import NamedTuple

from ..record.crc import crc32
from .data import FrameError

HEAD = struct.Struct("<I")
assert HEAD.size == 4
COUNT_MAX = 65536
BYTES_MAX = 64 << 20
WAIT_MS_MAX = 60_000
COUNT_DEFAULT = 4096
BYTES_DEFAULT = 16 << 20


class PullRequest(NamedTuple):
    topic: str
    queue_id: int
    offset: int
    max_count: int = COUNT_DEFAULT
    max_bytes: int = BYTES_DEFAULT
    wait_ms: float = 0.0
    end: int | None = None          # PullRecordsStream: where the stream stops (None: see the broker)


def encode_request(topic: str, queue_id: int, offset: int, max_count: int = COUNT_DEFAULT,
                   max_bytes: int = BYTES_DEFAULT, wait_ms: float = 0, end: int | None = None) -> bytes:
    req = {"topic": topic, "queue_id": queue_id, "offset": offset, "max_count": max_count, "max_bytes": max_bytes,
           "wait_ms": wait_ms}
    if end is not None:
        req["end"] = end
    return json.dumps(req).encode()


def decode_request(raw: bytes) -> PullRequest:
    """The request, ``max_count`` and ``wait_ms`` clamped; FrameError when it is not one."""
    try:
        req = json.loads(raw)
        wait_ms = float(req.get("wait_ms", 0))
        if wait_ms != wait_ms:
            raise ValueError("wait_ms is not a number")
        end = req.get("end")
        return PullRequest(str(req["topic"]), int(req["queue_id"]), int(req["offset"]),
                           max(1, min(int(req.get("max_count", COUNT_DEFAULT)), COUNT_MAX)),
                           int(req.get("max_bytes", BYTES_DEFAULT)),
                           max(0.0, min(wait_ms, WAIT_MS_MAX)), None if end is None else int(end))
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as e:
        raise FrameError(f"malformed PullRecords request: {type(e).__name__}: {e}") from None


def encode_response(header: dict, sizes=None, data: bytes = b"") -> bytes:
    """``sizes``: the record sizes as little-endian i32 (anything with ``tobytes()``: a numpy
    array, array("i")), or None for a response without records; with records, the header gets
    their ``crc32`` (frame_crc)."""
    raw_sizes = sizes.tobytes() if sizes is not None else b""
    if sizes is not None:
        header = {**header, "crc32": frame_crc(raw_sizes, data)}
    h = json.dumps(header).encode()
    return b"".join((HEAD.pack(len(h)), h, raw_sizes, data))


def encode_head(header: dict, records_crc: int, room: int) -> bytes | None:
    """The response's front for records laid out after ``room`` bytes (record/framing.py): the
    header length and the header with ``crc32`` (``records_crc``: frame_crc of the sizes and
    records), padded with spaces to exactly ``room`` bytes; None when it does not fit."""
    h = json.dumps({**header, "crc32": records_crc}).encode()
    if HEAD.size + len(h) > room:
        return None
    return HEAD.pack(room - HEAD.size) + h.ljust(room - HEAD.size)


def frame_crc(sizes, records) -> int:
    """CRC-32 of a response's sizes followed by its records (one pass in C)."""
    return crc32(records, crc32(sizes))


def decode_response(raw: bytes) -> tuple[dict, memoryview, memoryview]:
    """(header, sizes bytes (i32 little-endian), records bytes)."""
    (hl,) = HEAD.unpack_from(raw, 0)
    header = json.loads(bytes(raw[4:4 + hl]))
    mv = memoryview(raw)
    s0 = 4 + hl
    s1 = s0 + 4 * int(header.get("count", 0))
    return header, mv[s0:s1], mv[s1:]
