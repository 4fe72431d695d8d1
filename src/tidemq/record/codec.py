"""Commit-log record codec: bytes in, values out. No I/O.

Record layout (RocketMQ message format v1, big-endian), fixed overhead 91 bytes::

    off  size  field
      0   4    TOTALSIZE                  whole record, this field included
      4   4    MAGIC                      0xDAA320A7 (BLANK: 0xCBD43194)
      8   4    BODYCRC                    zlib.crc32(body) & 0x7FFFFFFF (as RocketMQ's UtilAll.crc32)
     12   4    QUEUEID
     16   4    FLAG
     20   8    QUEUEOFFSET                position of the message in its consume queue
     28   8    PHYSICALOFFSET             commit-log offset of this record
     36   4    SYSFLAG
     40   8    BORNTIMESTAMP              ms
     48   8    BORNHOST                   ipv4 (4) + port (i32)
     56   8    STORETIMESTAMP             ms
     64   8    STOREHOST                  ipv4 (4) + port (i32)
     72   4    RECONSUMETIMES
     76   8    PREPAREDTRANSACTIONOFFSET
     84   4    BODYLEN
     88   n    BODY
   88+n   1    TOPICLEN (u8, topic <= 127 bytes)
          t    TOPIC (ascii)
          2    PROPERTIESLEN (i16, <= 32767)
          p    PROPERTIES  name\\x01value\\x02name\\x01value\\x02 (utf-8)

Record CRC: BODYCRC covers only the body, so a write torn inside the topic or the
properties would pass it (the simulation found exactly that after a power loss).
tidemq therefore ends the properties with ``__CRC32#\x01`` + 10 decimal digits +
``\x02``: the record CRC, ``crc32(header, crc32(tail))`` where *header* is the 88
bytes up to BODYLEN (BODYCRC among them, so the body is covered through it) and
*tail* the TOPICLEN byte through the properties up to the digits. The tail's CRC
depends only on topic and properties, so the writer computes it once per
(topic, properties) and per record pays for 88 bytes of CRC. Readers hide the property.
Verification requires it: a record without it is invalid (a tear that zeroed the
tail of the properties must not pass as "a record without the property"). The last
byte, the ``\x02`` after the digits, is outside the CRC: every check requires it as
written.

A segment that cannot take the next record ends with a BLANK record:
``[i32 remaining bytes][i32 0xCBD43194]`` followed by anything; readers go to
the next segment. Tags and keys travel as the properties TAGS and KEYS (keys
joined by a space), the producer's unique id as UNIQ_KEY, as RocketMQ does.
"""

from __future__ import annotations

import re
import struct
from functools import lru_cache
from typing import Iterable, Mapping

from ..accel import ACCEL as _ACCEL
from .crc import crc32

MAGIC = 0xDAA320A7 - (1 << 32)          # as a signed i32
BLANK_MAGIC = 0xCBD43194 - (1 << 32)
MAGIC_BYTES = struct.pack(">I", 0xDAA320A7)

HEADER = struct.Struct(">iiiiiqqiq8sq8siqi")   # up to and including BODYLEN
assert HEADER.size == 88
OFF_BODY = HEADER.size                      # the body starts right after the header (BODYLEN its last field)
TOPIC_LEN = struct.Struct(">B")
PROP_LEN = struct.Struct(">h")
FIXED_OVERHEAD = HEADER.size + TOPIC_LEN.size + PROP_LEN.size
assert FIXED_OVERHEAD == 91
SIZE_MAGIC = struct.Struct(">ii")
assert SIZE_MAGIC.size == 8
BLANK_MIN = SIZE_MAGIC.size                 # room always kept for the BLANK record

