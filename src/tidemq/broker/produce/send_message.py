"""SendMessage, the protocol's send (the official clients; ``Producer(raw=False)``): its wire
format parsed into a SendBatch, the send path's verdicts (send_path.py) encoded back.

Two ways in. With the compiled module, SendMessage is registered with no deserializer
(``send_message_lane``) and the common request (one NORMAL message with an id, maybe a tag:
wire.encoded_one's rule) is read straight from its bytes by tidemq._accel.send_one into the
store's pre-encoded entry (an ``Encoded`` payload); any other request is decoded by protobuf into
store Messages (``Messages``: wire.to_store), each with its type, message group and delivery time
for the path to route. A message type tidemq does not know is refused here (UNSUPPORTED), and a user
property named as one the broker writes itself (ILLEGAL_MESSAGE_PROPERTY_KEY: ``SYSTEM_NAME``). The common
request, read with its dedup key, goes through ``SendPath.send_one`` first (send's steps in one pass;
it declines, having done nothing, whatever it does not answer the way send would, and send takes it).

The answer: one SendResultEntry per message (its id, or the one the store gave a message sent
without one; its queue offset; the transaction id of a TRANSACTION message; the recall handle of a
DELAY message waiting for its time); a resend answered
from the dedup window is OK with the first store's offset and the text "duplicate: already
stored", its index in the ``tidemq-duplicates`` trailer (protocol/data.py). The lane's one-message
answer (``answer_one``) and the lane's others (``answer_many``; a batch stored whole: ``answer_stored``,
compiled) are written as bytes (what protobuf would serialize for the same response, field for field) and
handed to gRPC as they are (``serialize``), with no protobuf object made per message.

A batch of common messages of one topic (tidemq._accel.send_many: e.g. ``Producer(raw=False)``'s) is
read into slices of the request's bytes with the dedup keys of its ids and put as SendRecords' frames
are (a ``Slices`` payload: MessageStore.put_slices with the properties ``__MSGTYPE=NORMAL`` after
UNIQ_KEY, then TAGS: the record encoded_one's properties give, byte for byte): no Python object per
message on its way in or out.
"""

from __future__ import annotations

import grpc
import numpy as np

from ...accel import ACCEL as _ACCEL
from ...protocol.data import duplicates_trailer
from ...protocol.stubs import Code, MessageType, code_name, pb, spb, status
from ..deferred.parking import delivery_ms
from ..protection.decoding import decoded
from ..wire import INTERNAL, SUPPORTED_TYPES, to_store
from .batch import (
    DUPLICATE,
    STORED,
    Encoded,
    Messages,
    SendBatch,
    Slices,
    Verdicts,
    caller_of,
)
from .dedup import KEY
from .send_path import SendPath
from .send_records import NORMAL_SUFFIX, message_id

NOT_YET = "not supported yet by tidemq: {what}"
# a user property may not have a name the broker writes itself (wire.INTERNAL): UNIQ_KEY would give a message
# sent without an id another message's id (whose first send, looked up in the index after a start, would
# be answered a duplicate and never stored), a number the broker reads back (TIMER_DELIVER_MS, __PRIORITY)
# anything; RocketMQ's proxy refuses them so too
SYSTEM_NAME = "property {name!r} is used by the system: a user property may not have its name"
_SEND_MANY = getattr(_ACCEL, "send_many", None)       # (a build of tidemq._accel from before it: None)
SEND_MESSAGE = "/apache.rocketmq.v2.MessagingService/SendMessage"


def send_message_lane(servicer) -> "grpc.GenericRpcHandler | None":
    """SendMessage registered with no deserializer: ``servicer.SendMessageBytes`` gets the request's
    bytes (MessageSends.send_bytes), so the common message is read once, in C, instead of decoded
    by protobuf and then read field by field (bench/README.md). None without tidemq._accel's
    send_one: the service's own SendMessage serves it."""
    if _ACCEL is None or not hasattr(_ACCEL, "send_one"):
        return None
    handler = grpc.unary_unary_rpc_method_handler(servicer.SendMessageBytes, None, serialize)

    class Lane(grpc.GenericRpcHandler):
        def service(self, details):
            return handler if details.method == SEND_MESSAGE else None
    return Lane()


def serialize(answer) -> bytes:
    """The lane's answer as gRPC sends it: bytes as they are (``answer_one``), a SendMessageResponse
    (the general path, a refusal of the guard) serialized."""
    return answer if type(answer) is bytes else answer.SerializeToString()


