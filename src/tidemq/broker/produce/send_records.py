"""Raw batch sends for tidemq.client: ``/tidemq.Data/SendRecords``.

SendMessage carries one protobuf Message per message and the broker converts each one
(to_store) into a store Message: at a few microseconds each, that conversion and the
protobuf objects bounded a batch producer. SendRecords carries a batch of one topic in a
compact frame (protocol/send_frame.py). This lane parses a frame in one pass into arrays
(``frame_slices``: where each field lies in the frame, why the frame cannot carry a message, its
tags hash, its dedup key) and hands them to the send path as a ``Slices`` payload (batch.py),
stored with one MessageStore.put_slices, which lays the records out from the frame's bytes: no
Python object per message. The answer is one (code, queue id, queue offset) per message, with
per-message texts in the header, and the indexes of the duplicates (answered OK with the first
store's offset, queue id -1, the text "duplicate: already stored").

Everything else is the send path's (send_path.py), as for SendMessage: flow control, topic checks
and auto-creation, the dedup window, the store's checks and limits. A frame that is not one
answers BAD_REQUEST saying what is wrong with it, for the whole request.

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
from ...record.codec import RECORD_CRC_NAME
from ...store.validate import PROPS_RESERVED, py_check_properties, utf8_ok
from ..wire import INTERNAL, PROP_MESSAGE_TYPE
from .dedup import KEY, py_id_hash
from .batch import SendBatch, Slices, caller_of
from .send_path import SendPath

RESERVED = frozenset(INTERNAL | {RECORD_CRC_NAME})
NORMAL_SUFFIX = f"{PROP_MESSAGE_TYPE}\x01NORMAL\x02".encode()

# Why the frame cannot carry a message here (the compiled frame_slices returns the same numbers): its
# id is not usable, or it names a property only the broker writes (the record's own rules, texts,
# keys and properties, are the store's: store/validate.py)
BODY_EMPTY, BAD_ID, BAD_ID_UTF8, BAD_PROPS_RESERVED = 1, 2, 3, 10
WHY = {
    BODY_EMPTY: (Code.MESSAGE_BODY_EMPTY, "the body is empty"),
    BAD_ID: (Code.BAD_REQUEST, f"the message id must be 1-{ID_MAX_BYTES} bytes without \\x01 / \\x02"),
    BAD_ID_UTF8: (Code.BAD_REQUEST, "the message id is not UTF-8"),
    BAD_PROPS_RESERVED: (Code.BAD_REQUEST, "property {name!r} is reserved (SendRecords takes NORMAL messages only)"),
}
FIELDS = ("id", "tags", "keys", "properties", "body")   # a message's fields in the frame, in order
ID, TAGS, KEYS, PROPS, BODY = range(len(FIELDS))
RESERVED_BYTES = tuple(sorted(name.encode() for name in RESERVED))


def py_frame_slices(raw: bytes, reserved: tuple = RESERVED_BYTES, id_max: int = ID_MAX_BYTES, key: bytes = KEY) -> tuple:
    """A SendRecords frame parsed into arrays: (topic, fields, why, names, hashes). Message i:
    ``fields`` (uint32, 10 per message) the offsets in ``raw`` of its id, tags, keys, properties and
    body, then their lengths (store.record_loop.SLICE_FIELDS); ``why[i]`` 0, or the BAD_* the lane
    refuses it for; ``names`` {i: the reserved property name} of the BAD_PROPS_RESERVED ones;
    ``hashes`` (16 bytes each) the dedup window's key of (topic, id) under ``key`` (dedup.py), zero when
    its id is not usable. FrameError (ValueError) for a bad frame. Twin of tidemq._accel.frame_slices
    (``reserved``: the reserved names as bytes)."""
    topic, msgs = decode_request(raw)
    n = len(msgs)
    tb = topic.encode()
    lengths = array("I", raw[HEAD.size + len(tb):HEAD.size + len(tb) + 20 * n])
    if sys.byteorder != "little":
        lengths.byteswap()
    fields = array("I")
    why, hashes, names = bytearray(n), bytearray(), {}
    pos = HEAD.size + len(tb) + 20 * n
    for i, (mid_b, _tg, _ks, ps, body) in enumerate(msgs):
        lens = lengths[5 * i:5 * i + 5]
        for ln in lens:
            fields.append(pos)
            pos += ln
        fields.extend(lens)
        w = 0
        if not body:
            w = BODY_EMPTY
        elif not mid_b or len(mid_b) > id_max or b"\x01" in mid_b or b"\x02" in mid_b:
            w = BAD_ID
        elif not utf8_ok(mid_b):
            w = BAD_ID_UTF8
        if not w and ps:
            check, name = py_check_properties(ps, reserved)
            if check == PROPS_RESERVED:
                w, names[i] = BAD_PROPS_RESERVED, name
        why[i] = w
        hashes += py_id_hash(key, tb, mid_b) if w in (0, BAD_PROPS_RESERVED) else bytes(16)
    return topic, bytearray(fields.tobytes()), why, names, hashes


def frame_slices(raw: bytes) -> tuple:
    """py_frame_slices, compiled when tidemq.accel has it (its ValueError as FrameError)."""
    try:
        return (ACCEL.frame_slices if ACCEL is not None else py_frame_slices)(raw, RESERVED_BYTES, ID_MAX_BYTES, KEY)
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
    def __init__(self, sends: SendPath, before_put=None) -> None:
        """``before_put``: awaited with the call's context before each frame's messages are put (a
        broker group's leader: the wait while its in-sync set is short, replication/proxy.py
        in_sync, as SendMessage takes it); None: nothing."""
        self.sends = sends
        self.before_put = before_put

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
        """One frame: parsed (a frame that is not one: BAD_REQUEST for the request), sent, answered."""
        try:
            topic, fields, why, names, hashes = frame_slices(raw)
        except FrameError as e:
            return encode_response(Code.BAD_REQUEST, f"malformed SendRecords frame: {e}")
        n = len(why)
        F = np.frombuffer(fields, np.uint32).reshape(n, 10)
        refused = {}
        for i in np.flatnonzero(np.frombuffer(why, np.uint8)).tolist():
            code, words = WHY[why[i]]
            refused[i] = (code, words.format(name=names.get(i)) if i in names else words)
        batch = SendBatch(n, Slices(raw, F, NORMAL_SUFFIX), lambda i: message_id(raw, F, i), len(raw), topic=topic,
                          keys=hashes, refused=refused)
        if self.before_put is not None:
            await self.before_put(context)
        v = await self.sends.send(batch, caller_of(context))
        if v.whole is not None:              # one refusal for the request (flow control, the topic): said once
            return encode_response_columns(v.whole[0], v.whole[1], v.codes, v.qids, v.offsets)
        code, text = v.top()
        return encode_response_columns(code, text, v.codes, v.qids, v.offsets, v.texts, v.duplicates())
