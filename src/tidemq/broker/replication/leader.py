"""The leader's side of ``tidemq.Replication`` (protocol/replication.py): one stream per follower,
sending the log from the offset the follower asks for, as fast as the follower takes it (the
transport's flow control), then each new append as it happens; reading its confirmations into
the ReplicaAcks (acks.py) that SYNC puts wait on and the in-sync set is kept by. ``epochs()`` and
``state_frames()`` answer the follower's divergence check and its copy of the broker state.

Every frame carries the high watermark (acks.hw); when it moves while there is nothing new to
send, a HEARTBEAT says so within ``HW_HEARTBEAT_DELAY_S`` (followers serve reads up to it) unless
a DATA frame carries it first: under a steady load the next append comes sooner, and a HEARTBEAT
after each confirmation cost both members a frame (and the follower's ACK of it) per write. A
stretch of the log that is not whole records (damaged on this disk; codec.next_valid_record finds
where records go on, as recovery does) goes as a RAW frame: the follower writes it as it is and
never reads it as records, and replication goes on after it.

Only a leader serves a stream: a follower (or a fenced leader) answers REFUSE with who leads, as
it does to a follower that knows a newer epoch than its own (then it is not the leader any more:
the coordinator has moved on).

The core is transport-free (``serve_stream(requests, send)``); ``handler()`` binds it to gRPC
(frames written with ``context.write``, so a follower that went away ends the stream quietly
instead of an error from inside gRPC).
"""

from __future__ import annotations

import asyncio
import logging
from typing import AsyncIterator, Awaitable, Callable

import grpc

from ...protocol import replication as rp
from ...protocol.data import FrameError
from . import state

log = logging.getLogger("tidemq.broker")

HEARTBEAT_S = 0.5          # a frame at least this often while there is nothing new (the follower's lag)
HW_HEARTBEAT_DELAY_S = 0.01    # a moved high watermark waits at most this for a DATA frame to carry it
HW_DUE_SLACK_S = 1e-4          # ... and goes once less than this is left (a float's rounding never waits again)