def _varint(v: int) -> bytes:
    """``v`` (0 <= v < 2**64) as a protobuf varint."""
    if v < 0x80:
        return bytes((v,))
    if v < 0x200000:                     # (queue offsets: mostly 2 or 3 bytes, written at once)
        return bytes(((v & 0x7F) | 0x80, v >> 7)) if v < 0x4000 else \
            bytes(((v & 0x7F) | 0x80, ((v >> 7) & 0x7F) | 0x80, v >> 14))
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _text(tag: bytes, text: str) -> bytes:
    """A string field (``tag``: its key byte), nothing when empty (proto3 omits it)."""
    if not text:
        return b""
    raw = text.encode("utf-8", "surrogatepass")
    return tag + _varint(len(raw)) + raw


_STATUS_MADE_MAX = 64           # (code, text) -> the encoded Status, for the answers given again and again
_statuses: dict[tuple[int, str], bytes] = {}


def _status(code: int, text: str) -> bytes:
    """A Status (status(code, text): an empty text is the code's name) encoded, length included."""
    got = _statuses.get((code, text))
    if got is None:
        body = (b"\x08" + _varint(code) if code else b"") + _text(b"\x12", text or code_name(code))
        got = _varint(len(body)) + body
        if len(_statuses) < _STATUS_MADE_MAX:
            _statuses[(code, text)] = got
    return got


_STORED_STATUS = b"\x0a" + _status(Code.OK, "")      # answer_stored's: every message of the batch stored


def answer_one(code: int, text: str, message_id: str, offset: int, transaction_id: str = "",
               recall_handle: str = "") -> bytes:
    """The serialized SendMessageResponse of one message: its status (the answer's own too) and one
    entry, exactly the bytes protobuf writes for ``MessageSends._answer``'s response (fields in number
    order, proto3's defaults left out); ``offset`` >= 0."""
    st = b"\x0a" + _status(code, text)
    entry = (st + _text(b"\x12", message_id) + _text(b"\x1a", transaction_id) +
             (b"\x20" + _varint(offset) if offset else b"") + _text(b"\x2a", recall_handle))
    return st + b"\x12" + _varint(len(entry)) + entry


def py_answer_one_stored(st: bytes, message_id: str, offset: int) -> bytes:
    """``answer_one(Code.OK, "", message_id, offset)`` with ``st`` the encoded OK status (field 1, key
    and length included: ``_STORED_STATUS``); ``offset`` >= 0. Twin of tidemq._accel.answer_one_stored."""
    if offset < 0:
        raise ValueError("answer_one_stored: a queue offset >= 0")
    raw = message_id.encode("utf-8", "surrogatepass")
    entry = st + (b"\x12" + _varint(len(raw)) + raw if raw else b"") + (b"\x20" + _varint(offset) if offset else b"")
    return st + b"\x12" + _varint(len(entry)) + entry


_answer_one_stored = getattr(_ACCEL, "answer_one_stored", None) or py_answer_one_stored


def answer_stored_one(message_id: str, offset: int) -> bytes:
    """``answer_one(Code.OK, "", message_id, offset)``, the common answer, with its constant parts
    made once: the same bytes (tests/broker/produce/test_send_message.py); ``offset`` >= 0."""
    return _answer_one_stored(_STORED_STATUS, message_id, offset)


def answer_many(v: Verdicts, ids) -> bytes:
    """The serialized SendMessageResponse of ``v`` (``ids``: each message's id as sent, "" none), the bytes
    protobuf writes for ``MessageSends._answer``'s response (its trailer is the caller's)."""
    texts, txns, given, codes, offsets, recalls = v.texts, v.txns, v.ids, v.codes, v.offsets, v.recalls
    varint, text = _varint, _text
    parts = []
    add = parts.append
    if not (texts or txns or given or recalls) and v.kinds.count(STORED) == v.n:     # a batch stored whole
        st = b"\x0a" + _status(Code.OK, "")
        for mid, off in zip(ids, offsets):
            entry = st + text(b"\x12", mid) + (b"\x20" + varint(off) if off > 0 else b"")
            add(b"\x12" + varint(len(entry)) + entry)
        return st + b"".join(parts)
    first = b""
    for i in range(v.n):
        st = b"\x0a" + _status(codes[i], texts.get(i, "") if texts else "")
        if i == 0:
            first = st
        off = offsets[i]
        entry = st + text(b"\x12", ids[i] or given.get(i, "")) + (text(b"\x1a", txns.get(i, "")) if txns else b"") + \
            (b"\x20" + varint(off) if off > 0 else b"") + (text(b"\x2a", recalls.get(i, "")) if recalls else b"")
        add(b"\x12" + varint(len(entry)) + entry)
    if v.n == 1:
        top = first
    else:
        code, why = v.top()
        top = b"\x0a" + _status(code, why if code != Code.MULTIPLE_RESULTS else "")
    return top + b"".join(parts)


