"""apache.rocketmq.v2.MessagingService over a MessageStore (see docs/broker-protocol.md).

Served now: QueryRoute, Heartbeat, Telemetry (settings), SendMessage,
ReceiveMessage / AckMessage / ChangeInvisibleDuration (pop consumption, durable,
dead-letter queue, in order for FIFO consumer groups),
ForwardMessageToDeadLetterQueue, PullMessage / QueryOffset / GetOffset /
UpdateOffset, QueryAssignment (push consumers: "any queue"),
NotifyClientTermination (clients.py: who is alive), auto-renewal of invisible
time for the push consumers (renew.py), TRANSACTION messages and EndTransaction
with orphan checks over Telemetry (transaction.py, telemetry.py), DELAY messages
(timer.py).
Every other RPC answers UNSUPPORTED with a message that says so (never gRPC
UNIMPLEMENTED, never a hang): recall and lite topics come with their issues.

The store is synchronous: puts run on a thread pool so a SYNC_FLUSH wait never
blocks the event loop. Sends go through flow control first (flow.SendGate:
per-connection in-flight bounds, resource alarms, flush backlog); nothing else
does, so consumers drain while producers wait.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from google.protobuf import duration_pb2

from ..config import BrokerConfig
from ..store import MessageStore
from .clients import Clients
from .consume import Consumption
from .convert import SUPPORTED_TYPES, to_store
from .flow import SendGate
from .pop import PopState
from .pull import GroupOffsets, Pull
from .renew import AutoRenew
from .proto import Code, MessageType, pb, sgrpc, spb, status
from .send import DUPLICATE, SendPath, put_code
from .sysmsg import PROP_DELIVER_MS, SCHEDULE_TOPIC, delivery_ms, park
from .telemetry import Sessions, client_id_of
from .timer import Timer
from .transaction import Transactions

log = logging.getLogger("tidemq.broker")

NOT_YET = "not supported yet by tidemq: {what}"


class MessagingService(sgrpc.MessagingServiceServicer):
    def __init__(self, store: MessageStore, config: BrokerConfig, gate: SendGate | None = None) -> None:
        self.store = store
        self.config = config
        self.gate = gate or SendGate(None, store.commit_log.dirty_bytes, config.flush_backlog_high_bytes,
                                     config.send_hold_max_ms / 1000, config.inflight_requests_per_connection_max,
                                     config.inflight_bytes_per_connection_max, store.clock)
        self._puts = ThreadPoolExecutor(config.send_executor_threads, thread_name_prefix="tidemq-put")
        self.closing = asyncio.Event()
        self.pop = PopState(store.fio, store.config.root_dir)
        self.pop.open()
        self.consumption = Consumption(store, config, self.pop)
        self.group_offsets = GroupOffsets(store.fio, store.config.root_dir)
        self.group_offsets.load()
        self.pulls = Pull(store, self.group_offsets, self.consumption.arrivals)
        self.clients = Clients(store.clock, int(config.client_idle_max_s * 1000))
        self.sessions = Sessions(self.clients.stream_opened, self.clients.stream_closed)
        self.renewer = AutoRenew(self.pop, self.clients, config, store.clock, self.consumption.notify_arrival)
        self.timer = Timer(store, self.consumption.notify_arrival)
        self.timer.open()
        # gate, topic checks, dedup window, put: shared with SendRecords (send_records.py)
        self.sends = SendPath(store, config, self.gate, self._puts, self._stored)
        self.transactions = Transactions(store, config, self.sessions, self.sends.put_batch,
                                         lambda r: put_code(r.status, r.reason), self.consumption.notify_arrival)
        self.transactions.open()

    def close(self) -> None:
        self._puts.shutdown(wait=True)
        self.pop.close()
        self.group_offsets.flush()
        self.timer.close()
        self.transactions.close()

    def _stored(self) -> None:
        self.consumption.notify_arrival()          # long-polling receives wake up
        self.timer.wake.set()                      # a delayed message may be due before the next one

    # Routes -----------------------------------------------------------------------------
    def _ensure_topic(self, name: str) -> int:
        return self.sends.ensure_topic(name)

    def _endpoints(self, asked: "pb.Endpoints") -> "pb.Endpoints":
        if asked.addresses:
            return asked              # how the client reached us works for it (the proxy does this)
        ep = self.config.advertised_endpoint or f"{self.config.host}:{self.config.port}"
        host, _, port = ep.rpartition(":")
        return pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host=host, port=int(port))])

    async def QueryRoute(self, request, context):
        topic = request.topic.name
        try:
            n = self._ensure_topic(topic)
        except ValueError as e:
            return spb.QueryRouteResponse(status=status(Code.ILLEGAL_TOPIC, str(e)))
        if n == 0:
            return spb.QueryRouteResponse(status=status(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist"))
        broker = pb.Broker(name=self.config.broker_name, id=0, endpoints=self._endpoints(request.endpoints))
        queues = [pb.MessageQueue(topic=request.topic, id=q, permission=pb.Permission.READ_WRITE, broker=broker,
                                  accept_message_types=[pb.MessageType.NORMAL, pb.MessageType.FIFO,
                                                        pb.MessageType.DELAY, pb.MessageType.TRANSACTION])
                  for q in range(n)]
        return spb.QueryRouteResponse(status=status(Code.OK), message_queues=queues)

    async def QueryAssignment(self, request, context):
        """Push consumers: one assignment with queue id -1, "pop from any queue" (as the RocketMQ proxy
        answers non-FIFO groups); ReceiveMessage pops from every queue whatever id it is given. FIFO
        groups get the same (the proxy gives them one per queue): order is kept by the broker's hold
        on each queue, not by which receive loop asks."""
        topic = request.topic.name
        try:
            n = self._ensure_topic(topic)
        except ValueError as e:
            return spb.QueryAssignmentResponse(status=status(Code.ILLEGAL_TOPIC, str(e)))
        if n == 0:
            return spb.QueryAssignmentResponse(status=status(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist"))
        broker = pb.Broker(name=self.config.broker_name, id=0, endpoints=self._endpoints(request.endpoints))
        mq = pb.MessageQueue(topic=request.topic, id=-1, permission=pb.Permission.READ_WRITE, broker=broker,
                             accept_message_types=[pb.MessageType.NORMAL, pb.MessageType.FIFO])
        return spb.QueryAssignmentResponse(status=status(Code.OK), assignments=[pb.Assignment(message_queue=mq)])

    # Client lifecycle ---------------------------------------------------------------------
    async def Heartbeat(self, request, context):
        self.clients.seen(client_id_of(context))
        return spb.HeartbeatResponse(status=status(Code.OK))

    async def NotifyClientTermination(self, request, context):
        """The client is gone: the messages the broker renews for it are released now (renew.py)."""
        self.clients.terminated(client_id_of(context))
        self.renewer.tick()
        return spb.NotifyClientTerminationResponse(status=status(Code.OK))

    def settings_reply(self, s: "pb.Settings") -> "pb.Settings":
        """The client's settings with the broker's values: what each client reads is in the doc (4.3)."""
        out = pb.Settings()
        out.CopyFrom(s)
        out.metric.CopyFrom(pb.Metric(on=False))
        if s.client_type == pb.ClientType.PRODUCER or s.HasField("publishing"):
            out.backoff_policy.CopyFrom(pb.RetryPolicy(max_attempts=3, exponential_backoff=pb.ExponentialBackoff(
                initial=duration_pb2.Duration(nanos=10_000_000), max=duration_pb2.Duration(seconds=1),
                multiplier=2.0)))
            out.publishing.max_body_size = self.store.config.max_message_size_bytes   # never the client's value
            out.publishing.validate_message_type = True
        else:
            # max_attempts: the proxy sends the group's retryMaxTimes + 1; a FIFO push consumer tries a
            # message that many times locally, then forwards it to the dead-letter queue
            out.backoff_policy.CopyFrom(pb.RetryPolicy(
                max_attempts=self.config.max_delivery_attempts + 1, customized_backoff=pb.CustomizedBackoff(
                    next=[duration_pb2.Duration(seconds=x) for x in
                          (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)])))
            out.subscription.receive_batch_size = 32
            # the push consumer picks ordered consumption (per message group, forward to the DLQ) on this
            out.subscription.fifo = s.subscription.group.name in self.consumption.fifo_groups
            if not s.subscription.long_polling_timeout.seconds:
                out.subscription.long_polling_timeout.seconds = 20
        return out

    async def Telemetry(self, request_iterator, context):
        """Answer every settings command with OK and the merged settings, write orphan checks;
        keep the stream open until the client ends it or the broker stops (then it ends at once,
        not after the grace). See telemetry.py."""
        async for cmd in self.sessions.serve(client_id_of(context), request_iterator, self.closing,
                                             self.settings_reply):
            yield cmd

    # Send ---------------------------------------------------------------------------------
    async def SendMessage(self, request, context):
        msgs = request.messages
        if not msgs:
            return spb.SendMessageResponse(status=status(Code.BAD_REQUEST, "no message in the request"))
        refusal, answer = await self.sends.gated(context, sum(len(m.body) for m in msgs),
                                                 lambda: self._send(msgs, context))
        return answer if refusal is None else self._refuse(msgs, refusal)

    def _refuse(self, msgs, reason: str) -> "spb.SendMessageResponse":
        """Flow control's answer: TOO_MANY_REQUESTS, the one code the official producer does not retry at once."""
        st = status(Code.TOO_MANY_REQUESTS, reason)
        return spb.SendMessageResponse(status=st, entries=[
            spb.SendResultEntry(status=st, message_id=m.system_properties.message_id) for m in msgs])

    async def _send(self, msgs, context):
        entries: list = [None] * len(msgs)
        batch, where = [], []
        halves: set[int] = set()           # request indexes of TRANSACTION messages
        for i, m in enumerate(msgs):
            sp = m.system_properties
            if sp.message_type not in SUPPORTED_TYPES and sp.message_type != MessageType.MESSAGE_TYPE_UNSPECIFIED:
                entries[i] = self._entry(Code.UNSUPPORTED, NOT_YET.format(
                    what=f"{pb.MessageType.Name(sp.message_type)} messages"), sp.message_id)
                continue
            if not m.body:
                entries[i] = self._entry(Code.MESSAGE_BODY_EMPTY, "the body is empty", sp.message_id)
                continue
            n, code, why = self.sends.topic_check(m.topic.name)
            if code != Code.OK:
                entries[i] = self._entry(code, why, sp.message_id)
                continue
            seen = self.sends.seen(m.topic.name, sp.message_id)
            if seen is not None:          # a retry of a send that was stored: answer it again
                entries[i] = spb.SendResultEntry(status=status(Code.OK, DUPLICATE),
                                                 message_id=sp.message_id, offset=seen[0], transaction_id=seen[1])
                continue
            st = to_store(m, n)
            if sp.message_type == MessageType.DELAY or sp.message_type == MessageType.TRANSACTION:
                st, refusal = self._divert(sp, st, context)
                if refusal is not None:
                    entries[i] = spb.SendResultEntry(status=refusal, message_id=sp.message_id)
                    continue
                if sp.message_type == MessageType.TRANSACTION:
                    halves.add(i)
            batch.append(st)
            where.append(i)
        if batch:
            results = await self.sends.put_batch(batch)
            for i, r in zip(where, results):
                code = put_code(r.status, r.reason)
                txn = (r.offset_msg_id or "") if halves and i in halves else ""   # the half message's id
                if code == Code.OK and r.uniq_key:
                    self.sends.remember(msgs[i].topic.name, r.uniq_key, r.queue_offset, txn)
                entries[i] = spb.SendResultEntry(status=status(code, r.error or ""),
                                                 message_id=r.uniq_key or (r.msg_id or ""),
                                                 offset=max(r.queue_offset, 0), transaction_id=txn)
        if batch and any(e.status.code == Code.OK for e in entries):
            self.sends.stored()
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
        half topic (sysmsg.py): (the message to put, None) or (None, the refusal)."""
        if sp.message_type == MessageType.TRANSACTION:
            if self.transactions.undecided >= self.config.transaction_undecided_max:
                return None, status(Code.TOO_MANY_REQUESTS, f"{self.transactions.undecided} transactions undecided "
                                                            f"(transaction_undecided_max)")
            return self.transactions.half(m, client_id_of(context)), None
        if not sp.HasField("delivery_timestamp"):
            return m, None                             # no time: deliver now
        due = delivery_ms(sp.delivery_timestamp)
        now = self.store.clock.now_ms()
        if due - now > self.config.timer_max_delay_s * 1000:
            return None, status(Code.ILLEGAL_DELIVERY_TIME, f"delivery time {due} ms is more than "
                                                          f"timer_max_delay_s={self.config.timer_max_delay_s:g} away")
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

    # Pop consumption (consume.py) ----------------------------------------------------------
    async def ReceiveMessage(self, request, context):
        self.clients.seen(client_id_of(context))
        async for r in self.consumption.receive(request, context):
            yield r

    async def AckMessage(self, request, context):
        return self.consumption.ack(request)

    async def ChangeInvisibleDuration(self, request, context):
        return self.consumption.change_invisible(request)

    # Transactions (transaction.py) -----------------------------------------------------------
    async def EndTransaction(self, request, context):
        return spb.EndTransactionResponse(status=await self.transactions.end(request))

    async def ForwardMessageToDeadLetterQueue(self, request, context):
        return self.consumption.forward_to_dlq(request)

    # Offset-based consumption (pull.py) ----------------------------------------------------
    async def PullMessage(self, request, context):
        async for r in self.pulls.pull(request, context):
            yield r

    async def QueryOffset(self, request, context):
        return self.pulls.query_offset(request)

    async def GetOffset(self, request, context):
        return self.pulls.get_offset(request)

    async def UpdateOffset(self, request, context):
        return self.pulls.update_offset(request)

    async def RecallMessage(self, request, context):
        return spb.RecallMessageResponse(status=status(Code.UNSUPPORTED, NOT_YET.format(what="recall")))

    async def SyncLiteSubscription(self, request, context):
        return spb.SyncLiteSubscriptionResponse(status=status(Code.UNSUPPORTED, NOT_YET.format(what="lite topics")))
