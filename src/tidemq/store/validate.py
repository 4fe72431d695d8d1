"""The record validator: every rule a record's fields must meet to be stored, worded once, in
one place. Each check answers None (fine) or the PutResult that refuses (its PutReason and a text
for people).

Every entry point into the store validates here, whoever called it; no caller is trusted with
the store's own format (writer.py):

* ``put_batch`` (store Messages: the broker's general SendMessage path, its transaction commits,
  timer and dead letters, the CLI): topic, body, numeric fields, queue id, tags, keys and
  properties (``encode_properties``), sizes, born host;
* ``put_encoded`` (one message's record properties encoded already: the broker's compiled
  SendMessage lane): the properties as bytes (``check_encoded``: UTF-8 name\\x01value\\x02 pairs,
  no name the store writes itself), from which the tags hash, the id and the keys are read here,
  never taken from the caller; sizes; born fields;
* ``put_slices`` (a SendRecords frame's slices): every message's id, tags, keys and user
  properties as bytes in one pass (``check_slices``), its tags hash computed in the same pass;
  sizes.

The byte checks are loops over every byte of every message: compiled in tidemq._accel
(accel_c/validate.c: check_slices, check_encoded) when it is built, else the Python twins below,
which give the same verdicts (tests/test_accel.py holds them to it, on generated and damaged
input). The compiled lanes of the broker (accel_c/frame.c, send_one.c) call the same C functions
for what they check of their own (the frame's ids, its reserved names; which SendMessage request is
the common one), so a rule is written once in Python and once in C.

Text rules (the record's properties are ``name\\x01value\\x02`` pairs): every id, tag, key, name
and value is strict UTF-8 without \\x01 or \\x02; a property name is not empty; keys are
separated by single spaces (no empty key).
"""

from __future__ import annotations

import struct
from functools import lru_cache

import numpy as np

from ..accel import ACCEL
from ..record import codec
from ..record.codec import PROP_KEYS, PROP_TAGS, PROP_UNIQ_KEY, tags_hash
from .topics import TopicState
from .types import Message, PutReason, PutResult