def py_answer_stored(st: bytes, raw: bytes, fields, offsets: list[int]) -> bytes:
    """answer_many's bytes for a batch stored whole: ``st`` the encoded status (field 1, key and
    length included: the answer's and every entry's), each entry its id (the slice of ``raw`` that
    ``fields`` names, 10 uint32 per message as send_many gives them) and its queue offset. Twin of
    tidemq._accel.answer_stored."""
    F = memoryview(fields).cast("B").cast("I")
    if len(F) != 10 * len(offsets):
        raise ValueError("answer_stored: 10 uint32 of fields per offset")
    parts = [st]
    for i, off in enumerate(offsets):
        a, n = F[10 * i], F[10 * i + 5]
        if a + n > len(raw):
            raise ValueError("answer_stored: an id outside the request")
        mid = raw[a:a + n]
        entry = st + (b"\x12" + _varint(n) + mid if n else b"") + (b"\x20" + _varint(off) if off > 0 else b"")
        parts.append(b"\x12" + _varint(len(entry)) + entry)
    return b"".join(parts)


answer_stored = getattr(_ACCEL, "answer_stored", None) or py_answer_stored


def messages_batch(msgs) -> SendBatch:
    """A decoded request's messages as a SendBatch of store Messages."""
    n = len(msgs)
    stored, types, groups, due = [], [], [], []
    ids, topics, refused = [], [], {}
    nbytes = 0
    for i, m in enumerate(msgs):
        sp = m.system_properties
        ids.append(sp.message_id)
        topics.append(m.topic.name)
        nbytes += len(m.body)
        t = sp.message_type
        if t not in SUPPORTED_TYPES and t != MessageType.MESSAGE_TYPE_UNSPECIFIED:
            refused[i] = (Code.UNSUPPORTED, NOT_YET.format(what=f"{_type_name(t)} messages"))
        elif m.user_properties and not INTERNAL.isdisjoint(m.user_properties):
            refused[i] = (Code.ILLEGAL_MESSAGE_PROPERTY_KEY, SYSTEM_NAME.format(
                name=min(INTERNAL.intersection(m.user_properties))))
        stored.append(to_store(m))
        types.append(t)
        groups.append(sp.message_group if sp.HasField("message_group") else "")
        due.append(delivery_ms(sp.delivery_timestamp) if sp.HasField("delivery_timestamp") else None)
    one = topics[0]
    same = all(t == one for t in topics)
    return SendBatch(n, Messages(stored, types, groups, due), ids.__getitem__, nbytes,
                     topic=one if same else None, topics=None if same else topics, refused=refused)


