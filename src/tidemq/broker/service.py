"""apache.rocketmq.v2.MessagingService over a MessageStore (see docs/broker-protocol.md):
builds the parts that serve the RPCs and hands each RPC to its part.

Served now: QueryRoute, QueryAssignment (push consumers: "any queue"), Heartbeat,
Telemetry (settings; sessions/telemetry.py), NotifyClientTermination (sessions/clients.py:
who is alive); SendMessage (produce/send_message.py; DELAY messages through
deferred/timer.py, TRANSACTION messages and EndTransaction with orphan checks over
Telemetry through deferred/transactions.py); ReceiveMessage / AckMessage /
ChangeInvisibleDuration / ForwardMessageToDeadLetterQueue (pop consumption, durable,
dead-letter queue, in order for FIFO consumer groups: consume/receive.py; auto-renewal
of invisible time for the push consumers: consume/renew.py); PullMessage / QueryOffset /
GetOffset / UpdateOffset (consume/pull.py); RecallMessage (deferred/recall.py);
SyncLiteSubscription (consume/lite.py: lite consumers; consume/select.py: what a lite consumer
is handed, and priority messages first). Nothing answers gRPC UNIMPLEMENTED.

The store is synchronous: puts run on a thread pool so a SYNC_FLUSH wait never
blocks the event loop. Sends go through flow control first (protection/flow.SendGate:
per-connection in-flight bounds, resource alarms, flush backlog); nothing else
does, so consumers drain while producers wait. The broker's own state lives under
``<root>/broker/`` (state/layout.py); state of an older layout is moved there first.
"""

from __future__ import annotations

import asyncio

from google.protobuf import duration_pb2

from ..config import BrokerConfig
from ..protocol.stubs import Code, pb, sgrpc, spb, status
from ..record.codec import valid_topic
from ..store import MessageStore
from .consume.group_offsets import GroupOffsets
from ..store.consume_queue import UNIT
from .consume.groups import GroupTable, retry_policy_pb
from .consume.lite import LiteSubscriptions
from .consume.pop_state import PopState
from .consume.positions import consumed_positions
from .consume.pull import Pull
from .consume.receive import Consumption
from .consume.renew import AutoRenew
from .deferred import recall
from .deferred.timer import Timer
from .deferred.transactions import Transactions
from .observe.outcomes import Outcomes
from .produce.send_message import MessageSends
from .produce.send_path import SendPath, lite_topic_problem, put_code
from .protection.access import IDENTITY, may_pub_now, vet_settings
from .protection.flow import SendGate
from .puts import StorePuts
from .sessions.clients import Clients
from .sessions.telemetry import Sessions, client_id_of
from .state.layout import migrate, state_dir
from .topic_names import HALF_TOPIC, SCHEDULE_TOPIC


ALL_TYPES = (pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION,
             pb.MessageType.LITE, pb.MessageType.PRIORITY)


def accepted_types(kind: str | None) -> list[int]:
    """A route's accept_message_types for a topic of message type ``kind`` (store/topics.MessageKind;
    the Python producer checks a send against them before it sends, the send path after)."""
    if kind is None or kind == "mixed":
        return list(ALL_TYPES)
    return [getattr(pb.MessageType, kind.upper())]


