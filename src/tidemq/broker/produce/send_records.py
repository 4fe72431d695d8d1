"""Raw batch sends for tidemq.client: ``/tidemq.Data/SendRecords``.

SendMessage carries one protobuf Message per message and the broker converts each one
(to_store) into a store Message: at a few microseconds each, that conversion and the
protobuf objects bounded a batch producer. SendRecords carries a batch of one topic in a
compact frame (protocol/send_frame.py). The broker checks every message of a frame in one
pass into arrays (``frame_slices``: where each field lies in the frame, why a message is
refused, its tags hash, its dedup key), looks the batch up in the dedup window with one call,
and stores it with one MessageStore.put_slices, which lays the records out from the frame's
bytes: no Python object per message. The answer is one (code, queue id, queue offset) per
message.

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

import asyncio
import sys
from array import array

import grpc
import numpy as np

from ...accel import ACCEL
from ...protocol.send_frame import (HEAD, ID_MAX_BYTES, FrameError, decode_request, encode_response,
                                    encode_response_columns)
from ...protocol.stubs import Code
from ...store import PutStatus
from ...record.codec import RECORD_CRC_NAME, check_property_text, tags_hash
from ..wire import INTERNAL, PROP_MESSAGE_TYPE
from .dedup import py_id_hash
from .send_path import DUPLICATE, SendPath, Unconfirmed, put_code

RESERVED = frozenset(INTERNAL | {RECORD_CRC_NAME})
_SUFFIX = f"{PROP_MESSAGE_TYPE}\x01NORMAL\x02".encode()
TAG_CACHE_MAX = 4096            # distinct tags whose encoding (or refusal) is remembered

# Why a message of a frame is refused (the compiled frame_slices returns the same numbers):
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


def check_properties(raw: bytes, reserved=RESERVED) -> tuple[int, str | None]:
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
        if name in reserved:
            return BAD_PROPS_RESERVED, name
    return 0, None


def _keys_why(ks: bytes) -> int:
    """0 for keys that may be stored (UTF-8, separated by single spaces), else BAD_KEYS_*."""
    try:
        text = ks.decode("utf-8")
    except UnicodeDecodeError:
        return BAD_KEYS_UTF8
    return 0 if all(text.split(" ")) and check_property_text(text) else BAD_KEYS


FIELDS = ("id", "tags", "keys", "properties", "body")   # a message's fields in the frame, in order
ID, TAGS, KEYS, PROPS, BODY = range(len(FIELDS))
RESERVED_BYTES = tuple(sorted(name.encode() for name in RESERVED))


def py_frame_slices(raw: bytes, reserved: tuple = RESERVED_BYTES, id_max: int = ID_MAX_BYTES) -> tuple:
    """A SendRecords frame with every message checked, as arrays: (topic, fields, why, names,
    tags_hashes, hashes). Message i: ``fields`` (uint32, 10 per message) the offsets in ``raw`` of
    its id, tags, keys, properties and body, then their lengths (store.record_loop.SLICE_FIELDS);
    ``why[i]`` 0, or the BAD_* it is refused for (below BAD_TAGS its id is not usable); ``names``
    {i: the reserved property name} of the BAD_PROPS_RESERVED ones; ``tags_hashes`` (int64) its
    tags hash (0: none or refused); ``hashes`` (16 bytes each) the dedup window's key of (topic,
    id) (dedup.py), zero when its id is not usable. FrameError (ValueError) for a bad frame.
    Twin of tidemq._accel.frame_slices (``reserved``: the reserved names as bytes)."""
    topic, msgs = decode_request(raw)
    n = len(msgs)
    tb = topic.encode()
    lengths = array("I", raw[HEAD.size + len(tb):HEAD.size + len(tb) + 20 * n])
    if sys.byteorder != "little":
        lengths.byteswap()
    fields, ths = array("I"), array("q")
    why, hashes, names = bytearray(n), bytearray(), {}
    pos = HEAD.size + len(tb) + 20 * n
    reserved_names = frozenset(r.decode() for r in reserved)
    for i, (mid_b, tg, ks, ps, body) in enumerate(msgs):
        lens = lengths[5 * i:5 * i + 5]
        for ln in lens:
            fields.append(pos)
            pos += ln
        fields.extend(lens)
        w, th = 0, 0
        if not body:
            w = BODY_EMPTY
        elif not mid_b or len(mid_b) > id_max or b"\x01" in mid_b or b"\x02" in mid_b:
            w = BAD_ID
        elif not _utf8(mid_b):
            w = BAD_ID_UTF8
        if not w and tg:
            if not _utf8(tg) or not check_property_text(tg.decode()):
                w = BAD_TAGS
            else:
                th = tags_hash(tg.decode())
        if not w and ks:
            w = _keys_why(ks)
        if not w and ps:
            w, name = check_properties(ps, reserved_names)
            if w == BAD_PROPS_RESERVED:
                names[i] = name
        why[i] = w
        ths.append(th if not w else 0)
        hashes += py_id_hash(tb, mid_b) if not w or w >= BAD_TAGS else bytes(16)
    return topic, bytearray(fields.tobytes()), why, names, bytearray(ths.tobytes()), hashes


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def frame_slices(raw: bytes) -> tuple:
    """py_frame_slices, compiled when tidemq.accel has it (its ValueError as FrameError)."""
    try:
        return (ACCEL.frame_slices if ACCEL is not None else py_frame_slices)(raw, RESERVED_BYTES, ID_MAX_BYTES)
    except FrameError:
        raise
    except ValueError as e:
        raise FrameError(str(e)) from None


def _forget(f: asyncio.Future) -> None:
    if not f.cancelled():
        f.exception()          # retrieved: a failure of an answer nobody waits for is not "never retrieved"


def message_id(raw: bytes, fields, i: int) -> str:
    """Message i's id (a usable one: why[i] is 0 or >= BAD_TAGS)."""
    a, n = int(fields[i, ID]), int(fields[i, 5 + ID])
    return raw[a:a + n].decode("utf-8")