class MessageSends:
    def __init__(self, sends: SendPath) -> None:
        self.sends = sends

    def _too_many(self, n: int) -> "spb.SendMessageResponse | None":
        """The answer to a request of ``n`` messages, more than send_messages_per_request_max: refused
        whole (PAYLOAD_TOO_LARGE), before a message of it is looked at; None when within."""
        most = self.sends.config.send_messages_per_request_max
        if n <= most:
            return None
        return spb.SendMessageResponse(status=status(
            Code.PAYLOAD_TOO_LARGE, f"{n} messages in one request, more than send_messages_per_request_max={most}"))

    async def send(self, request, context) -> "spb.SendMessageResponse":
        msgs = request.messages
        if not msgs:
            return spb.SendMessageResponse(status=status(Code.BAD_REQUEST, "no message in the request"))
        too_many = self._too_many(len(msgs))
        if too_many is not None:
            return too_many
        v = await self.sends.send(messages_batch(msgs), caller_of(context))
        return self._answer(v, [m.system_properties.message_id for m in msgs], context)

    async def send_bytes(self, raw: bytes, context) -> "bytes | spb.SendMessageResponse":
        """SendMessage from the request's bytes (``send_message_lane``): the common message read
        straight from them (tidemq._accel.send_one, wire.encoded_one's rule) is sent as an Encoded
        payload; common messages of one topic sharing their born time, host and
        sys flag (tidemq._accel.send_many: a batch, e.g. ``Producer(raw=False)``'s) are sent as slices
        of the request's bytes (a ``Slices`` payload with their dedup keys, as SendRecords' frames);
        any other request is decoded (bytes that are not one: INVALID_ARGUMENT) and sent as ``send``
        sends it. The answer: its bytes (``answer_one``, ``answer_stored``, ``answer_many``), ``send``'s
        SendMessageResponse for the others (``serialize`` takes both)."""
        one = _ACCEL.send_one(raw, KEY)        # (with the dedup key of its topic and id)
        if one is None:
            many = _SEND_MANY(raw, KEY) if _SEND_MANY is not None else None
            if many is not None:              # common messages of one topic: put from the request's bytes
                topic, fields, keys, nbytes, born_ms, born_host, sys_flag = many
                F = np.frombuffer(fields, np.uint32).reshape(-1, 10)
                n = len(F)
                too_many = self._too_many(n)
                if too_many is not None:
                    return too_many
                born = (born_ms, born_host, sys_flag) if born_ms is not None or born_host or sys_flag else None
                batch = SendBatch(n, Slices(raw, F, NORMAL_SUFFIX, born), lambda i: message_id(raw, F, i), nbytes,
                                  topic=topic, keys=keys)
                v = await self.sends.send(batch, caller_of(context))
                self._trailer(v, context)
                if not (v.texts or v.txns or v.ids or v.recalls) and v.kinds.count(STORED) == n:
                    return answer_stored(_STORED_STATUS, raw, fields, v.offsets)     # stored whole
                return answer_many(v, [message_id(raw, F, i) for i in range(n)])
            return await self.send(await decoded(spb.SendMessageRequest.FromString, raw, context, SEND_MESSAGE),
                                   context)
        topic, entry, mid, born_ms, born_host, sys_flag, key = one
        v = self.sends.send_one(topic, entry, mid, key, born_ms, born_host, sys_flag, context.peer())
        if type(v) is int:                       # stored: the common answer
            return _answer_one_stored(_STORED_STATUS, mid, v)
        if v is None:                            # a step finds something uncommon: send's way
            batch = SendBatch(1, Encoded((entry,), born_ms, born_host, sys_flag), lambda _i: mid, len(entry[0]),
                              topic=topic, keys=key)
            v = await self.sends.send(batch, caller_of(context))
        if v.kinds[0] == STORED:                 # the common answer
            return answer_stored_one(mid, v.offsets[0])
        self._trailer(v, context)
        return answer_one(v.codes[0], v.texts.get(0, ""), mid, max(v.offsets[0], 0), v.txns.get(0, ""),
                          v.recalls.get(0, ""))

    @staticmethod
    def _answer(v: Verdicts, ids, context) -> "spb.SendMessageResponse":
        texts, txns, given, codes, offsets, recalls = v.texts, v.txns, v.ids, v.codes, v.offsets, v.recalls
        entries = [spb.SendResultEntry(status=status(codes[i], texts.get(i, "")),
                                       message_id=ids[i] or given.get(i, ""),
                                       offset=max(offsets[i], 0), transaction_id=txns.get(i, ""),
                                       recall_handle=recalls.get(i, ""))
                   for i in range(v.n)]
        MessageSends._trailer(v, context)
        if v.n == 1:
            return spb.SendMessageResponse(status=entries[0].status, entries=entries)
        code, text = v.top()
        return spb.SendMessageResponse(status=status(code, text if code != Code.MULTIPLE_RESULTS else ""),
                                       entries=entries)

    @staticmethod
    def _trailer(v: Verdicts, context) -> None:
        """The ``tidemq-duplicates`` trailer of an answer with duplicates (protocol/data.py)."""
        if v.n == 1:
            if v.kinds[0] == DUPLICATE:
                context.set_trailing_metadata(duplicates_trailer((0,)))
            return
        dups = v.duplicates()
        if dups:
            context.set_trailing_metadata(duplicates_trailer(dups))


def _type_name(t: int) -> str:
    """The message type's name, or its number when the enum has none (a client sent 7..9)."""
    try:
        return pb.MessageType.Name(t)
    except ValueError:
        return f"message type {t}"
