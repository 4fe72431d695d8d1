"""Raw batch sends for tidemq.client: ``/tidemq.Data/SendRecords``.

SendMessage carries one protobuf Message per message and the broker converts each one
(to_store) into a store Message: at a few microseconds each, that conversion and the
protobuf objects bounded a batch producer. SendRecords carries a batch of one topic in a
compact frame (protocol/send_frame.py); the broker checks each message's fields as bytes,
builds its record properties by joining bytes, and stores the batch with one
MessageStore.put_encoded. The answer is one (code, queue id, queue offset) per message.

The protections are SendMessage's, shared through send_path.SendPath: flow control (the
connection's in-flight bounds, resource alarms, flush backlog) with TOO_MANY_REQUESTS
for every message when refused; topic checks and auto-creation; the dedup window of
(topic, message id), so a resend is answered OK with the first store's offset, its index
in the response's ``duplicates`` and the text "duplicate: already stored"; the store's
size limits (MESSAGE_BODY_TOO_LARGE, MESSAGE_PROPERTIES_TOO_LARGE). A frame that is not
one answers BAD_REQUEST saying what is wrong with it, for the whole request.

NORMAL messages only: there is no message type, group or delivery time in the frame, and
the properties that would make one (``__MSGTYPE``, ``__SHARDINGKEY``, the delay and
transaction properties, every property the broker writes itself) are refused per
message with BAD_REQUEST. FIFO, DELAY and TRANSACTION messages go through SendMessage.

Per message: the id is required (1 .. 128 bytes of UTF-8) and is the message's
UNIQ_KEY; tags, keys and property names and values are UTF-8 without the \\x01 / \\x02
separators; keys are separated by single spaces.
"""

from __future__ import annotations

import numpy as np

from ...accel import ACCEL
from ...protocol.send_frame import (ID_MAX_BYTES, FrameError, decode_request, encode_response,
                                    encode_response_columns)
from ...protocol.stubs import Code
from ...store import PutStatus
from ...store.codec import PROP_UNIQ_KEY, RECORD_CRC_NAME, RECORD_CRC_TAIL, check_property_text, tags_hash
from ..wire import INTERNAL, PROP_MESSAGE_TYPE
from .send_path import DUPLICATE, SendPath, Unconfirmed, put_code

RESERVED = frozenset(INTERNAL | {RECORD_CRC_NAME})
_SUFFIX = f"{PROP_MESSAGE_TYPE}\x01NORMAL\x02".encode()
_UNIQ = f"{PROP_UNIQ_KEY}\x01".encode()
TAG_CACHE_MAX = 4096            # distinct tags whose encoding (or refusal) is remembered

# Why a message of a frame is refused (the compiled frame_columns returns the same numbers):
# before the dedup window (the id is not usable) ...
BODY_EMPTY, BAD_ID, BAD_ID_UTF8 = 1, 2, 3
# ... and after it (a resend of a stored message is answered as a duplicate whatever these say)
BAD_TAGS, BAD_KEYS_UTF8, BAD_KEYS, BAD_PROPS_UTF8, BAD_PROPS_END, BAD_PROPS_PAIR, BAD_PROPS_RESERVED = range(4, 11)
WHY = {
    BODY_EMPTY: (Code.MESSAGE_BODY_EMPTY, "the body is empty"),
    BAD_ID: (Code.BAD_REQUEST, f"the message id must be 1-{ID_MAX_BYTES} bytes without \\x01 / \\x02"),
    BAD_ID_UTF8: (Code.BAD_REQUEST, "the message id is not UTF-8"),
    BAD_TAGS: (Code.BAD_REQUEST, "tags must be UTF-8 without \\x01 / \\x02"),
    BAD_KEYS_UTF8: (Code.BAD_REQUEST, "keys are not UTF-8"),
    BAD_KEYS: (Code.BAD_REQUEST, "keys must be non-empty, separated by single spaces, without \\x01 / \\x02"),
    BAD_PROPS_UTF8: (Code.BAD_REQUEST, "properties are not UTF-8"),
    BAD_PROPS_END: (Code.BAD_REQUEST, "properties must be name\\x01value\\x02 pairs"),
    BAD_PROPS_PAIR: (Code.BAD_REQUEST, "properties must be name\\x01value\\x02 pairs with a non-empty name"),
    BAD_PROPS_RESERVED: (Code.BAD_REQUEST, "property {name!r} is reserved (SendRecords takes NORMAL messages only)"),
}