PROPERTIES_MAX_BYTES = 32767
RECORD_CRC_NAME = "__CRC32#"
RECORD_CRC_MARK = b"__CRC32#\x01"
RECORD_CRC_DIGITS = 10                      # the record CRC as 10 decimal digits
RECORD_CRC_TAIL = RECORD_CRC_MARK + b"0" * RECORD_CRC_DIGITS + b"\x02"   # ends every record's properties
RECORD_CRC_TAIL_LEN = len(RECORD_CRC_TAIL)
assert RECORD_CRC_TAIL_LEN == 20
# the digits sit CRC_DIGITS_BACK bytes before a record's end: record[end - 11:end - 1]
CRC_DIGITS_BACK = RECORD_CRC_DIGITS + 1
assert CRC_DIGITS_BACK == 11
# after the body, a record holds at least TOPICLEN, PROPERTIESLEN and the record-CRC tail
TAIL_MIN = TOPIC_LEN.size + PROP_LEN.size + RECORD_CRC_TAIL_LEN
assert TAIL_MIN == 23
RECORD_MIN = FIXED_OVERHEAD + RECORD_CRC_TAIL_LEN   # the smallest valid record: empty body and topic
assert RECORD_MIN == 111
USER_PROPERTIES_MAX_BYTES = PROPERTIES_MAX_BYTES - RECORD_CRC_TAIL_LEN
TOPIC_MAX_BYTES = 127

NAME_VALUE_SEP = "\x01"
PROPERTY_SEP = "\x02"
PROP_TAGS = "TAGS"
PROP_KEYS = "KEYS"
PROP_UNIQ_KEY = "UNIQ_KEY"
KEY_SEP = " "

TOPIC_RE = re.compile(r"[%|a-zA-Z0-9_-]{1,127}")

# Offsets of single fields inside a record (for cheap peeks without a full unpack).
OFF_TOTALSIZE = 0
OFF_MAGIC = 4
OFF_BODYCRC = 8
OFF_QUEUEID = 12
OFF_QUEUEOFFSET = 20
OFF_PHYSICALOFFSET = 28
OFF_STORETIMESTAMP = 56
OFF_BODYLEN = 84
assert OFF_BODYLEN == struct.calcsize(">iiiiiqqiq8sq8siq") == OFF_BODY - 4
assert OFF_QUEUEOFFSET == struct.calcsize(">iiiii") and OFF_PHYSICALOFFSET == struct.calcsize(">iiiiiq")
assert OFF_STORETIMESTAMP == struct.calcsize(">iiiiiqqiq8s")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


class CodecError(ValueError):
    """Bytes that are not a valid record."""


def body_crc(body) -> int:
    return crc32(body) & 0x7FFFFFFF


def valid_topic(topic: str) -> bool:
    return TOPIC_RE.fullmatch(topic) is not None


def topic_problem(topic) -> str | None:
    """What is wrong with ``topic`` as a topic name, for a human; None when it is a valid one.
    The one place this rule is worded (the store's puts, topic creation, the broker's send path)."""
    if not isinstance(topic, str) or TOPIC_RE.fullmatch(topic) is None:
        return f"invalid topic name {topic!r}: use 1-{TOPIC_MAX_BYTES} characters of [%|a-zA-Z0-9_-]"
    return None


def encode_host(host: str) -> bytes:
    """'1.2.3.4:5678' -> 8 bytes (ipv4 + i32 port), as RocketMQ's socketAddress2ByteBuffer."""
    ip, _, port = host.rpartition(":")
    parts = [int(p) for p in ip.split(".")]
    if len(parts) != 4 or not all(0 <= p < 256 for p in parts):
        raise CodecError(f"not an ipv4:port address: {host!r}")
    return bytes(parts) + struct.pack(">i", int(port))


def decode_host(b: bytes) -> str:
    return "%d.%d.%d.%d:%d" % (b[0], b[1], b[2], b[3], struct.unpack_from(">i", b, 4)[0])


def offset_msg_id(store_host: bytes, commitlog_offset: int) -> str:
    """RocketMQ's offset message id: store host (8 bytes) + commit-log offset (i64), hex."""
    return (store_host + I64.pack(commitlog_offset)).hex().upper()


def parse_offset_msg_id(msg_id: str) -> tuple[str, int]:
    raw = bytes.fromhex(msg_id)
    if len(raw) != 16:
        raise CodecError(f"not an offset message id: {msg_id!r}")
    return decode_host(raw[:8]), I64.unpack_from(raw, 8)[0]


