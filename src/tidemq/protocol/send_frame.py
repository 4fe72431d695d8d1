"""The frames of ``/tidemq.Data/SendRecords``: a batch of messages of one topic, and the
per-message answers. Bytes in, values out; no I/O, no protobuf per message.

Request, little-endian::

    off   size  field
      0     4   MAGIC b"TQB1"
      4     4   COUNT n (u32, 1 .. MAX_COUNT)
      8     2   TOPICLEN t (u16)
     10     t   TOPIC (ascii)
   10+t   20n   LENGTHS: per message 5 x u32: id, tags, keys, properties, body
          ...   DATA: per message id | tags | keys | properties | body, back to back;
                the frame ends exactly where the last body does

* id: the message id (UTF-8, 1 .. ID_MAX_BYTES): its UNIQ_KEY; a resend with the same
  id is answered from the broker's dedup window instead of being stored twice.
* tags: UTF-8, empty for none.
* keys: UTF-8, the keys joined by one space (the store's KEYS property), empty for none.
* properties: the user properties as the store encodes them, ``name\\x01value\\x02`` per
  property (UTF-8), empty for none.
* body: 1 byte or more.

Every message is NORMAL: FIFO (message groups), DELAY and TRANSACTION messages go through
SendMessage. What the broker checks per message (separators in text fields, reserved
property names, UTF-8) is in broker/produce/send_records.py; this module checks the framing.

Response: ``u32 header length | header JSON | n x ENTRY`` with the header
``{"code", "message", "count", "messages": {"<index>": "<text>"}, "duplicates": [<index>, ...]}``
(code as the protocol's Code; ``messages`` holds the text of the entries that have one, for
people; ``duplicates`` the indexes of the entries answered from the broker's dedup window: a
resend of a message already stored, entry code OK with the first store's offset) and ENTRY
``<iiq``: code, queue id, queue offset (-1 when nothing was stored).

Compatibility: ``duplicates`` is optional, absent when no entry is a duplicate (and from
brokers that predate it: then no entry is known to be one). A decoder ignores header keys
it does not know, so a reader of the first version of the response reads this one. The
request's MAGIC is its version: a new request layout gets a new MAGIC, which a broker that
does not know it answers with BAD_REQUEST.
"""

from __future__ import annotations

import json
import struct
import sys
from array import array
from itertools import chain
from typing import Iterable, Sequence

from .data import FrameError

__all__ = ["MAGIC", "HEAD", "ENTRY", "MAX_COUNT", "ID_MAX_BYTES", "FrameError", "encode_request", "decode_request",
           "encode_response", "encode_response_columns", "decode_response", "decode_response_columns", "duplicates"]

MAGIC = b"TQB1"
HEAD = struct.Struct("<4sIH")
assert HEAD.size == 10
LENGTHS_PER_MESSAGE = 5
MAX_COUNT = 65536
ID_MAX_BYTES = 128
ENTRY = struct.Struct("<iiq")
assert ENTRY.size == 16
U32 = struct.Struct("<I")
_ENTRY_DTYPE = [("code", "<i4"), ("queue_id", "<i4"), ("offset", "<i8")]     # ENTRY as a numpy dtype
_BIG_ENDIAN = sys.byteorder != "little"


def encode_request(topic: str, bodies: Sequence[bytes], ids: Sequence[bytes], tags: Sequence[bytes] | None = None,
                   keys: Sequence[bytes] | None = None, properties: Sequence[bytes] | None = None) -> bytes:
    """One frame. ``ids`` and ``bodies`` are per message; ``tags`` / ``keys`` / ``properties``
    per message or None (all empty); every field already encoded (see the module docstring)."""
    n = len(bodies)
    t = topic.encode("ascii")
    lengths = array("I")
    parts = [HEAD.pack(MAGIC, n, len(t)), t, b""]
    add = parts.append
    if tags is None and keys is None and properties is None:
        # ids and bodies only (the common batch): the lengths filled by column, the data in one join
        if len(ids) != n:
            raise ValueError("ids, tags, keys and properties need one entry per body")
        lengths = array("I", bytes(4 * LENGTHS_PER_MESSAGE * n))
        lengths[0::LENGTHS_PER_MESSAGE] = array("I", map(len, ids))
        lengths[4::LENGTHS_PER_MESSAGE] = array("I", map(len, bodies))
        if _BIG_ENDIAN:
            lengths.byteswap()
        parts[2] = lengths.tobytes()
        parts += chain.from_iterable(zip(ids, bodies))
        return b"".join(parts)
    else:
        none = [b""] * n
        for mid, tg, ks, ps, body in zip(ids, tags or none, keys or none, properties or none, bodies):
            lengths.extend((len(mid), len(tg), len(ks), len(ps), len(body)))
            add(mid)
            add(tg)
            add(ks)
            add(ps)
            add(body)
    if len(lengths) != LENGTHS_PER_MESSAGE * n:
        raise ValueError("ids, tags, keys and properties need one entry per body")
    if _BIG_ENDIAN:
        lengths.byteswap()
    parts[2] = lengths.tobytes()
    return b"".join(parts)