def check_properties(raw: bytes) -> tuple[int, str | None]:
    """(0, None) for user properties that may be stored, else (BAD_PROPS_*, the reserved name)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return BAD_PROPS_UTF8, None
    if not text.endswith("\x02"):
        return BAD_PROPS_END, None
    for item in text[:-1].split("\x02"):
        name, sep, value = item.partition("\x01")
        if not sep or not name or "\x01" in value:
            return BAD_PROPS_PAIR, None
        if name in RESERVED:
            return BAD_PROPS_RESERVED, name
    return 0, None


def _keys_why(ks: bytes) -> tuple[int, list[str] | None]:
    try:
        text = ks.decode("utf-8")
    except UnicodeDecodeError:
        return BAD_KEYS_UTF8, None
    keys = text.split(" ")
    if not all(keys) or not check_property_text(text):
        return BAD_KEYS, None
    return 0, keys


def py_frame_columns(raw: bytes, reserved=RESERVED, id_max: int = ID_MAX_BYTES) -> tuple:
    """A SendRecords frame as store columns, every message checked: (topic, ids, bodies,
    properties, tags_hashes, keys, refused). Message i: ``ids[i]`` (None when its id is not
    usable), its body, the record's properties (the user's, UNIQ_KEY, __MSGTYPE NORMAL, TAGS,
    KEYS, the record-CRC tail; None without a usable id), tags hash, keys (a list or None);
    ``refused``: {i: (why, reserved name or None)}. FrameError (ValueError) for a bad frame.
    Twin of tidemq._accel.send_frame (``reserved`` is RESERVED: the argument is the C one's)."""
    topic, msgs = decode_request(raw)
    n = len(msgs)
    ids: list = [None] * n
    props: list = [None] * n
    ths: list = [0] * n
    keys: list = [None] * n
    refused: dict = {}
    for i, (mid_b, tg, ks, ps, body) in enumerate(msgs):
        why, name, kl, th = 0, None, None, 0
        if not body:
            why = BODY_EMPTY
        elif not mid_b or len(mid_b) > id_max or b"\x01" in mid_b or b"\x02" in mid_b:
            why = BAD_ID
        else:
            try:
                ids[i] = mid_b.decode("utf-8")
            except UnicodeDecodeError:
                why = BAD_ID_UTF8
        if not why and tg:
            try:
                t = tg.decode("utf-8")
                why = 0 if check_property_text(t) else BAD_TAGS
                th = tags_hash(t) if not why else 0
            except UnicodeDecodeError:
                why = BAD_TAGS
        if not why and ks:
            why, kl = _keys_why(ks)
        if not why and ps:
            why, name = check_properties(ps)
        if why:
            refused[i] = (why, name)
        if not why or why >= BAD_TAGS:
            parts = [ps, _UNIQ, mid_b, b"\x02", _SUFFIX]
            if tg:
                parts += (b"TAGS\x01", tg, b"\x02")
            if ks:
                parts += (b"KEYS\x01", ks, b"\x02")
            parts.append(RECORD_CRC_TAIL)
            props[i] = b"".join(parts)
        ths[i] = th
        keys[i] = kl
    return topic, ids, [m[4] for m in msgs], props, ths, keys, refused


def frame_columns(raw: bytes) -> tuple:
    """py_frame_columns, compiled when tidemq.accel has it (its ValueError as FrameError)."""
    if ACCEL is None:
        return py_frame_columns(raw)
    try:
        return ACCEL.send_frame(raw, RESERVED, ID_MAX_BYTES)
    except ValueError as e:
        raise FrameError(str(e)) from None


class RecordSends:
    def __init__(self, sends: SendPath, tag_cache_max: int = TAG_CACHE_MAX) -> None:
        self.sends = sends
        self.tag_cache_max = tag_cache_max      # (the frame's tags are checked per message now)

    async def send(self, raw: bytes, context) -> bytes:
        try:
            cols = frame_columns(raw)
        except FrameError as e:
            return encode_response(Code.BAD_REQUEST, f"malformed SendRecords frame: {e}")
        n = len(cols[1])
        refusal, answer = await self.sends.gated(context, len(raw), lambda: self._send(cols))
        if refusal is not None:
            self.sends.answered(cols[0], [Code.TOO_MANY_REQUESTS] * n)
            return encode_response(Code.TOO_MANY_REQUESTS, refusal, [(Code.TOO_MANY_REQUESTS, -1, -1)] * n)
        return answer

    async def _send(self, cols: tuple) -> bytes:
        topic, ids, bodies, props, ths, keys, refused = cols
        n = len(ids)
        _, code, why = self.sends.topic_check(topic)
        if code != Code.OK:
            self.sends.answered(topic, [code] * n)
            return encode_response(code, why, [(code, -1, -1)] * n)
        codes = np.full(n, Code.OK, np.int32)
        qids = np.full(n, -1, np.int32)
        offsets = np.full(n, -1, np.int64)
        texts: dict[int, str] = {}
        skip: dict[int, object] = {}
        for i, (w, _name) in refused.items():        # the id is not usable: no dedup, no store
            if w < BAD_TAGS:
                skip[i] = w
        dups = self.sends.seen_many(topic, ids)      # retries of sends that were stored: answered again
        for i, earlier in list(dups.items()):
            skip[i] = True
            if isinstance(earlier, Unconfirmed):     # stored, still not confirmed: never stored twice
                del dups[i]
                codes[i] = earlier[0]
                texts[i] = earlier[1]
                continue
            offsets[i] = earlier[0]
            texts[i] = DUPLICATE
        for i, (w, name) in refused.items():
            if i in skip and skip[i] is True:       # answered from the window above
                continue
            skip[i] = w
            c, text = WHY[w]
            codes[i] = c
            texts[i] = text.format(name=name) if name is not None else text
        if len(skip) < n:
            r = await self.sends.put_columns(topic, bodies, props, ths, ids, keys, skip=skip or None)
            stored = np.frombuffer(r.size, np.int32) > 0
            if skip:
                stored[list(skip)] = False
            ok = r.status is PutStatus.PUT_OK
            if ok:
                qids[stored] = np.frombuffer(r.qid, np.int32)[stored]
                offsets[stored] = np.frombuffer(r.qoff, np.int64)[stored]
            else:
                codes[stored] = put_code(r.status, r.reason)
                for i in np.flatnonzero(stored).tolist():
                    texts[i] = r.error or r.status.name
                    # appended, not confirmed (disk, followers): a resend is answered, never stored again
                    self.sends.remember_unconfirmed(topic, ids[i], r.status, r.qoff[i], r.phys[i] + r.size[i])
            for i, res in r.refused.items():
                if i not in skip:
                    codes[i] = put_code(res[0], res[9])
                    texts[i] = res[6] or res[0].name
            if ok and stored.any():
                if stored.all():
                    self.sends.remember_many(topic, zip(ids, r.qoff))
                else:
                    idx = np.flatnonzero(stored).tolist()
                    self.sends.remember_many(topic, [(ids[i], r.qoff[i]) for i in idx])
                self.sends.stored()
        if n and not dups and (codes == codes[0]).all():
            self.sends.outcomes.add_code(topic, int(codes[0]), n)       # the common case: one update
        else:
            self.sends.answered(topic, codes.tolist(), dups)
        if n == 1:
            top, message = int(codes[0]), texts.get(0, "")
        elif (codes == Code.OK).all():
            top, message = Code.OK, ""
        else:
            top, message = Code.MULTIPLE_RESULTS, "some messages were not stored: see the entries"
        # for the duplicates: OK, queue id -1, the first store's offset (set above)
        for i in dups:
            codes[i], qids[i] = Code.OK, -1
        return encode_response_columns(top, message, codes, qids, offsets, texts, dups)