class ReplicationServer:
    def __init__(self, node) -> None:
        """``node``: the broker's ReplicationNode (node.py): its role, store, acks, service."""
        self.node = node
        self.raw_frames = 0            # RAW frames sent: damaged stretches of this log

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(rp.SERVICE, {
            rp.STREAM: grpc.stream_stream_rpc_method_handler(self._grpc_stream),
            rp.EPOCHS: grpc.unary_unary_rpc_method_handler(self._grpc_epochs),
            rp.STATE: grpc.unary_stream_rpc_method_handler(self._grpc_state)})

    async def _grpc_stream(self, request_iterator, context) -> None:
        try:
            await self.serve_stream(request_iterator, context.write)
        except (grpc.RpcError, asyncio.InvalidStateError, RuntimeError) as e:
            log.debug("replication: a follower's stream ended: %r", e)
        except Exception as e:  # noqa: BLE001 - gRPC's own send errors (the follower is gone): no traceback
            if type(e).__name__ not in ("ExecuteBatchError", "UsageError", "InternalError"):
                raise
            log.debug("replication: a follower's stream ended: %r", e)

    async def _grpc_epochs(self, request: bytes, context) -> bytes:
        return await self.epochs()

    async def _grpc_state(self, request: bytes, context):
        async for fr in self.state_frames(request):
            yield fr

    def _refuse(self, text: str) -> bytes:
        return rp.encode(rp.REFUSE, self.node.epoch, payload=text.encode())

    @property
    def heartbeat_s(self) -> float:
        return min(HEARTBEAT_S, self.node.config.replica_lag_time_max_ms / 4000)

    async def serve_stream(self, requests: AsyncIterator[bytes], send: Callable[[bytes], Awaitable[None]]) -> None:
        """Serve one follower's stream: ``requests`` its frames, ``send`` ours to it."""
        node = self.node
        it = requests.__aiter__()
        try:
            first = rp.decode(await it.__anext__())
            hello = first.json()
            member = str(hello["member"])
        except (StopAsyncIteration, FrameError, KeyError) as e:
            await send(self._refuse(f"the stream must begin with a HELLO frame ({e!r})"))
            return
        why = node.serving_refusal(str(hello.get("group", "")), first.epoch)
        if why is None and first.offset > node.store.replica.end:
            why = (f"your log ends at {first.offset}, after mine ({node.store.replica.end}): compare epochs "
                   f"(Epochs) and cut what diverged first")
        if why is not None:
            await send(self._refuse(why))
            return
        epoch, store, acks = node.epoch, node.store, node.acks
        follower = acks.connect(member, str(hello.get("endpoint", "")), first.offset, hello)
        conn = follower.conn
        node.member_seen(member, hello)
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        remove = acks.add_waker(lambda: loop.call_soon_threadsafe(wake.set))
        reader = asyncio.create_task(self._read_acks(it, member, conn))
        offset = first.offset
        frame_max = node.config.replication_frame_bytes_max
        heartbeat_s = self.heartbeat_s
        hw_sent = -1
        hw_due = None                  # when a moved high watermark goes in a HEARTBEAT if no DATA took it
        log.info("replication: follower %s connected from offset %d", member, offset)
        try:
            while node.leading and node.epoch == epoch and not reader.done():
                wake.clear()
                off, data, raw, nxt = store.replica.read_span(offset, frame_max)
                end = store.replica.end
                hw = acks.hw
                if node.log_failed_in_epoch():        # (after the read: node.py) nothing more in this epoch
                    break
                if data:
                    if raw:
                        self.raw_frames += 1
                        log.warning("replication: log bytes %d..%d are not whole records (damaged here): sent to "
                                    "%s as they are", off, off + len(data), member)
                    acks.sent(member, conn, nxt, end, len(data))
                    await send(rp.encode(rp.RAW if raw else rp.DATA, epoch, off, end, data, hw))
                    hw_sent, hw_due = hw, None
                    offset = nxt
                    continue
                offset = off
                if hw != hw_sent:                     # the high watermark moved: said soon
                    now = loop.time()
                    if hw_due is None:
                        hw_due = now + HW_HEARTBEAT_DELAY_S
                    if hw_due - now > HW_DUE_SLACK_S:     # (a timer may fire a hair early: then it is due)
                        try:                          # an append comes first (its frame carries it)?
                            await asyncio.wait_for(wake.wait(), hw_due - now)
                        except asyncio.TimeoutError:
                            pass
                        continue
                    acks.sent(member, conn, offset, end)
                    await send(rp.encode(rp.HEARTBEAT, epoch, offset, end, hw=hw))
                    hw_sent, hw_due = hw, None
                    continue
                try:
                    await asyncio.wait_for(wake.wait(), heartbeat_s)
                except asyncio.TimeoutError:
                    end, hw = store.replica.end, acks.hw
                    if node.log_failed_in_epoch():
                        break
                    acks.sent(member, conn, offset, end)
                    await send(rp.encode(rp.HEARTBEAT, epoch, offset, end, hw=hw))
                    hw_sent, hw_due = hw, None
            if not reader.done():
                await send(self._refuse(node.serving_refusal("", 0) or "the leader's epoch changed"))
        finally:
            remove()
            reader.cancel()
            acks.disconnect(member, conn)
            log.info("replication: follower %s disconnected", member)

    async def _read_acks(self, it, member: str, conn: int) -> None:
        acks = self.node.acks
        try:
            async for raw in it:
                fr = rp.decode(raw)
                if fr.kind == rp.ACK:
                    acks.confirm(member, conn, fr.offset)
        except FrameError as e:
            log.warning("replication: follower %s sent a bad frame (%s): stream dropped", member, e)
        except (grpc.RpcError, asyncio.InvalidStateError, ConnectionError):
            pass                                      # the follower went away

    async def epochs(self) -> bytes:
        node = self.node
        s = node.store
        return rp.dumps({"leader": node.leading and not node.fenced, "epoch": node.epoch,
                         "epochs": s.epochs.snapshot(), "min": s.commitlog_min_offset, "max": s.replica.end,
                         "group": node.group, "member": node.member, "view": node.view()})

    async def state_frames(self, challenge: bytes = b"") -> AsyncIterator[bytes]:
        """The broker state as STATE frames (one document, chunked: no size cap); with authentication on,
        MAC'd and bound to the follower's ``challenge`` (state.sign_answer)."""
        node = self.node
        if len(challenge) > state.CHALLENGE_BYTES_MAX:
            doc = {"ok": False, "error": f"a state challenge is at most {state.CHALLENGE_BYTES_MAX} bytes"}
        elif not node.leading or node.service is None or node.installing is not None:   # (not its service yet)
            doc = {"ok": False, "error": node.serving_refusal("", 0) or "not ready"}
        else:
            doc = {"ok": True, "state": state.snapshot(node.store, node.service)}
        body = state.sign_answer(rp.dumps(doc), state.node_key(node), node.group, bytes(challenge))
        for fr in rp.state_frames(body, node.epoch, node.config.replication_frame_bytes_max):
            yield fr