def decode_request(raw: bytes) -> tuple[str, list[tuple[bytes, bytes, bytes, bytes, bytes]]]:
    """(topic, [(id, tags, keys, properties, body)]); FrameError when the framing is wrong."""
    if len(raw) < HEAD.size:
        raise FrameError(f"{len(raw)} bytes: shorter than the {HEAD.size}-byte head")
    magic, n, tl = HEAD.unpack_from(raw, 0)
    if magic != MAGIC:
        raise FrameError(f"magic {magic!r}, expected {MAGIC!r}")
    if not 1 <= n <= MAX_COUNT:
        raise FrameError(f"count {n} outside 1 .. {MAX_COUNT}")
    t0 = HEAD.size
    l0 = t0 + tl
    d0 = l0 + 4 * LENGTHS_PER_MESSAGE * n
    if d0 > len(raw):
        raise FrameError(f"{len(raw)} bytes cannot hold the topic and the lengths of {n} messages")
    try:
        topic = raw[t0:l0].decode("ascii")
    except UnicodeDecodeError as e:
        raise FrameError(f"the topic is not ascii: {e}") from None
    lengths = array("I")
    lengths.frombytes(raw[l0:d0])
    if _BIG_ENDIAN:
        lengths.byteswap()
    if d0 + sum(lengths) != len(raw):
        raise FrameError(f"the lengths add up to {sum(lengths)} bytes of data, the frame has {len(raw) - d0}")
    out = []
    add = out.append
    p = d0
    it = iter(lengths)
    for li, lt, lk, lp, lb in zip(it, it, it, it, it):
        a = p + li
        b = a + lt
        c = b + lk
        d = c + lp
        e = d + lb
        add((raw[p:a], raw[a:b], raw[b:c], raw[c:d], raw[d:e]))
        p = e
    return topic, out


def encode_response(code: int, message: str, entries: Sequence[tuple[int, int, int]] = (),
                    texts: dict[int, str] | None = None, duplicates: Iterable[int] = ()) -> bytes:
    """``entries``: (code, queue id, queue offset) per message; ``texts``: index -> text;
    ``duplicates``: indexes of the entries answered from the dedup window."""
    header = {"code": code, "message": message, "count": len(entries),
              "messages": {str(i): v for i, v in (texts or {}).items()}}
    dups = sorted(duplicates)
    if dups:
        header["duplicates"] = dups
    h = json.dumps(header).encode()
    pack = ENTRY.pack
    return b"".join([U32.pack(len(h)), h, *[pack(c, q, o) for c, q, o in entries]])


def encode_response_columns(code: int, message: str, codes, queue_ids, offsets, texts: dict[int, str] | None = None,
                            duplicates: Iterable[int] = ()) -> bytes:
    """encode_response with the entries as three columns (int32, int32, int64 buffers or
    sequences of one length): one table write for the whole batch."""
    import numpy as np          # the broker's (the client encodes no response: no numpy there)
    n = len(codes)
    table = np.empty(n, _ENTRY_DTYPE)
    table["code"] = codes
    table["queue_id"] = queue_ids
    table["offset"] = offsets
    header = {"code": code, "message": message, "count": n,
              "messages": {str(i): v for i, v in (texts or {}).items()}}
    dups = sorted(duplicates)
    if dups:
        header["duplicates"] = dups
    h = json.dumps(header).encode()
    return b"".join([U32.pack(len(h)), h, table.tobytes()])


def _check_duplicates(header: dict, n: int) -> None:
    dups = header.get("duplicates", [])
    if not isinstance(dups, list) or not all(type(i) is int and 0 <= i < n for i in dups):
        raise ValueError(f"duplicates {dups!r} are not indexes of the {n} entries")


def decode_response(raw: bytes) -> tuple[dict, list[tuple[int, int, int]]]:
    """(header, [(code, queue id, queue offset)]); FrameError on a response that is not one."""
    header, codes, queue_ids, offsets = decode_response_columns(raw)
    return header, list(zip(codes, queue_ids, offsets))


def decode_response_columns(raw: bytes) -> tuple[dict, array, array, array]:
    """decode_response with the entries as three arrays (array.array: no numpy on the client):
    (header, codes "i", queue ids "i", queue offsets "q"); no object per entry."""
    try:
        (hl,) = U32.unpack_from(raw, 0)
        header = json.loads(bytes(raw[4:4 + hl]))
        n = int(header.get("count", 0))
        if len(raw) - 4 - hl != n * ENTRY.size:
            raise ValueError(f"{len(raw) - 4 - hl} bytes for {n} entries")
        _check_duplicates(header, n)
    except (struct.error, ValueError, TypeError, AttributeError) as e:
        raise FrameError(f"malformed SendRecords response: {e}") from None
    table = memoryview(raw)[4 + hl:]
    ints, longs = array("i"), array("q")
    ints.frombytes(table)                       # per entry: code, queue id, offset (two ints)
    longs.frombytes(table)                      # per entry: (code, queue id), offset
    if _BIG_ENDIAN:
        ints.byteswap()
        longs.byteswap()
    return header, ints[0::4], ints[1::4], longs[1::2]


def duplicates(header: dict) -> frozenset[int]:
    """The indexes of the entries a decoded response's header names as duplicates."""
    return frozenset(header.get("duplicates", ()))
