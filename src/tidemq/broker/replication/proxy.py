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

While a change of role installs this member's new services (node.installing: a member taking the
lead, elected, its leader's service being built; a leader stepping down, its follower's), every RPC
waits for them (``until_installed``) for what is left of its deadline (less INSTALL_WAIT_MARGIN_S;
INSTALL_WAIT_S without one), then is served by them; one that takes longer is answered
UNAVAILABLE, which the clients retry (as the leader port answers an election). Never the service
being replaced: a follower's would answer TOPIC_NOT_FOUND for a topic the leader creates (a
producer's start fails on it), a leader's going would create a topic in a store that now follows.
The same TOPIC_NOT_FOUND from a member that knows no leader (an election under way, and the moment
after it is recorded before the winner's lead() starts installing) is answered UNAVAILABLE too
(``_no_leader_yet``: routes, assignments, sends).
"""

from __future__ import annotations

import grpc

from ...protocol.stubs import Code, sgrpc, spb, status

INSTALL_WAIT_S = 30.0            # a call with no deadline waits this long for a role's services being installed
INSTALL_WAIT_MARGIN_S = 0.25     # ... one with a deadline, what is left of it less this (the answer's way back)


async def until_installed(node, context) -> None:
    """Return once ``node`` (None: not a broker group's) installs no role's services: at once when it
    does not, else when they are in place; UNAVAILABLE (context.abort) when that takes longer than
    the call may wait."""
    if node is None or node.installing is None:
        return
    left = context.time_remaining() if context is not None else None
    wait_s = INSTALL_WAIT_S if left is None else min(INSTALL_WAIT_S, max(0.0, left - INSTALL_WAIT_MARGIN_S))
    if not await node.until_installed(wait_s):
        await context.abort(grpc.StatusCode.UNAVAILABLE, f"broker group {node.group!r}: {node.member} is changing "
                                                         f"role (its new services are not in place yet); try again")


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
        self.node = getattr(broker, "replication", None)     # (built before the server that holds this)

    async def _serving(self, context):
        """The current service, once no role's services are being installed (``until_installed``)."""
        node = self.node
        if node is not None and node.installing is not None:
            await until_installed(node, context)
        return self.broker.service

    async def _no_leader_yet(self, code: int, context) -> None:
        """A member that does not lead and knows no leader -- an election under way (a member with a
        coordinator follows no one until it is elected or told who leads), including the moment after
        the election is recorded (routes name it) before its lead() installs the leader's service --
        answers UNAVAILABLE (retried, as ``until_installed``'s) instead of its follower's TOPIC_NOT_FOUND
        for a topic the leader would create (an official producer's start fails on that). Called only
        while ``_leaderless()``: its callers ask that first (cheap) with no await between, and the role
        changes on this loop only (node.py), so it holds here."""
        node = self.node
        if code == Code.TOPIC_NOT_FOUND:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"broker group {node.group!r}: no leader yet (an "
                                                             f"election is under way); try again")

    def _leaderless(self) -> bool:
        node = self.node
        return node is not None and not node.leading and not node.leader_endpoint

    def _refusal(self):
        """status(FORBIDDEN, who leads) while this broker does not lead, else None."""
        why = self.broker.write_refusal()
        return None if why is None else status(Code.FORBIDDEN, why)

    async def QueryRoute(self, request, context):
        r = await (await self._serving(context)).QueryRoute(request, context)
        if self._leaderless():
            await self._no_leader_yet(r.status.code, context)
        return r

    async def QueryAssignment(self, request, context):
        r = await (await self._serving(context)).QueryAssignment(request, context)
        if self._leaderless():
            await self._no_leader_yet(r.status.code, context)
        return r

    async def Heartbeat(self, request, context):
        return await (await self._serving(context)).Heartbeat(request, context)

    async def NotifyClientTermination(self, request, context):
        return await (await self._serving(context)).NotifyClientTermination(request, context)

    async def Telemetry(self, request_iterator, context):
        async for cmd in (await self._serving(context)).Telemetry(request_iterator, context):
            yield cmd

    async def _in_sync(self, context) -> None:
        await in_sync(self.node, context)

    # (the in-sync wait first: a change of role that starts while it waits is then waited for too)
    async def SendMessage(self, request, context):
        await self._in_sync(context)
        r = await (await self._serving(context)).SendMessage(request, context)
        if self._leaderless():
            await self._no_leader_yet(r.status.code, context)
        return r

    async def SendMessageBytes(self, raw: bytes, context):
        await in_sync(self.node, context)
        r = await (await self._serving(context)).SendMessageBytes(raw, context)
        if self._leaderless():              # (rare: the answer's bytes decoded only then)
            got = r if isinstance(r, spb.SendMessageResponse) else spb.SendMessageResponse.FromString(bytes(r))
            await self._no_leader_yet(got.status.code, context)
        return r

    async def ReceiveMessage(self, request, context):
        svc = await self._serving(context)
        st = self._refusal()
        if st is not None:
            yield spb.ReceiveMessageResponse(status=st)
            return
        async for r in svc.ReceiveMessage(request, context):
            yield r

    async def AckMessage(self, request, context):
        svc = await self._serving(context)
        st = self._refusal()
        if st is not None:
            return spb.AckMessageResponse(status=st)
        return await svc.AckMessage(request, context)

    async def ChangeInvisibleDuration(self, request, context):
        svc = await self._serving(context)
        st = self._refusal()
        if st is not None:
            return spb.ChangeInvisibleDurationResponse(status=st)
        return await svc.ChangeInvisibleDuration(request, context)

    async def ForwardMessageToDeadLetterQueue(self, request, context):
        svc = await self._serving(context)
        st = self._refusal()
        if st is not None:
            return spb.ForwardMessageToDeadLetterQueueResponse(status=st)
        return await svc.ForwardMessageToDeadLetterQueue(request, context)

    async def EndTransaction(self, request, context):
        svc = await self._serving(context)
        st = self._refusal()
        if st is not None:
            return spb.EndTransactionResponse(status=st)
        return await svc.EndTransaction(request, context)

    async def PullMessage(self, request, context):
        async for r in (await self._serving(context)).PullMessage(request, context):
            yield r

    async def QueryOffset(self, request, context):
        return await (await self._serving(context)).QueryOffset(request, context)

    async def GetOffset(self, request, context):
        return await (await self._serving(context)).GetOffset(request, context)

    async def UpdateOffset(self, request, context):
        svc = await self._serving(context)
        st = self._refusal()
        if st is not None:
            return spb.UpdateOffsetResponse(status=st)
        return await svc.UpdateOffset(request, context)

    async def RecallMessage(self, request, context):
        return await (await self._serving(context)).RecallMessage(request, context)

    async def SyncLiteSubscription(self, request, context):
        return await (await self._serving(context)).SyncLiteSubscription(request, context)