def check_topic(topic, auto_create: bool) -> PutResult | None:
    """An unknown topic: not a topic name, or one that may not be created here."""
    problem = codec.topic_problem(topic)
    if problem is not None:
        return PutResult.refused(PutReason.INVALID_TOPIC, problem)
    if not auto_create:
        return PutResult.refused(PutReason.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist")
    return None


def check_body(body, max_body: int) -> PutResult | None:
    """The body: bytes, at most message_body_bytes_max."""
    if type(body) is not bytes:
        return PutResult.refused(PutReason.BAD_BODY, "body must be bytes")
    if len(body) > max_body:
        return PutResult.refused(PutReason.BODY_TOO_LARGE,
                                 f"body of {len(body)} bytes exceeds message_body_bytes_max={max_body}")
    return None


def check_properties_size(props_len: int) -> PutResult | None:
    """The encoded properties (without the record-CRC tail): at most USER_PROPERTIES_MAX_BYTES."""
    if props_len > codec.USER_PROPERTIES_MAX_BYTES:
        return PutResult.refused(PutReason.PROPERTIES_TOO_LARGE,
                                 f"properties take {props_len} bytes, more than {codec.USER_PROPERTIES_MAX_BYTES}")
    return None


def check_record_size(body_len: int, topic_len: int, props_len: int, max_record: int) -> PutResult | None:
    """The whole record (``props_len`` with the record-CRC tail) fits in one segment."""
    if codec.record_size(body_len, topic_len, props_len) > max_record:
        return PutResult.refused(PutReason.RECORD_TOO_LARGE, "message does not fit in one segment")
    return None


def check_sizes(body, max_body: int, topic_len: int, props_len: int, max_record: int) -> PutResult | None:
    """check_body, check_properties_size and check_record_size in turn (``props_len`` without the
    record-CRC tail): what a fast path calls when its bounds test doubts a message."""
    return (check_body(body, max_body) or check_properties_size(props_len)
            or check_record_size(len(body), topic_len, props_len + codec.RECORD_CRC_TAIL_LEN, max_record))


I32 = (-(1 << 31), (1 << 31) - 1)
I64 = (-(1 << 63), (1 << 63) - 1)


def check_number(name: str, v, bounds: tuple[int, int]) -> PutResult | None:
    """One numeric field, packed as i32 / i64 (``bounds``: I32, I64)."""
    lo, hi = bounds
    if type(v) is not int or not lo <= v <= hi:
        return PutResult.refused(PutReason.BAD_FIELD, f"{name} must be an integer in [{lo}, {hi}], not {v!r}")
    return None


def check_numbers(m: Message) -> PutResult | None:
    """The numeric fields, packed as i32 / i64."""
    for name, bounds in (("flag", I32), ("sys_flag", I32), ("reconsume_times", I32),
                         ("prepared_transaction_offset", I64), ("born_timestamp_ms", I64)):
        v = getattr(m, name)
        if v is None and name == "born_timestamp_ms":
            continue
        bad = check_number(name, v, bounds)
        if bad is not None:
            return bad
    return None


def check_queue_id(qid, t: TopicState) -> PutResult | None:
    """An explicit queue id: one of the topic's queues (None: round-robin)."""
    if qid is not None and not (type(qid) is int and 0 <= qid < t.queue_count):
        return PutResult.refused(PutReason.BAD_QUEUE_ID,
                                 f"queue_id {qid} out of range: topic {t.name} has {t.queue_count} queues")
    return None


def check_tags(tags) -> PutResult | None:
    if tags is not None and (not isinstance(tags, str) or not codec.check_property_text(tags)):
        return PutResult.refused(PutReason.BAD_PROPERTY, "tags must be a string without \\x01 or \\x02")
    return None


def encode_properties(m: Message) -> bytes | PutResult:
    """The record's properties of a general message (user properties, TAGS, KEYS) with the
    record-CRC tail, or the PutResult that refuses them."""
    merged: dict[str, str] = {}
    if m.properties:
        for k, v in m.properties.items():
            if not isinstance(k, str) or not isinstance(v, str) or not k or k == codec.RECORD_CRC_NAME \
                    or not codec.check_property_text(k) or not codec.check_property_text(v):
                return PutResult.refused(PutReason.BAD_PROPERTY,
                                         f"property {k!r} must be a non-empty string without \\x01 / \\x02, "
                                         f"with a string value")
            merged[k] = v
    if m.tags:
        merged[PROP_TAGS] = m.tags
    if m.keys:
        for k in m.keys:
            if not isinstance(k, str) or not k or " " in k or not codec.check_property_text(k):
                return PutResult.refused(PutReason.BAD_PROPERTY, f"key {k!r} must be a non-empty string without spaces")
        merged[PROP_KEYS] = codec.KEY_SEP.join(m.keys)
    pb = codec.encode_properties(merged)
    bad = check_properties_size(len(pb))
    if bad is not None:
        return bad
    return pb + codec.RECORD_CRC_TAIL


HOST_CACHED_CHARS_MAX = 64      # born hosts this long at most are remembered (accepted or refused)


def _encode_host(host) -> bytes | PutResult:
    try:
        return codec.encode_host(host)
    except (codec.CodecError, ValueError, TypeError, AttributeError, struct.error):  # struct.error: a port past i32
        return PutResult.refused(PutReason.BAD_FIELD, f"born_host {host!r} is not ipv4:port")


_host_bytes = lru_cache(maxsize=256)(_encode_host)


def born_host_bytes(host: str) -> bytes | PutResult:
    """A born host ("ipv4:port") as the record keeps it, or the PutResult that refuses it. Both are
    remembered (a bounded cache of short hosts: a client sending one without its port is refused
    without an exception per send); a host that is not a short string is worked out each time."""
    if type(host) is str and len(host) <= HOST_CACHED_CHARS_MAX:
        return _host_bytes(host)
    return _encode_host(host)


# Byte checks (the compiled twins: accel_c/validate.c) ----------------------------------------------
# why a message's bytes are refused (0: they are fine); the compiled loops return the same numbers
ID_TEXT, TAGS_TEXT, KEYS_UTF8, KEYS_FORM, PROPS_UTF8, PROPS_END, PROPS_PAIR, PROPS_RESERVED = range(1, 9)
WHY = {
    ID_TEXT: "the message id must be UTF-8 without \\x01 / \\x02",
    TAGS_TEXT: "tags must be UTF-8 without \\x01 / \\x02",
    KEYS_UTF8: "keys are not UTF-8",
    KEYS_FORM: "keys must be non-empty, separated by single spaces, without \\x01 / \\x02",
    PROPS_UTF8: "properties are not UTF-8",
    PROPS_END: "properties must be name\\x01value\\x02 pairs",
    PROPS_PAIR: "properties must be name\\x01value\\x02 pairs with a non-empty name",
    PROPS_RESERVED: "property {name!r} is written by the store itself",
}
# names put_slices writes itself (with the caller's ``extra``): a user property may not be one
SLICE_RESERVED = tuple(sorted(n.encode() for n in (PROP_UNIQ_KEY, PROP_TAGS, PROP_KEYS, codec.RECORD_CRC_NAME)))
ENCODED_RESERVED = (codec.RECORD_CRC_NAME.encode(),)      # put_encoded's properties are the record's


def check_properties_type(props) -> PutResult | None:
    """Encoded properties are bytes."""
    if type(props) is not bytes:
        return PutResult.refused(PutReason.BAD_PROPERTY, "encoded properties must be bytes")
    return None


@lru_cache(maxsize=64)
def slice_reserved(extra: bytes) -> tuple | PutResult:
    """The names a put_slices user property may not have: those the store writes itself and those of
    ``extra`` (properties every message of the batch gets), or the PutResult refusing ``extra``."""
    if not extra:
        return SLICE_RESERVED
    why, name = py_check_properties(extra, SLICE_RESERVED)
    if why:
        return refusal(why, name)
    names = [item.split(b"\x01", 1)[0] for item in extra[:-1].split(b"\x02")]
    return tuple(sorted(set(SLICE_RESERVED) | set(names)))


def refusal(why: int, name: str | None = None) -> PutResult:
    """The PutResult of a byte check's verdict."""
    text = WHY[why].format(name=name) if why == PROPS_RESERVED else WHY[why]
    return PutResult.refused(PutReason.BAD_PROPERTY, text)


def _utf8(b) -> str | None:
    try:
        return bytes(b).decode("utf-8")
    except UnicodeDecodeError:
        return None


def utf8_ok(b) -> bool:
    """Strict UTF-8 (Python's decoder: no overlong forms, no surrogates)."""
    return _utf8(b) is not None


def text_ok(b) -> bool:
    """Strict UTF-8 without the separators (an id, tags, a key, a name, a value)."""
    return b"\x01" not in b and b"\x02" not in b and _utf8(b) is not None


def py_check_keys(b) -> int:
    """0 for keys that may be stored (UTF-8, separated by single spaces), else KEYS_UTF8 / KEYS_FORM."""
    text = _utf8(b)
    if text is None:
        return KEYS_UTF8
    return 0 if all(text.split(" ")) and codec.check_property_text(text) else KEYS_FORM


def py_check_properties(raw, reserved: tuple) -> tuple[int, str | None]:
    """(0, None) for encoded properties that may be stored, else (PROPS_*, the reserved name)."""
    text = _utf8(raw)
    if text is None:
        return PROPS_UTF8, None
    if not text.endswith("\x02"):
        return PROPS_END, None
    names = {r.decode() for r in reserved}
    for item in text[:-1].split("\x02"):
        name, sep, value = item.partition("\x01")
        if not sep or not name or "\x01" in value:
            return PROPS_PAIR, None
        if name in names:
            return PROPS_RESERVED, name
    return 0, None


def py_check_slices(data, fields, skip, reserved: tuple = SLICE_RESERVED) -> tuple[bytearray, bytearray, dict]:
    """Every message of a put_slices batch not in ``skip`` (a bool array, or None): (why, one byte
    each; tags hashes, int64 each (0: none, or refused); {i: the reserved name} of the PROPS_RESERVED
    ones). Twin of tidemq._accel.check_slices."""
    F = np.frombuffer(fields, np.uint32).reshape(-1, 10)
    n = len(F)
    why, ths, names = bytearray(n), np.zeros(n, np.int64), {}
    mv = memoryview(data)
    for i in range(n):
        if skip is not None and skip[i]:
            continue
        mid, tg, ks, ps = (bytes(mv[int(F[i, j]):int(F[i, j]) + int(F[i, 5 + j])]) for j in range(4))
        w = 0
        if len(mid) and not text_ok(mid):
            w = ID_TEXT
        elif len(tg) and not text_ok(tg):
            w = TAGS_TEXT
        elif len(ks):
            w = py_check_keys(ks)
        if not w and len(ps):
            w, name = py_check_properties(ps, reserved)
            if name is not None:
                names[i] = name
        why[i] = w
        if not w and len(tg):
            ths[i] = tags_hash(bytes(tg).decode())
    return why, bytearray(ths.tobytes()), names


def py_check_encoded(raw, reserved: tuple = ENCODED_RESERVED) -> tuple[int, str | None, int, str | None, str | None]:
    """Encoded record properties (without the CRC tail): (why, the reserved name, tags hash, UNIQ_KEY,
    KEYS): what the store reads from them, never from its caller. Twin of tidemq._accel.check_encoded."""
    why, name = py_check_properties(raw, reserved) if len(raw) else (0, None)
    if why:
        return why, name, 0, None, None
    props = b"\x02" + bytes(raw)                     # as codec.seek_properties gives them
    tags = codec.prop_value(props, codec.prop_name(PROP_TAGS))
    return (0, None, tags_hash(tags) if tags else 0, codec.prop_value(props, codec.prop_name(PROP_UNIQ_KEY)),
            codec.prop_value(props, codec.prop_name(PROP_KEYS)))


if ACCEL is not None:
    check_slices, check_encoded = ACCEL.check_slices, ACCEL.check_encoded
else:
    check_slices, check_encoded = py_check_slices, py_check_encoded
