"""The leader's side of ``tidemq.Replication`` (protocol/replication.py): one stream per
follower, sending the log from the offset the follower asks for, as fast as the follower takes
it (gRPC's flow control), then each new append as it happens; reading its confirmations into
the ReplicaAcks (acks.py) that SYNC puts wait on. ``Epochs`` and ``State`` answer the follower's
divergence check and its copy of the broker state.

Only a leader serves a stream: a follower (or a fenced leader) answers REFUSE with who leads, as
it does to a follower that knows a newer epoch than its own (then it is not the leader any more:
the coordinator has moved on).
"""

from __future__ import annotations

import asyncio
import logging

import grpc

from ...protocol import replication as rp
from ...protocol.data import FrameError
from . import state

log = logging.getLogger("tidemq.broker")

HEARTBEAT_S = 0.5          # a frame at least this often while there is nothing new (the follower's lag)


class ReplicationServer:
    def __init__(self, node) -> None:
        """``node``: the broker's ReplicationNode (role.py): its role, store, acks, service."""
        self.node = node

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(rp.SERVICE, {
            rp.STREAM: grpc.stream_stream_rpc_method_handler(self.stream),
            rp.EPOCHS: grpc.unary_unary_rpc_method_handler(self.epochs),
            rp.STATE: grpc.unary_unary_rpc_method_handler(self.state)})

    def _refuse(self, text: str) -> bytes:
        return rp.encode(rp.REFUSE, self.node.epoch, payload=text.encode())

    async def stream(self, request_iterator, context):
        node = self.node
        it = request_iterator.__aiter__()
        try:
            first = rp.decode(await it.__anext__())
            hello = first.json()
            member = str(hello["member"])
        except (StopAsyncIteration, FrameError, KeyError) as e:
            yield self._refuse(f"the stream must begin with a HELLO frame ({e!r})")
            return
        why = node.serving_refusal(str(hello.get("group", "")), first.epoch)
        if why is None and first.offset > node.store.replica.end:
            why = (f"your log ends at {first.offset}, after mine ({node.store.replica.end}): compare epochs "
                   f"(Epochs) and cut what diverged first")
        if why is not None:
            yield self._refuse(why)
            return
        epoch, store, acks = node.epoch, node.store, node.acks
        follower = acks.connect(member, str(hello.get("endpoint", "")), first.offset, hello)
        node.member_seen(member, hello)
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        remove = acks.add_waker(lambda: loop.call_soon_threadsafe(wake.set))
        reader = asyncio.create_task(self._read_acks(it, member))
        offset = first.offset
        frame_max = node.config.replication_frame_bytes_max
        log.info("replication: follower %s connected from offset %d", member, offset)
        try:
            while node.leading and node.epoch == epoch and not reader.done():
                wake.clear()
                off, data = store.replica.read(offset, frame_max)
                if data:
                    yield rp.encode(rp.DATA, epoch, off, store.replica.end, data)
                    offset = off + len(data)
                    follower.frames_sent += 1
                    follower.bytes_sent += len(data)
                    continue
                offset = off
                try:
                    await asyncio.wait_for(wake.wait(), HEARTBEAT_S)
                except asyncio.TimeoutError:
                    yield rp.encode(rp.HEARTBEAT, epoch, offset, store.replica.end)
            if not reader.done():
                yield self._refuse(node.serving_refusal("", 0) or "the leader's epoch changed")
        finally:
            remove()
            reader.cancel()
            acks.disconnect(member)
            log.info("replication: follower %s disconnected", member)

    async def _read_acks(self, it, member: str) -> None:
        acks = self.node.acks
        try:
            async for raw in it:
                fr = rp.decode(raw)
                if fr.kind == rp.ACK:
                    acks.confirm(member, fr.offset)
        except FrameError as e:
            log.warning("replication: follower %s sent a bad frame (%s): stream dropped", member, e)

    async def epochs(self, request: bytes, context) -> bytes:
        node = self.node
        s = node.store
        return rp.dumps({"leader": node.leading and not node.fenced, "epoch": node.epoch,
                         "epochs": s.epochs.snapshot(), "min": s.commitlog_min_offset, "max": s.replica.end,
                         "group": node.group, "member": node.member, "view": node.view()})

    async def state(self, request: bytes, context) -> bytes:
        node = self.node
        if not node.leading or node.service is None:
            return rp.dumps({"ok": False, "error": node.serving_refusal("", 0) or "not ready"})
        return rp.dumps({"ok": True, "state": state.snapshot(node.store, node.service)})