@lru_cache(maxsize=65536)
def tags_hash(tags: str | None) -> int:
    """Java's String.hashCode of the tags (what RocketMQ puts in a consume-queue unit)."""
    if not tags:
        return 0
    h = 0
    for ch in _utf16_units(tags):
        h = (31 * h + ch) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(s: str) -> Iterable[int]:
    b = s.encode("utf-16-be")
    return struct.unpack(">%dH" % (len(b) // 2), b)


def encode_properties(props: Mapping[str, str]) -> bytes:
    if not props:
        return b""
    parts = []
    for k, v in props.items():
        parts.append(k)
        parts.append(NAME_VALUE_SEP)
        parts.append(v)
        parts.append(PROPERTY_SEP)
    return "".join(parts).encode("utf-8")


def decode_properties(raw: bytes | memoryview) -> dict[str, str]:
    if not raw:
        return {}
    raw = bytes(raw)
    if raw.endswith(b"\x02") and raw[-RECORD_CRC_TAIL_LEN:-CRC_DIGITS_BACK] == RECORD_CRC_MARK:
        raw = raw[:-RECORD_CRC_TAIL_LEN]
    text = raw.decode("utf-8", errors="replace")
    out: dict[str, str] = {}
    for item in text.split(PROPERTY_SEP):
        if not item:
            continue
        k, sep, v = item.partition(NAME_VALUE_SEP)
        if sep:
            out[k] = v
    return out


def seek_properties(raw: bytes) -> bytes:
    """A record's raw properties ready for ``prop_value``: the CRC tail cut where decode_properties
    cuts it (its mark where the tail would start, the last byte PROPERTY_SEP: the digits are not
    looked at), after a leading PROPERTY_SEP (every property then starts after one)."""
    n = len(raw)
    if n >= RECORD_CRC_TAIL_LEN and raw.endswith(b"\x02") and raw.startswith(RECORD_CRC_MARK, n - RECORD_CRC_TAIL_LEN):
        raw = raw[:-RECORD_CRC_TAIL_LEN]
    return b"\x02" + raw


def prop_name(name: str) -> bytes:
    """What ``prop_value`` looks for: PROPERTY_SEP, the name, NAME_VALUE_SEP."""
    return f"{PROPERTY_SEP}{name}{NAME_VALUE_SEP}".encode("utf-8")


def prop_value(props: bytes, name: bytes) -> str | None:
    """One property of a record without decoding them all (a follower's dispatch reads three):
    ``props`` from seek_properties, ``name`` from prop_name. The value decode_properties' dict holds
    for it (the last one given, decoded as there), or None."""
    i = props.rfind(name)
    if i < 0:
        return None
    i += len(name)
    j = props.find(b"\x02", i)
    return str(props[i:j] if j >= 0 else props[i:], "utf-8", "replace")


def check_property_text(s: str) -> bool:
    return NAME_VALUE_SEP not in s and PROPERTY_SEP not in s


# (body length, topic length, properties length) -> the whole-record Struct (record_struct's cache;
# the commit log's append loop reads it directly: a dict lookup is cheaper than a call)
RECORD_STRUCTS: dict[tuple[int, int, int], struct.Struct] = {}


def record_struct(body_len: int, topic_len: int, props_len: int) -> struct.Struct:
    """The whole-record Struct for these lengths (cached: one C call writes a record)."""
    key = (body_len, topic_len, props_len)
    s = RECORD_STRUCTS.get(key)
    if s is None:
        if len(RECORD_STRUCTS) > 4096:
            RECORD_STRUCTS.clear()
        s = struct.Struct(f">iiiiiqqiq8sq8siqi{body_len}sB{topic_len}sh{props_len}s")
        RECORD_STRUCTS[key] = s
    return s


def record_size(body_len: int, topic_len: int, props_len: int) -> int:
    return FIXED_OVERHEAD + body_len + topic_len + props_len


def encode_record(*, body: bytes, topic: bytes, properties: bytes, queue_id: int, queue_offset: int,
                  physical_offset: int, born_timestamp_ms: int, born_host: bytes, store_timestamp_ms: int,
                  store_host: bytes, flag: int = 0, sys_flag: int = 0, reconsume_times: int = 0,
                  prepared_transaction_offset: int = 0, crc: int | None = None) -> bytes:
    """One record as bytes (the write path packs straight into the segment instead)."""
    properties = properties + RECORD_CRC_TAIL
    bl, tl, pl = len(body), len(topic), len(properties)
    s = record_struct(bl, tl, pl)
    crc = body_crc(body) if crc is None else crc
    out = bytearray(s.pack(s.size, MAGIC, crc, queue_id, flag, queue_offset,
                           physical_offset, sys_flag, born_timestamp_ms, born_host, store_timestamp_ms, store_host,
                           reconsume_times, prepared_transaction_offset, bl, body, tl, topic, pl, properties))
    seal_record(out, 0, len(out), bl)
    return bytes(out)


def record_crc(buf, pos: int, size: int, body_len: int) -> int:
    """The record CRC: crc32(header, crc32(tail)) (see the module docstring)."""
    return crc32(buf[pos:pos + OFF_BODY],
                      crc32(buf[pos + OFF_BODY + body_len:pos + size - CRC_DIGITS_BACK]))


def tail_crc(topic: bytes, properties: bytes) -> int:
    """crc32 of a record's tail (TOPICLEN .. properties before the CRC digits)."""
    return crc32(properties[:-CRC_DIGITS_BACK], crc32(PROP_LEN.pack(len(properties)),
                                                    crc32(topic, crc32(bytes((len(topic),))))))


def tail_prefix_crc(topic: bytes, properties_len: int) -> int:
    """crc32 of a record's tail up to its properties (TOPICLEN, TOPIC, PROPERTIESLEN), for
    properties of ``properties_len`` bytes (the CRC tail included):
    ``tail_crc(topic, p) == crc32(p[:-11], tail_prefix_crc(topic, len(p)))``."""
    return crc32(PROP_LEN.pack(properties_len), crc32(topic, crc32(bytes((len(topic),)))))


def has_record_crc(buf, pos: int, size: int) -> bool:
    return bytes(buf[pos + size - RECORD_CRC_TAIL_LEN:pos + size - CRC_DIGITS_BACK]) == RECORD_CRC_MARK


def seal_record(buf, pos: int, size: int, body_len: int) -> None:
    """Write the record CRC digits into a packed record whose properties end with RECORD_CRC_TAIL."""
    end = pos + size
    buf[end - CRC_DIGITS_BACK:end - 1] = b"%010d" % record_crc(buf, pos, size, body_len)


def encode_blank(remaining: int) -> bytes:
    return SIZE_MAGIC.pack(remaining, BLANK_MAGIC)


# Outcomes of check_record (values, not exceptions: recovery decides what they mean).
REC_OK = 0
REC_BLANK = 1
REC_END = 2        # zeroes: nothing was written here
REC_TORN = 3       # a record started but does not fit / is cut
REC_CORRUPT = 4    # bad magic, inconsistent lengths or bad CRC


def check_record(buf, pos: int, limit: int, verify_crc: bool = True) -> tuple[int, int]:
    """Classify the bytes at ``pos`` (``limit``: end of readable data). Returns (kind, size)."""
    if pos + 8 > limit:
        return (REC_END if pos >= limit else REC_TORN), 0
    size, magic = SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        if size < BLANK_MIN or pos + size != limit:
            return REC_CORRUPT, 0
        return REC_BLANK, size
    if magic != MAGIC:
        if size == 0 and magic == 0:
            return REC_END, 0
        return REC_CORRUPT, 0
    if size < FIXED_OVERHEAD or pos + size > limit:
        return (REC_TORN if size >= FIXED_OVERHEAD else REC_CORRUPT), 0
    (blen,) = I32.unpack_from(buf, pos + OFF_BODYLEN)
    if blen < 0 or FIXED_OVERHEAD + blen > size:
        return REC_CORRUPT, 0
    tlen = buf[pos + OFF_BODY + blen]
    pend = pos + OFF_BODY + blen + TOPIC_LEN.size + tlen
    if pend + 2 > pos + size:
        return REC_CORRUPT, 0
    (plen,) = PROP_LEN.unpack_from(buf, pend)
    if plen < 0 or record_size(blen, tlen, plen) != size:
        return REC_CORRUPT, 0
    if verify_crc:
        (crc,) = I32.unpack_from(buf, pos + OFF_BODYCRC)
        if crc32(buf[pos + OFF_BODY:pos + OFF_BODY + blen]) & 0x7FFFFFFF != crc:
            return REC_CORRUPT, 0
        if plen < RECORD_CRC_TAIL_LEN or not has_record_crc(buf, pos, size):
            return REC_CORRUPT, 0
        digits = bytes(buf[pos + size - CRC_DIGITS_BACK:pos + size - 1])
        if not digits.isdigit() or int(digits) != record_crc(buf, pos, size, blen) or buf[pos + size - 1] != 2:
            return REC_CORRUPT, 0            # (the last byte, the tail's separator, is outside the CRC)
    return REC_OK, size


_MAGIC_FIRST = MAGIC_BYTES[:1]


def next_valid_record(buf, pos: int, limit: int, base_offset: int) -> int | None:
    """The first position at or after ``pos`` (before ``limit``) holding a record that fully
    validates: its magic, lengths within ``limit``, body CRC and record CRC, and the physical
    offset written in it equal to ``base_offset`` + its position (a record copied inside another
    record's body, or stale bytes, do not pass). None when there is none: the resync after a
    damaged region. Searches for the magic's first byte (memchr: fast over zeroes), then checks."""
    first, magic = _MAGIC_FIRST, MAGIC_BYTES
    i = pos + 4
    while True:
        i = buf.find(first, i, limit)
        if i < 0:
            return None
        cand = i - 4
        if buf[i:i + 4] == magic and check_record(buf, cand, limit, True)[0] == REC_OK and \
                I64.unpack_from(buf, cand + OFF_PHYSICALOFFSET)[0] == base_offset + cand:
            return cand
        i += 1


_crc32 = crc32
_BODYCRC_AT = struct.Struct(">8xi").unpack_from      # BODYCRC of a record's header
assert struct.calcsize(">8x") == OFF_BODYCRC


def _field(i: int):
    def get(self):
        f = self._f
        if f is None:
            f = self._f = HEADER.unpack(self._head)
        return f[i]
    return property(get)


def _one_field(at: int, fmt: str):
    """A header field read on its own (a reader that wants the queue offset of every message
    does not unpack 17 fields for it)."""
    unpack = struct.Struct(fmt).unpack_from

    def get(self):
        return unpack(self._head, at)[0]
    return property(get)


class StoredMessage:
    """A message read from its record, decoded lazily: the header is unpacked, the topic and
    properties parsed, only when first asked for. The body is a bytes copy (never a view
    that would pin the segment)."""

    __slots__ = ("_head", "body", "_tail", "_f", "_topic", "_props")

    def __init__(self, head: bytes, body: bytes, tail: bytes) -> None:
        self._head = head          # the 88 bytes TOTALSIZE .. BODYLEN
        self.body = body
        self._tail = tail          # TOPICLEN .. the end of the properties
        self._f = None
        self._topic = None
        self._props = None

    store_size = _field(0)
    body_crc = _field(2)
    queue_id = _one_field(OFF_QUEUEID, ">i")
    flag = _field(4)
    queue_offset = _one_field(OFF_QUEUEOFFSET, ">q")
    commitlog_offset = _one_field(OFF_PHYSICALOFFSET, ">q")
    sys_flag = _field(7)
    born_timestamp_ms = _field(8)
    born_host_raw = _field(9)
    store_timestamp_ms = _one_field(OFF_STORETIMESTAMP, ">q")
    store_host_raw = _field(11)
    reconsume_times = _field(12)
    prepared_transaction_offset = _field(13)

    @property
    def topic(self) -> str:
        t = self._topic
        if t is None:
            tail = self._tail
            t = self._topic = tail[1:1 + tail[0]].decode("ascii")
        return t

    @property
    def properties(self) -> dict[str, str]:
        p = self._props
        if p is None:
            tail = self._tail
            p = self._props = decode_properties(tail[3 + tail[0]:])
        return p

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROP_TAGS)

    def properties_raw(self) -> bytes:
        """The record's properties as stored (CRC tail included): what seek_properties takes, for
        reading a few of them with prop_value without decoding them all (a SQL92 filter)."""
        tail = self._tail
        return tail[3 + tail[0]:]

    @property
    def keys(self) -> list[str]:
        k = self.properties.get(PROP_KEYS)
        return [x for x in k.split(KEY_SEP) if x] if k else []

    def stands_for(self, topic_key: bytes, queue_id: int, queue_offset: int) -> bool:
        """Is this the record a consume-queue unit of queue ``queue_id`` at ``queue_offset`` stands
        for, of the topic whose ``topic_key(topic)`` is given (a unit has no CRC of its own: a damaged
        one can point at an intact record of another queue)? One comparison of each, no decoding."""
        return self._tail.startswith(topic_key) and _QUEUE_AT(self._head, OFF_QUEUEID) == (queue_id, queue_offset)

    def intact(self) -> bool:
        """Do the body CRC and the record CRC hold (header, body, topic and properties as written)?"""
        head, tail = self._head, self._tail
        if _crc32(self.body) & 0x7FFFFFFF != _BODYCRC_AT(head)[0]:
            return False
        digits = tail[-CRC_DIGITS_BACK:-1]
        return digits.isdigit() and int(digits) == _crc32(head, _crc32(tail[:-CRC_DIGITS_BACK])) and tail[-1] == 2

    @property
    def offset_msg_id(self) -> str:
        return offset_msg_id(self.store_host_raw, self.commitlog_offset)

    @property
    def msg_id(self) -> str:
        """The producer's unique id (UNIQ_KEY) when it gave one, else the offset message id."""
        return self.properties.get(PROP_UNIQ_KEY) or self.offset_msg_id

    @property
    def born_host(self) -> str:
        return decode_host(self.born_host_raw)

    @property
    def store_host(self) -> str:
        return decode_host(self.store_host_raw)

    def __repr__(self) -> str:
        return (f"StoredMessage(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
                f"commitlog_offset={self.commitlog_offset}, body={len(self.body)} bytes)")


_QUEUE_AT = struct.Struct(">i4xq").unpack_from        # QUEUEID, (FLAG), QUEUEOFFSET
assert OFF_QUEUEOFFSET == OFF_QUEUEID + 8


def topic_key(topic: str) -> bytes | None:
    """What a record's tail starts with when it is of ``topic``: TOPICLEN and the name
    (StoredMessage.stands_for); None for a name no record can have (longer than TOPICLEN's byte)."""
    name = topic.encode()
    return bytes([len(name)]) + name if len(name) <= 255 else None


_SIZE_MAGIC_BODYLEN = struct.Struct(">ii76xi")
assert _SIZE_MAGIC_BODYLEN.size == OFF_BODY


def decode_record(buf, pos: int, size: int | None = None) -> StoredMessage:
    """The record at ``pos`` (``size``: what the consume queue says, checked against the
    record); CodecError if it is not a well-formed record. ``buf`` is best an mmap (or
    anything whose slices are bytes). CRCs are recovery's and verify's business."""
    try:
        rsize, magic, blen = _SIZE_MAGIC_BODYLEN.unpack_from(buf, pos)
    except struct.error as e:
        raise CodecError(f"short record at {pos}") from e
    if size is None:
        size = rsize
    b0 = pos + OFF_BODY
    b1 = b0 + blen
    if magic != MAGIC or rsize != size or blen < 0 or b1 + 3 > pos + size:
        raise CodecError(f"not a record at {pos}")
    tail = bytes(buf[b1:pos + size])
    tl = tail[0]
    if tl + 3 > len(tail) or tl + 3 + PROP_LEN.unpack_from(tail, tl + 1)[0] != len(tail):
        raise CodecError(f"inconsistent lengths at {pos}")
    return StoredMessage(bytes(buf[pos:b0]), bytes(buf[b0:b1]), tail)


def py_decode_records(data, sizes) -> list[StoredMessage]:
    """The records of ``data`` (back to back, ``sizes``: their sizes) decoded one by one
    (decode_record: CodecError for one that is not well-formed). Twin of tidemq._accel.decode_run."""
    out = []
    pos = 0
    for size in sizes:
        out.append(decode_record(data, pos, size))
        pos += size
    return out


def decode_records(data, sizes) -> list[StoredMessage]:
    """py_decode_records, compiled when tidemq.accel has it (sizes: an int32 array)."""
    if _ACCEL is None:
        return py_decode_records(data, sizes)
    try:
        return _ACCEL.decode_run(StoredMessage, data, sizes)
    except ValueError as e:
        raise CodecError(str(e)) from None


META = struct.Struct(">iiiiiqq")   # TOTALSIZE .. PHYSICALOFFSET
assert META.size == 36


def decode_meta(buf, pos: int) -> tuple[int, int, int, str, bytes]:
    """What dispatch needs from a valid record, without copying the body:
    (queue_id, queue_offset, store_timestamp_ms, topic, properties_raw)."""
    _size, _magic, _crc, qid, _flag, qoff, _phys = META.unpack_from(buf, pos)
    (store_ts,) = I64.unpack_from(buf, pos + OFF_STORETIMESTAMP)
    (blen,) = I32.unpack_from(buf, pos + OFF_BODYLEN)
    t0 = pos + OFF_BODY + TOPIC_LEN.size + blen
    tlen = buf[t0 - 1]
    (plen,) = PROP_LEN.unpack_from(buf, t0 + tlen)
    p0 = t0 + tlen + 2
    return qid, qoff, store_ts, str(buf[t0:t0 + tlen], "ascii"), bytes(buf[p0:p0 + plen])


_HEAD3 = struct.Struct(">iii")        # TOTALSIZE, MAGIC, BODYCRC
assert _HEAD3.size == OFF_QUEUEID


def scan_run(buf, pos: int, limit: int, positions: list | None = None) -> tuple[int, int, int]:
    """py_scan_run, compiled when tidemq.accel has it (tidemq._accel.scan_run)."""
    if _ACCEL is None:
        return py_scan_run(buf, pos, limit, positions)
    return _ACCEL.scan_run(buf, pos, limit, positions)


def py_scan_run(buf, pos: int, limit: int, positions: list | None = None) -> tuple[int, int, int]:
    """Verify consecutive records from ``pos`` as fast as Python allows (one tight loop,
    CRCs in C). Stops at the first record that is not plainly valid and returns
    (position, records verified, bytes of their bodies). The caller classifies what is at
    the returned position with check_record (BLANK, end, torn, corrupt). ``positions``:
    where each verified record starts is appended to it.

    It agrees with check_record(verify_crc=True): every record it passes is REC_OK there,
    and where it stops check_record says what is there instead (tests/store/
    test_codec_scan_run.py holds the two to that on random and damaged input). TOPICLEN and
    PROPERTIESLEN are not read here: the record CRC covers them."""
    head = _HEAD3.unpack_from
    i32 = I32.unpack_from
    crc32 = _crc32
    magic_ok = MAGIC
    # the layout's offsets and sizes as locals (named in the module's constants)
    fixed, rec_min, off_blen, off_body = FIXED_OVERHEAD, RECORD_MIN, OFF_BODYLEN, OFF_BODY
    tail_min, back = TAIL_MIN, CRC_DIGITS_BACK
    n = 0
    body_bytes = 0
    while pos + fixed <= limit:
        size, magic, bcrc = head(buf, pos)
        if magic != magic_ok or size < rec_min or pos + size > limit:
            break
        (blen,) = i32(buf, pos + off_blen)
        b_end = pos + off_body + blen
        end = pos + size
        if blen < 0 or b_end + tail_min > end or crc32(buf[pos + off_body:b_end]) & 0x7FFFFFFF != bcrc:
            break
        # the digits must match the record CRC; the CRC covers the '__CRC32#' mark before them,
        # so a record without the mark fails here and check_record says why
        if buf[end - back:end - 1] != b"%010d" % crc32(buf[pos:pos + off_body], crc32(buf[b_end:end - back])) \
                or buf[end - 1] != 2:
            break
        if positions is not None:
            positions.append(pos)
        pos = end
        n += 1
        body_bytes += blen
    return pos, n, body_bytes