class MessagingService(sgrpc.MessagingServiceServicer):
    def __init__(self, store: MessageStore, config: BrokerConfig, gate: SendGate | None = None,
                 leading: bool = True, group=None, replaces: "MessagingService | None" = None, acl=None) -> None:
        """``leading``: False for a follower's service (reads only, from state copied from the leader:
        no topic is created here); ``group``: the broker group (replication/node.py) routes name;
        ``replaces``: the service this one follows (a change of role): its counts of messages put
        and got go on here (the metrics are the process's, not the role's); ``acl``: the broker's
        users and policies (protection/acl.py), which the send path checks each topic's pub against."""
        self.store = store
        self.config = config
        self.leading = leading
        self.group = group
        self.gate = gate or SendGate(None, store.commit_log.dirty_bytes, config.flush_backlog_high_bytes,
                                     config.send_hold_ms_max / 1000, config.inflight_requests_per_connection_max,
                                     config.inflight_bytes_per_connection_max, store.clock)
        self.puts = StorePuts(store, config.dispatch_delay_ms, leading)      # where puts run (puts.py)
        self.closing = asyncio.Event()
        migrate(store.fio, store.config.root_dir)       # state of the layout before <root>/broker/
        self.state_dir = state_dir(store.config.root_dir)
        self.pop = PopState(store.fio, self.state_dir, config.state_journal_compact_bytes)
        self.pop.open()
        # messages handed to consumers, by topic and status (the metrics)
        self.got = replaces.got if replaces is not None else Outcomes()
        # consumer-group settings (retry policy, retry_max, orderly, consume enable), copied to followers
        self.groups = GroupTable(store.fio, self.state_dir, config.delivery_attempts_max,
                                 config.fifo_consumer_groups).load()
        self.consumption = Consumption(store, config, self.pop, got=self.got, puts=self.puts, groups=self.groups)
        self.pop.unit_at = lambda t, q, o: unit_at(store, t, q, o)
        if leading:
            self.consumption.cursors_where_reused()       # none counting records a failure took (consume/reused.py)
            self.consumption.cursors_within_queues()      # none past what this log holds (consume/receive.py)
        self.group_offsets = GroupOffsets(store.fio, self.state_dir, lambda t, q, o: unit_at(store, t, q, o))
        self.group_offsets.load()
        if leading:                             # none past what this log holds (group_offsets.py)
            self.group_offsets.cut_where_reused()
            self.group_offsets.within_queues(
                lambda t, q: self.store.max_offset(t, q) if 0 <= q < self.store.queue_count(t) else None)
        # the store's cleanup learns what groups consumed (space policy, losses per group)
        store.set_consumer_positions(lambda topic: consumed_positions(self.group_offsets, self.pop, topic))
        self.pulls = Pull(store, self.group_offsets, self.consumption.arrivals, config.pull_message_bytes_max,
                          self.got, config.long_polling_s_max, groups=self.groups)
        self.clients = Clients(store.clock, int(config.client_idle_s_max * 1000), config.clients_max,
                               config.clients_per_user_max)
        self.sessions = Sessions(self.clients.stream_opened, self.clients.stream_closed,
                                 config.telemetry_outbox_max, config.telemetry_known_clients_max)
        self.renewer = AutoRenew(self.pop, self.clients, config, store.clock, self.consumption.notify_arrival)
        self.timer = Timer(store, self.consumption.notify_arrival, self.state_dir, config.timer_round_messages_max)
        self.timer.open()
        self.transactions = Transactions(store, config, self.sessions,
                                         lambda msgs: self.puts.run(store.put_batch, msgs),
                                         lambda r: put_code(r.status, r.reason), self.consumption.notify_arrival,
                                         self.state_dir, config.transaction_scan_max,
                                         config.transaction_checks_per_round_max, config.state_journal_compact_bytes)
        self.transactions.open()
        # the one way a send goes, whatever its lane (produce/send_path.py)
        self.sends = SendPath(store, config, self.gate, self.puts, self._stored, self.timer, self.transactions)
        self.acl = acl              # users and policies (copied to followers with the rest of the state)
        self.siblings = None        # a member of `serve --processes N` (multi/siblings.py): the cluster's routes
        self.sends.acl = acl if acl is not None and acl.enabled else None
        self.consumption.acl = self.pulls.acl = self.sends.acl     # long polls checked again when they end
        if self.sends.acl is not None:                              # orphan checks: to who may pub now
            self.sessions.may_pub = lambda who, topic: may_pub_now(acl, who, topic)
        if replaces is not None:
            self.sends.outcomes = replaces.sends.outcomes
        self.sends.auto_create = self.sends.auto_create and leading
        if group is not None and leading:
            self.sends.spread = group.spread
        self.send_messages = MessageSends(self.sends)
        # lite topics (consume/lite.py) and priority messages (consume/select.py)
        if replaces is not None:                  # a change of role: the clients' subscriptions stay
            self.lite = replaces.lite
            self.consumption.priority_topics |= replaces.consumption.priority_topics
        else:
            self.lite = LiteSubscriptions(config.lite_subscriptions_per_client_max,
                                          lambda n: lite_topic_problem(n, config.lite_topic_bytes_max),
                                          lambda cid: self.clients.alive(cid, store.clock.now_ms()),
                                          per_user_max=config.lite_subscriptions_per_user_max)
        self.consumption.lite = self.lite
        # whether a client is alive: asked of this service's table, which hears the clients from now on
        # (not the replaced one's, which hears nothing more: its clients would all count as gone)
        self.lite.alive = lambda cid, clients=self.clients: clients.alive(cid, store.clock.now_ms())
        self.lite.on_hold = self.clients.hold          # a lite consumer is never forgotten by the client table
        for cid in self.lite.holds():
            self.clients.hold(cid, True)
        self.sends.on_priority = self.consumption.priority_topics.add

    def close(self) -> None:
        self.puts.close()
        self.pop.close()
        self.group_offsets.flush()
        self.timer.close()
        self.transactions.close()

    def after_log_failure(self, failure) -> None:
        """A leading service after a failure of the commit log (store/log_failure.py; the broker's
        listener, server.py, on the loop): the queues were cut back to its durable end, the next messages
        take the offsets from there, and the records after it are gone. Pop cursors and deliveries,
        pull groups' committed offsets, the timer and the transactions past the cut are brought back to
        it, and a delayed message's move or a commit whose copy was taken is made again."""
        ends = failure.queue_ends
        if ends:
            self.consumption.cursors_within_queues(ends)
            self.group_offsets.within_queues(lambda t, q: ends.get((t, q)))
        self.timer.cut_back(ends.get((SCHEDULE_TOPIC, 0)), failure.covers)
        self.transactions.cut_back(ends.get((HALF_TOPIC, 0)), failure.covers)

    def discard(self) -> None:
        """A follower's service goes: its files are closed, nothing is written (its state is the
        leader's copy, which the next service opens)."""
        self.puts.close()
        self.pop.journal.abandon()
        self.transactions.journal.abandon()

    def _stored(self, parked: bool = False) -> None:
        self.consumption.notify_arrival()          # long-polling receives wake up
        if parked:                                 # a delayed message may be due before the next one
            self.timer.wake.set()                  # (woken per send, its round cost every send ~0.1 ms)

    # Routes ----------------------------------------------------------------------------------
    def _ensure_topic(self, name: str) -> int:
        return self.sends.ensure_topic(name)

    def _endpoints(self, asked: "pb.Endpoints") -> "pb.Endpoints":
        if asked.addresses:
            return asked              # how the client reached us works for it (the proxy does this)
        ep = self.config.advertised_endpoint or f"{self.config.host}:{self.config.port}"
        host, _, port = ep.rpartition(":")
        return pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host=host, port=int(port))])

    async def _group_view(self, context) -> tuple[dict | None, object]:
        """A broker group's view with its members as the coordinator holds them now (node.fresh_view),
        waited for what is left of the client's deadline (routes.view_wait_s): (view, None), or (None,
        the INCOMPLETE status) when they could not be read in time. (None, None): not a broker group.
        What QueryRoute and QueryAssignment answer from."""
        if self.group is None:
            return None, None
        from .replication.routes import INCOMPLETE, view_wait_s
        remaining = getattr(context, "time_remaining", None)
        wait_s = view_wait_s(remaining() if remaining is not None else None)
        view = await self.group.fresh_view(wait_s)
        if view.get("complete", True):
            return view, None
        return None, status(INCOMPLETE, f"broker group {view.get('group')!r}: its members could not be read from "
                                        f"the coordinator within {wait_s:.3g} s: ask again, or ask another member")

    async def QueryRoute(self, request, context):
        topic = request.topic.name
        view, incomplete = await self._group_view(context)
        if incomplete is not None:
            return spb.QueryRouteResponse(status=incomplete)
        spread = (self.group.cluster_route(topic) if self.group is not None
                  else self.siblings.route(topic) if self.siblings is not None else None)
        if spread:
            from .replication.routes import group_queues
            queues = [mq for view, qids in spread
                      for mq in group_queues(request.topic, 0, view, self.endpoint, queue_ids=qids)]
            queues.sort(key=lambda mq: (mq.id, mq.broker.id))
            return spb.QueryRouteResponse(status=status(Code.OK), message_queues=queues)
        try:
            n = self._ensure_topic(topic)
        except ValueError as e:
            return spb.QueryRouteResponse(status=status(Code.ILLEGAL_TOPIC, str(e)))
        if n == 0:
            return spb.QueryRouteResponse(status=status(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist"))
        if self.group is not None:
            from .replication.routes import group_queues
            queues = group_queues(request.topic, n, view, self.endpoint)
            return spb.QueryRouteResponse(status=status(Code.OK), message_queues=queues)
        broker = pb.Broker(name=self.config.broker_name, id=0, endpoints=self._endpoints(request.endpoints))
        accept = accepted_types(self.store.message_type(topic))
        queues = [pb.MessageQueue(topic=request.topic, id=q, permission=pb.Permission.READ_WRITE, broker=broker,
                                  accept_message_types=accept)
                  for q in range(n)]
        return spb.QueryRouteResponse(status=status(Code.OK), message_queues=queues)

    @property
    def endpoint(self) -> str:
        return self.config.advertised_endpoint or f"{self.config.host}:{self.config.port}"

    async def QueryAssignment(self, request, context):
        """Push consumers: one assignment with queue id -1, "pop from any queue" (as the RocketMQ proxy
        answers non-FIFO groups); ReceiveMessage pops from every queue whatever id it is given. FIFO
        groups get the same (the proxy gives them one per queue): order is kept by the broker's hold
        on each queue, not by which receive loop asks. In a broker group the queue's endpoints are
        its members' leader ports as the coordinator holds them when asked (as QueryRoute's); a topic
        spread over several groups gets one assignment per group holding queues of it."""
        topic = request.topic.name
        try:
            n = self._ensure_topic(topic)
        except ValueError as e:
            return spb.QueryAssignmentResponse(status=status(Code.ILLEGAL_TOPIC, str(e)))
        if n == 0:
            return spb.QueryAssignmentResponse(status=status(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist"))
        view, incomplete = await self._group_view(context)
        if incomplete is not None:
            return spb.QueryAssignmentResponse(status=incomplete)
        spread = (self.group.cluster_route(topic) if self.group is not None
                  else self.siblings.route(topic) if self.siblings is not None else None)
        if spread:                  # one "any queue" assignment per group (member) holding queues of the topic
            from .replication.routes import leader_broker
            return spb.QueryAssignmentResponse(status=status(Code.OK), assignments=[
                pb.Assignment(message_queue=pb.MessageQueue(
                    topic=request.topic, id=-1, permission=pb.Permission.READ_WRITE,
                    broker=leader_broker(v, self.endpoint),
                    accept_message_types=[pb.MessageType.NORMAL, pb.MessageType.FIFO]))
                for v, _ in spread])
        if view is not None:
            from .replication.routes import leader_broker
            broker = leader_broker(view, self.endpoint)
        else:
            broker = pb.Broker(name=self.config.broker_name, id=0, endpoints=self._endpoints(request.endpoints))
        mq = pb.MessageQueue(topic=request.topic, id=-1, permission=pb.Permission.READ_WRITE, broker=broker,
                             accept_message_types=[pb.MessageType.NORMAL, pb.MessageType.FIFO])
        return spb.QueryAssignmentResponse(status=status(Code.OK), assignments=[pb.Assignment(message_queue=mq)])

    # Client lifecycle ------------------------------------------------------------------------
    async def Heartbeat(self, request, context):
        self.clients.seen(client_id_of(context))
        return spb.HeartbeatResponse(status=status(Code.OK))

    async def NotifyClientTermination(self, request, context):
        """The client is gone: the messages the broker renews for it are released now (consume/renew.py)."""
        self.clients.terminated(client_id_of(context))
        self.lite.forget(client_id_of(context))
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
            out.publishing.max_body_size = self.store.config.message_body_bytes_max   # never the client's value
            out.publishing.validate_message_type = True
        else:
            # the group's own settings (consume/groups.py). max_attempts: retry_max + 1, as the proxy sends
            # (retryMaxTimes + 1), and the broker dead-letters after that many deliveries; a FIFO push
            # consumer tries a message that many times locally, then forwards it to the dead-letter queue
            gs = self.groups.settings(s.subscription.group.name)
            out.backoff_policy.CopyFrom(retry_policy_pb(gs))
            out.subscription.receive_batch_size = 32
            # the push consumer picks ordered consumption (per message group, forward to the DLQ) on this
            out.subscription.fifo = gs.orderly
            if not s.subscription.long_polling_timeout.seconds:
                out.subscription.long_polling_timeout.seconds = 20
            if s.client_type in (pb.ClientType.LITE_SIMPLE_CONSUMER, pb.ClientType.LITE_PUSH_CONSUMER):
                out.subscription.lite_subscription_quota = self.config.lite_subscriptions_per_client_max
                out.subscription.max_lite_topic_size = self.config.lite_topic_bytes_max
        return out

    async def Telemetry(self, request_iterator, context):
        """Answer every settings command with OK and the merged settings, write orphan checks;
        keep the stream open until the client ends it or the broker stops (then it ends at once,
        not after the grace). See sessions/telemetry.py. With authentication on, what a settings
        command may make the broker do is its user's to ask (protection/access.py vet_settings)."""
        cid = client_id_of(context)
        who, acl = IDENTITY.get(), self.acl
        vet = None
        if who is not None and acl is not None and acl.enabled:
            def vet(settings: "pb.Settings") -> tuple:
                return vet_settings(acl, who.user, who.peer, settings)

        def reply(settings: "pb.Settings") -> "pb.Settings":
            if settings.client_type in (pb.ClientType.LITE_SIMPLE_CONSUMER, pb.ClientType.LITE_PUSH_CONSUMER):
                # a lite consumer: its group takes the bind topic as lite topics from now on (none yet)
                self.lite.declare(settings.subscription.group.name,
                                  [e.topic.name for e in settings.subscription.subscriptions], cid)
            return self.settings_reply(settings)

        async for cmd in self.sessions.serve(cid, request_iterator, self.closing, reply, vet):
            yield cmd

    # Send (produce/) -------------------------------------------------------------------------
    async def SendMessage(self, request, context):
        return await self.send_messages.send(request, context)

    async def SendMessageBytes(self, raw: bytes, context):
        """SendMessage given the request's bytes (produce/send_message.py, send_message_lane)."""
        return await self.send_messages.send_bytes(raw, context)

    # Pop consumption (consume/receive.py) ----------------------------------------------------
    async def ReceiveMessage(self, request, context):
        self.clients.seen(client_id_of(context))
        async for r in self.consumption.receive(request, context):
            yield r

    async def AckMessage(self, request, context):
        return self.consumption.ack(request)

    async def ChangeInvisibleDuration(self, request, context):
        return self.consumption.change_invisible(request)

    async def ForwardMessageToDeadLetterQueue(self, request, context):
        return await self.consumption.forward_to_dlq(request)

    # Transactions (deferred/transactions.py) -------------------------------------------------
    async def EndTransaction(self, request, context):
        return spb.EndTransactionResponse(status=await self.transactions.end(request))

    # Offset-based consumption (consume/pull.py) ------------------------------------------------
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
        """Withdraw a DELAY message before its time (deferred/recall.py)."""
        code, text, mid = recall.answer(request, self.timer, self.store, self.config.broker_name, self.leading)
        return spb.RecallMessageResponse(status=status(code, text), message_id=mid)

    async def SyncLiteSubscription(self, request, context):
        """A lite consumer's lite topics (consume/lite.py); the bind topic must exist."""
        topic, group = request.topic.name, request.group.name
        if not group or not valid_topic(group):
            return spb.SyncLiteSubscriptionResponse(status=status(Code.ILLEGAL_CONSUMER_GROUP, f"bad group {group!r}"))
        if not valid_topic(topic) or self.store.queue_count(topic) == 0:
            return spb.SyncLiteSubscriptionResponse(status=status(Code.TOPIC_NOT_FOUND,
                                                                  f"topic {topic!r} does not exist"))
        meta = dict(context.invocation_metadata() or ())
        code, text = self.lite.sync(group, topic, client_id_of(context), request.action, list(request.lite_topic_set),
                                    python_quirk=meta.get("x-mq-language", "").upper() == "PYTHON")
        if code == Code.OK:
            self.consumption.notify_arrival()        # waiting receives of the group look again
        return spb.SyncLiteSubscriptionResponse(status=status(code, text))


def unit_at(store: MessageStore, topic: str, qid: int, offset: int) -> int | None:
    """The commit-log offset of the record ``topic``'s queue ``qid`` holds at ``offset`` (None: none;
    -1: cleaned away, before every record the queue keeps: consume/reused.py)."""
    cq = store.queues.get(topic, qid)
    if cq is None or offset >= cq.max_offset:
        return None
    if offset < cq.min_offset:
        return -1
    raw = cq.read(offset, 1)
    return UNIT.unpack(raw)[0] if len(raw) == UNIT.size else None
