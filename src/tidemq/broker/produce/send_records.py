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

from ...protocol.send_frame import ID_MAX_BYTES, FrameError, decode_request, encode_response
from ...protocol.stubs import Code
from ...store import PutStatus
from ...store.codec import PROP_UNIQ_KEY, RECORD_CRC_NAME, check_property_text, tags_hash
from ..wire import INTERNAL, PROP_MESSAGE_TYPE
from .send_path import DUPLICATE, SendPath, Unconfirmed, put_code

RESERVED = frozenset(INTERNAL | {RECORD_CRC_NAME})
_SUFFIX = f"{PROP_MESSAGE_TYPE}\x01NORMAL\x02".encode()
_UNIQ = f"{PROP_UNIQ_KEY}\x01".encode()
TAG_CACHE_MAX = 4096            # distinct tags whose encoding (or refusal) is remembered


def check_properties(raw: bytes) -> str | None:
    """Why the encoded user properties are refused, or None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "properties are not UTF-8"
    if not text.endswith("\x02"):
        return "properties must be name\\x01value\\x02 pairs"
    for item in text[:-1].split("\x02"):
        name, sep, value = item.partition("\x01")
        if not sep or not name or "\x01" in value:
            return "properties must be name\\x01value\\x02 pairs with a non-empty name"
        if name in RESERVED:
            return f"property {name!r} is reserved (SendRecords takes NORMAL messages only)"
    return None


class RecordSends:
    def __init__(self, sends: SendPath, tag_cache_max: int = TAG_CACHE_MAX) -> None:
        self.sends = sends
        self.tag_cache_max = tag_cache_max
        self._tags: dict[bytes, tuple[bytes, int] | None] = {}    # tags -> (TAGS property, tags hash) / refused

    async def send(self, raw: bytes, context) -> bytes:
        try:
            topic, msgs = decode_request(raw)
        except FrameError as e:
            return encode_response(Code.BAD_REQUEST, f"malformed SendRecords frame: {e}")
        refusal, answer = await self.sends.gated(context, len(raw), lambda: self._send(topic, msgs))
        if refusal is not None:
            return encode_response(Code.TOO_MANY_REQUESTS, refusal, [(Code.TOO_MANY_REQUESTS, -1, -1)] * len(msgs))
        return answer

    def _tag(self, tg: bytes) -> tuple[bytes, int] | None:
        enc = self._tags.get(tg, False)
        if enc is False:
            enc = None
            try:
                t = tg.decode("utf-8")
            except UnicodeDecodeError:
                t = None
            if t and check_property_text(t):
                enc = (b"TAGS\x01" + tg + b"\x02", tags_hash(t))
            if len(self._tags) < self.tag_cache_max:
                self._tags[tg] = enc
        return enc

    async def _send(self, topic: str, msgs: list) -> bytes:
        n = len(msgs)
        _, code, why = self.sends.topic_check(topic)
        if code != Code.OK:
            return encode_response(code, why, [(code, -1, -1)] * n)
        entries: list = [None] * n
        texts: dict[int, str] = {}
        duplicates: list[int] = []
        batch: list = []
        where: list = []
        seen = self.sends.seen
        for i, (mid_b, tg, ks, ps, body) in enumerate(msgs):
            why = None
            if not body:
                entries[i] = (Code.MESSAGE_BODY_EMPTY, -1, -1)
                texts[i] = "the body is empty"
                continue
            if not mid_b or len(mid_b) > ID_MAX_BYTES or b"\x01" in mid_b or b"\x02" in mid_b:
                why = f"the message id must be 1-{ID_MAX_BYTES} bytes without \\x01 / \\x02"
            else:
                try:
                    mid = mid_b.decode("utf-8")
                except UnicodeDecodeError:
                    why = "the message id is not UTF-8"
            if why is None:
                earlier = seen(topic, mid)
                if isinstance(earlier, Unconfirmed):     # stored, still not confirmed: never stored twice
                    entries[i] = (earlier[0], -1, -1)
                    texts[i] = earlier[1]
                    continue
                if earlier is not None:         # a retry of a send that was stored: answer it again
                    entries[i] = (Code.OK, -1, earlier[0])
                    texts[i] = DUPLICATE
                    duplicates.append(i)
                    continue
                parts = [ps, _UNIQ, mid_b, b"\x02", _SUFFIX]
                th = 0
                keys = None
                if tg:
                    enc = self._tag(tg)
                    if enc is None:
                        why = "tags must be UTF-8 without \\x01 / \\x02"
                    else:
                        parts.append(enc[0])
                        th = enc[1]
                if ks and why is None:
                    why, keys = self._keys(ks)
                    parts.append(b"KEYS\x01" + ks + b"\x02")
                if ps and why is None:
                    why = check_properties(ps)
            if why is not None:
                entries[i] = (Code.BAD_REQUEST, -1, -1)
                texts[i] = why
                continue
            batch.append((body, b"".join(parts), th, mid, keys))
            where.append(i)
        if batch:
            results = await self.sends.put_encoded(topic, batch)
            ok = PutStatus.PUT_OK
            stored = []
            for i, r in zip(where, results):
                if r[0] is ok:
                    entries[i] = (Code.OK, r[2], r[3])
                    stored.append((r[7], r[3]))
                else:
                    entries[i] = (put_code(r[0], r[9]), -1, -1)
                    texts[i] = r[6] or r[0].name
                    self.sends.remember_unconfirmed(topic, r[7], r)
            if stored:
                self.sends.remember_many(topic, stored)
                self.sends.stored()
        codes = {e[0] for e in entries}
        if n == 1:
            top, message = entries[0][0], texts.get(0, "")
        elif codes == {Code.OK}:
            top, message = Code.OK, ""
        else:
            top, message = Code.MULTIPLE_RESULTS, "some messages were not stored: see the entries"
        return encode_response(top, message, entries, texts, duplicates)

    @staticmethod
    def _keys(ks: bytes) -> tuple[str | None, list[str] | None]:
        try:
            text = ks.decode("utf-8")
        except UnicodeDecodeError:
            return "keys are not UTF-8", None
        keys = text.split(" ")
        if not all(keys) or not check_property_text(text):
            return "keys must be non-empty, separated by single spaces, without \\x01 / \\x02", None
        return None, keys