STREAM_WINDOW = 16              # frames of a SendRecordsStream read ahead of the answers written


class RecordSends:
    def __init__(self, sends: SendPath, tag_cache_max: int = TAG_CACHE_MAX) -> None:
        self.sends = sends
        self.tag_cache_max = tag_cache_max      # (the frame's tags are checked per message now)

    async def stream(self, context, window: int = STREAM_WINDOW) -> None:
        """``/tidemq.Data/SendRecordsStream``: SendRecords frames one after the other on one call,
        each answered as ``send`` answers it, in order. Frames are read ahead of the answers (at
        most ``window``) and each is handled as it arrives (puts in arrival order), so reading,
        storing and answering overlap without a call per batch. A client that goes away mid-stream
        loses only the answers: what was stored stays, and its resend is answered from the dedup
        window."""
        answers: asyncio.Queue = asyncio.Queue(window)

        async def read() -> None:
            try:
                while True:
                    raw = await context.read()
                    if raw is grpc.aio.EOF:
                        break
                    await answers.put(asyncio.ensure_future(self.send(raw, context)))
            finally:
                await answers.put(None)

        reader = asyncio.ensure_future(read())
        try:
            while (answer := await answers.get()) is not None:
                await context.write(await answer)
            await reader                                   # a read that failed fails the call
        finally:
            reader.cancel()
            while not answers.empty():                     # puts under way end on their own; their
                left = answers.get_nowait()                # answers have nobody to go to
                if left is not None:
                    left.add_done_callback(_forget)

    async def send(self, raw: bytes, context) -> bytes:
        try:
            frame = frame_slices(raw)
        except FrameError as e:
            return encode_response(Code.BAD_REQUEST, f"malformed SendRecords frame: {e}")
        n = len(frame[2])
        refusal, answer = await self.sends.gated(context, len(raw), lambda: self._send(raw, frame))
        if refusal is not None:
            self.sends.answered(frame[0], [Code.TOO_MANY_REQUESTS] * n)
            return encode_response(Code.TOO_MANY_REQUESTS, refusal, [(Code.TOO_MANY_REQUESTS, -1, -1)] * n)
        return answer

    async def _send(self, raw: bytes, frame: tuple) -> bytes:
        topic, fields, why, names, ths, hashes = frame
        n = len(why)
        _, code, text = self.sends.topic_check(topic)
        if code != Code.OK:
            self.sends.answered(topic, [code] * n)
            return encode_response(code, text, [(code, -1, -1)] * n)
        F = np.frombuffer(fields, np.uint32).reshape(n, 10)
        codes = np.full(n, Code.OK, np.int32)
        qids = np.full(n, -1, np.int32)
        offsets = np.full(n, -1, np.int64)
        texts: dict[int, str] = {}
        refused = np.frombuffer(why, np.uint8)
        skip = refused != 0                           # not stored: refused, or answered from the window (below)
        answered = self.sends.seen_keys(topic, hashes, lambda i: message_id(raw, F, i))
        dups = {}
        for i, earlier in answered.items():           # retries of sends that were stored: answered again
            skip[i] = True
            if isinstance(earlier, Unconfirmed):      # stored, still not confirmed: never stored twice
                codes[i] = earlier[0]
                texts[i] = earlier[1]
            else:
                offsets[i] = earlier[0]
                texts[i] = DUPLICATE
                dups[i] = earlier
        for i in np.flatnonzero(refused).tolist():
            if i in answered:                         # a resend is answered from the window whatever it says
                continue
            c, words = WHY[int(refused[i])]
            codes[i] = c
            texts[i] = words.format(name=names.get(i)) if i in names else words
        if not skip.all():
            r = await self.sends.put_slices(topic, raw, F, ths, _SUFFIX, skip)
            stored = (np.frombuffer(r.size, np.int32) > 0) & ~skip
            ok = r.status is PutStatus.PUT_OK
            if ok:
                qids[stored] = np.frombuffer(r.qid, np.int32)[stored]
                offsets[stored] = np.frombuffer(r.qoff, np.int64)[stored]
            else:
                codes[stored] = put_code(r.status, r.reason)
                for i in np.flatnonzero(stored).tolist():
                    texts[i] = r.error or r.status.name
                    # appended, not confirmed (disk, followers): a resend is answered, never stored again
                    self.sends.remember_unconfirmed(topic, message_id(raw, F, i), r.status, r.qoff[i],
                                                    r.phys[i] + r.size[i])
            for i, res in r.refused.items():
                if not skip[i]:
                    codes[i] = put_code(res[0], res[9])
                    texts[i] = res[6] or res[0].name
            if ok and stored.any():
                self.sends.remember_keys(hashes, np.frombuffer(r.qoff, np.int64), stored)
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
