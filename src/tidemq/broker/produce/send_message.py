"""SendMessage, the protocol's send (the official clients; ``Producer(raw=False)``).

Each message is checked (type, body, topic), answered from the dedup window when it is
a resend of one already stored (status OK with the first store's offset and transaction
id, as the official clients expect; its request index in the ``tidemq-duplicates``
trailer, protocol/data.py), converted (wire.to_store) and stored with the others of the
request in one put. A DELAY message due later is parked in the schedule topic, a
TRANSACTION message in the half topic (deferred/). The whole request first passes the
send path's gate (send_path.py): refused there, every message is answered
TOO_MANY_REQUESTS with the reason.
"""

from __future__ import annotations

import grpc

from ...accel import ACCEL as _ACCEL
from ...config import BrokerConfig
from ...io import Clock
from ...protocol.data import duplicates_trailer
from ...protocol.stubs import Code, MessageType, pb, spb, status
from ..deferred.parking import PROP_DELIVER_MS, delivery_ms, park
from ..deferred.timer import Timer
from ..deferred.transactions import Transactions
from ..protection.decoding import decoded
from ..sessions.telemetry import client_id_of
from ..topic_names import SCHEDULE_TOPIC
from ..wire import SUPPORTED_TYPES, encoded_one, to_store
from .send_path import DUPLICATE, SendPath, Unconfirmed, put_code

NOT_YET = "not supported yet by tidemq: {what}"
SEND_MESSAGE = "/apache.rocketmq.v2.MessagingService/SendMessage"


def send_message_lane(servicer) -> "grpc.GenericRpcHandler | None":
    """SendMessage registered with no deserializer: ``servicer.SendMessageBytes`` gets the request's
    bytes (MessageSends.send_bytes), so the common message is read once, in C, instead of decoded
    by protobuf and then read field by field (bench/README.md). None without tidemq._accel's
    send_one: the service's own SendMessage serves it."""
    if _ACCEL is None or not hasattr(_ACCEL, "send_one"):
        return None
    handler = grpc.unary_unary_rpc_method_handler(servicer.SendMessageBytes, None,
                                                  spb.SendMessageResponse.SerializeToString)

    class Lane(grpc.GenericRpcHandler):
        def service(self, details):
            return handler if details.method == SEND_MESSAGE else None
    return Lane()


