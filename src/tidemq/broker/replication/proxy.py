"""The MessagingService the gRPC server holds in a broker group: every RPC goes to the broker's
current service (``broker.service``), which a change of role replaces (a follower's, serving
reads from state copied from the leader; a leader's, with its background tasks).

While this broker does not lead (a follower, or a leader fenced off its coordinator), the RPCs
that change broker state are refused here with FORBIDDEN and a text naming the leader: pop
consumption (ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue), UpdateOffset and EndTransaction. Sends need nothing here: the
store refuses them (PutReason.NOT_LEADER, answered FORBIDDEN with the same text); on a SYNC leader
whose in-sync set is short of in_sync_replicas_min, a send first waits a while for a member coming
back into it (node.until_in_sync: after a failover or a restart), then is put (or refused:
HA_NOT_AVAILABLE); tidemq.Data's SendRecords frames take the same wait (``in_sync``: the server's
RecordSends calls it). Reads (routes,
PullMessage, QueryOffset, GetOffset, PullRecords) are served by the follower from its copy.
"""

from __future__ import annotations

from ...protocol.stubs import Code, sgrpc, spb, status


async def in_sync(node, context) -> None:
    """A SYNC leader whose in-sync set is short waits a while for a member coming back into it
    before a send is put (node.until_in_sync): at most replication_timeout_ms, and half what is left
    of the client's deadline (time to answer, refused or not). Every send lane's one wait
    (SendMessage here, SendRecords frames: server.py); ``node`` None: not a broker group's."""
    if node is not None and node.in_sync_short():
        wait_s = node.config.replication_timeout_ms / 1000
        left = context.time_remaining()
        await node.until_in_sync(wait_s if left is None else min(wait_s, left / 2))


class ServiceProxy(sgrpc.MessagingServiceServicer):
    def __init__(self, broker) -> None:
        self.broker = broker

    @property
    def _svc(self):
        return self.broker.service

    def _refusal(self):
        """status(FORBIDDEN, who leads) while this broker does not lead, else None."""
        why = self.broker.write_refusal()
        return None if why is None else status(Code.FORBIDDEN, why)

    async def QueryRoute(self, request, context):
        return await self._svc.QueryRoute(request, context)

    async def QueryAssignment(self, request, context):
        return await self._svc.QueryAssignment(request, context)

    async def Heartbeat(self, request, context):
        return await self._svc.Heartbeat(request, context)

    async def NotifyClientTermination(self, request, context):
        return await self._svc.NotifyClientTermination(request, context)

    async def Telemetry(self, request_iterator, context):
        async for cmd in self._svc.Telemetry(request_iterator, context):
            yield cmd

    async def _in_sync(self, context) -> None:
        await in_sync(getattr(self.broker, "replication", None), context)

    async def SendMessage(self, request, context):
        await self._in_sync(context)
        return await self._svc.SendMessage(request, context)

    async def SendMessageBytes(self, raw: bytes, context):
        await self._in_sync(context)
        return await self._svc.SendMessageBytes(raw, context)

    async def ReceiveMessage(self, request, context):
        st = self._refusal()
        if st is not None:
            yield spb.ReceiveMessageResponse(status=st)
            return
        async for r in self._svc.ReceiveMessage(request, context):
            yield r

    async def AckMessage(self, request, context):
        st = self._refusal()
        if st is not None:
            return spb.AckMessageResponse(status=st)
        return await self._svc.AckMessage(request, context)

    async def ChangeInvisibleDuration(self, request, context):
        st = self._refusal()
        if st is not None:
            return spb.ChangeInvisibleDurationResponse(status=st)
        return await self._svc.ChangeInvisibleDuration(request, context)

    async def ForwardMessageToDeadLetterQueue(self, request, context):
        st = self._refusal()
        if st is not None:
            return spb.ForwardMessageToDeadLetterQueueResponse(status=st)
        return await self._svc.ForwardMessageToDeadLetterQueue(request, context)

    async def EndTransaction(self, request, context):
        st = self._refusal()
        if st is not None:
            return spb.EndTransactionResponse(status=st)
        return await self._svc.EndTransaction(request, context)

    async def PullMessage(self, request, context):
        async for r in self._svc.PullMessage(request, context):
            yield r

    async def QueryOffset(self, request, context):
        return await self._svc.QueryOffset(request, context)

    async def GetOffset(self, request, context):
        return await self._svc.GetOffset(request, context)

    async def UpdateOffset(self, request, context):
        st = self._refusal()
        if st is not None:
            return spb.UpdateOffsetResponse(status=st)
        return await self._svc.UpdateOffset(request, context)

    async def RecallMessage(self, request, context):
        return await self._svc.RecallMessage(request, context)

    async def SyncLiteSubscription(self, request, context):
        return await self._svc.SyncLiteSubscription(request, context)