class MessageSends:
    def __init__(self, sends: SendPath, config: BrokerConfig, clock: Clock, timer: Timer,
                 transactions: Transactions) -> None:
        self.sends = sends
        self.config = config
        self.clock = clock
        self.timer = timer
        self.transactions = transactions

    async def send(self, request, context) -> "spb.SendMessageResponse":
        msgs = request.messages
        if not msgs:
            return spb.SendMessageResponse(status=status(Code.BAD_REQUEST, "no message in the request"))
        refusal, answer = await self.sends.gated(context, sum(len(m.body) for m in msgs),
                                                 lambda: self._send(msgs, context))
        if refusal is not None:
            answer = self._refuse([m.system_properties.message_id for m in msgs], refusal)
            self.sends.answered([m.topic.name for m in msgs], [Code.TOO_MANY_REQUESTS] * len(msgs))
        return answer

    async def send_bytes(self, raw: bytes, context) -> "spb.SendMessageResponse":
        """SendMessage from the request's bytes (``send_message_lane``): the common message read
        straight from them (tidemq._accel.send_one, wire.encoded_one's rule) takes the short lane;
        any other request is decoded (bytes that are not one: INVALID_ARGUMENT) and sent as ``send``
        sends it."""
        one = None if self.sends.in_thread else _ACCEL.send_one(raw)
        if one is None:
            return await self.send(await decoded(spb.SendMessageRequest.FromString, raw, context, SEND_MESSAGE),
                                   context)

        async def lane():
            answer = self._one_encoded(one)
            if answer is None:          # a topic that takes no sends, a resend: the general path answers
                return await self._send(spb.SendMessageRequest.FromString(raw).messages, context)
            return answer
        refusal, answer = await self.sends.gated(context, len(one[1][0]), lane)
        if refusal is not None:
            answer = self._refuse([one[1][3]], refusal)
            self.sends.answered([one[0]], [Code.TOO_MANY_REQUESTS])
        return answer

    def _one(self, m) -> "spb.SendMessageResponse | None":
        """The common send with less work (a NORMAL message with an id, maybe a tag: wire.encoded_one),
        to a topic that takes sends, not a resend: its properties encoded here, stored with put_one
        (dispatched after the answer). None: anything else, for the general path to answer."""
        one = encoded_one(m)
        return None if one is None else self._one_encoded(one)

    def _one_encoded(self, one: tuple) -> "spb.SendMessageResponse | None":
        """``_one`` of a message already read (encoded_one's tuple)."""
        topic, entry, born_ms, born_host, sys_flag = one
        _, code, _ = self.sends.topic_check(topic)
        if code != Code.OK or self.sends.seen(topic, entry[3]) is not None:
            return None
        e = self._stored(topic, self.sends.put_one(topic, entry, born_ms, born_host, sys_flag)[0], "", entry[3])
        code = e.status.code
        if code == Code.OK:
            self.sends.stored(False)
        self.sends.outcomes.add_code(topic, code)
        return spb.SendMessageResponse(status=e.status, entries=[e])

    def _stored(self, topic: str, r, txn: str, message_id: str) -> "spb.SendResultEntry":
        """The answer to a message the store took or refused (``r``, a PutResult; ``message_id``
        the one it was sent with), remembered in the dedup window when it was stored (a resend is
        answered, never stored twice)."""
        code = put_code(r.status, r.reason)
        if code == Code.OK and r.uniq_key:
            self.sends.remember(topic, r.uniq_key, r.queue_offset, txn)
        elif r.uniq_key:
            self.sends.remember_unconfirmed(topic, r.uniq_key, r.status, r.queue_offset, r.commitlog_offset + r.size,
                                            txn)
        return spb.SendResultEntry(status=status(code, r.error or ""),
                                   message_id=r.uniq_key or message_id or (r.msg_id or ""),
                                   offset=max(r.queue_offset, 0), transaction_id=txn)

    def _refuse(self, message_ids, reason: str) -> "spb.SendMessageResponse":
        """Flow control's answer: TOO_MANY_REQUESTS, the one code the official producer does not retry at once."""
        st = status(Code.TOO_MANY_REQUESTS, reason)
        return spb.SendMessageResponse(status=st, entries=[spb.SendResultEntry(status=st, message_id=i)
                                                           for i in message_ids])

    async def _send(self, msgs, context):
        if len(msgs) == 1 and not self.sends.in_thread:
            answer = self._one(msgs[0])
            if answer is not None:
                return answer
        entries: list = [None] * len(msgs)
        batch, where = [], []
        halves: set[int] = set()           # request indexes of TRANSACTION messages
        parked = False                     # a DELAY message went to the schedule topic: wake the timer
        duplicates: list[int] = []
        for i, m in enumerate(msgs):
            sp = m.system_properties
            if sp.message_type not in SUPPORTED_TYPES and sp.message_type != MessageType.MESSAGE_TYPE_UNSPECIFIED:
                entries[i] = self._entry(Code.UNSUPPORTED, NOT_YET.format(
                    what=f"{_type_name(sp.message_type)} messages"), sp.message_id)
                continue
            if not m.body:
                entries[i] = self._entry(Code.MESSAGE_BODY_EMPTY, "the body is empty", sp.message_id)
                continue
            n, code, why = self.sends.topic_check(m.topic.name)
            if code != Code.OK:
                entries[i] = self._entry(code, why, sp.message_id)
                continue
            seen = self.sends.seen(m.topic.name, sp.message_id)
            if isinstance(seen, Unconfirmed):     # stored, still not confirmed: never stored twice
                entries[i] = self._entry(seen[0], seen[1], sp.message_id)
                continue
            if seen is not None:          # a retry of a send that was stored: answer it again
                entries[i] = spb.SendResultEntry(status=status(Code.OK, DUPLICATE),
                                                 message_id=sp.message_id, offset=seen[0], transaction_id=seen[1])
                duplicates.append(i)
                continue
            st = to_store(m, n)
            if st.queue_id is not None:          # FIFO: hashed to one of the queues this broker writes
                ids = self.sends.store.write_queues(st.topic)
                if st.queue_id not in ids:
                    st.queue_id = ids[st.queue_id % len(ids)]
            if sp.message_type == MessageType.DELAY or sp.message_type == MessageType.TRANSACTION:
                st, refusal = self._divert(sp, st, context)
                if refusal is not None:
                    entries[i] = spb.SendResultEntry(status=refusal, message_id=sp.message_id)
                    continue
                parked = parked or st.topic == SCHEDULE_TOPIC
                if sp.message_type == MessageType.TRANSACTION:
                    halves.add(i)
            batch.append(st)
            where.append(i)
        if batch:
            results = await self.sends.put_batch(batch, defer_dispatch=True)    # one message: caches are cold
            for i, r in zip(where, results):
                txn = (r.offset_msg_id or "") if halves and i in halves else ""   # the half message's id
                entries[i] = self._stored(msgs[i].topic.name, r, txn, msgs[i].system_properties.message_id)
        if batch and any(e.status.code == Code.OK for e in entries):
            self.sends.stored(parked)
        if duplicates:
            context.set_trailing_metadata(duplicates_trailer(duplicates))
        self.sends.answered([m.topic.name for m in msgs], [e.status.code for e in entries], duplicates)
        codes = {e.status.code for e in entries}
        if len(entries) == 1:
            top = entries[0].status
        elif codes == {Code.OK}:
            top = status(Code.OK)
        else:
            top = status(Code.MULTIPLE_RESULTS)
        return spb.SendMessageResponse(status=top, entries=entries)

    def _divert(self, sp, m, context) -> tuple:
        """A DELAY message due later goes to the schedule topic, a TRANSACTION message to the
        half topic (deferred/parking.py): (the message to put, None) or (None, the refusal)."""
        if sp.message_type == MessageType.TRANSACTION:
            if self.transactions.undecided >= self.config.transaction_undecided_max:
                return None, status(Code.TOO_MANY_REQUESTS, f"{self.transactions.undecided} transactions undecided "
                                                            f"(transaction_undecided_max)")
            return self.transactions.half(m, client_id_of(context)), None
        if not sp.HasField("delivery_timestamp"):
            return m, None                             # no time: deliver now
        due = delivery_ms(sp.delivery_timestamp)
        now = self.clock.now_ms()
        if due - now > self.config.timer_delay_s_max * 1000:
            return None, status(Code.ILLEGAL_DELIVERY_TIME, f"delivery time {due} ms is more than "
                                                          f"timer_delay_s_max={self.config.timer_delay_s_max:g} away")
        m.properties[PROP_DELIVER_MS] = str(due)
        if due <= now:
            return m, None
        if self.timer.pending >= self.config.timer_pending_max:
            return None, status(Code.TOO_MANY_REQUESTS, f"{self.timer.pending} delayed messages waiting "
                                                        f"(timer_pending_max)")
        return park(m, SCHEDULE_TOPIC), None

    @staticmethod
    def _entry(code: int, message: str, message_id: str) -> "spb.SendResultEntry":
        return spb.SendResultEntry(status=status(code, message), message_id=message_id)


def _type_name(t: int) -> str:
    """The message type's name, or its number when the enum has none (a client sent 7..9)."""
    try:
        return pb.MessageType.Name(t)
    except ValueError:
        return f"message type {t}"
