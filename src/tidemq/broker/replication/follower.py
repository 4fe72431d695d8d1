"""The follower's side of ``tidemq.Replication``: copy the leader's log and state, forever.

One session: ask the leader for its epochs (``Epochs``); cut what this log has that the
leader's never had (store/epochs.divergence_point, store/replica.truncate); open the stream from
this log's end; write every DATA frame byte-identical (store/replica.append: checked, written)
and confirm it (ACK: the written offset, or the durable one under SYNC_FLUSH), then dispatch it
(its consume-queue units and index entries: a read before that dispatches first); copy
the broker state every ``replication_state_interval_ms`` (state.py). A session ends when the
stream does (the leader stopped, was killed, refused us) or when nothing came for
``IDLE_S``; the next starts after ``replication_retry_ms``, from wherever this log ends, so a
follower cut off for a while (a network cut, SIGSTOP) catches up without a gap.
"""

from __future__ import annotations

import asyncio
import logging
import time

import grpc

from ...protocol import replication as rp
from ...protocol.data import FrameError
from ...store.epochs import divergence_point
from ...store.replica import ReplicaError
from ..protection.members import MemberCredentials, refusal
from . import state

log = logging.getLogger("tidemq.broker")

IDLE_S = 5.0               # no frame for this long (the leader sends one every HEARTBEAT_S): a dead leader
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 256 << 20), ("grpc.max_send_message_length", 64 << 20),
                   ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000)]


class Refused(Exception):
    """The leader (or who we took for it) would not serve us; the text says why."""


class ReplicationClient:
    def __init__(self, node, leader_endpoint: str) -> None:
        self.node = node
        self.leader_endpoint = leader_endpoint
        self.connected = False
        self.leader_end = 0               # the leader's log end, as its last frame said
        self.last_frame_at = 0.0
        self.sessions = 0
        self.truncated_bytes = 0
        self.last_error: str | None = None
        self.state_copies = 0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
                pass
            self._task = None
        self.connected = False

    def status(self) -> dict:
        end = self.node.store.replica.end
        return {"leader": self.leader_endpoint, "connected": self.connected, "offset": end,
                "leader_end": self.leader_end, "lag_bytes": max(0, self.leader_end - end),
                "since_last_frame_s": round(time.monotonic() - self.last_frame_at, 3) if self.last_frame_at else None,
                "sessions": self.sessions, "truncated_bytes": self.truncated_bytes, "state_copies": self.state_copies,
                "last_error": self.last_error}

    async def run(self) -> None:
        retry_s = self.node.config.replication_retry_ms / 1000
        while True:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except (grpc.aio.AioRpcError, ConnectionError, Refused, FrameError, ReplicaError, OSError,
                    asyncio.TimeoutError, ValueError) as e:
                why = refusal(e)                # wrong keys, not a super user, TLS: said once, plainly
                text = why or f"{type(e).__name__}: {getattr(e, 'details', lambda: None)() or e}"
                if text != self.last_error:
                    log.warning("replication from %s: %s%s (trying again)", self.leader_endpoint,
                                "the leader " if why else "", text)
                self.last_error = text
            finally:
                self.connected = False
            await asyncio.sleep(retry_s)

    async def _session(self) -> None:
        node, store = self.node, self.node.store
        creds = MemberCredentials.of(node)              # signed with our keys, TLS where the port speaks it
        async with creds.channel(self.leader_endpoint, CHANNEL_OPTIONS) as ch:
            info = rp.loads(await ch.unary_unary(rp.EPOCHS_PATH)(b"", timeout=10, metadata=creds.metadata()))
            if not info.get("leader"):
                raise Refused(f"{self.leader_endpoint} is not the leader")
            if info.get("group") != node.group:
                raise Refused(f"{self.leader_endpoint} leads group {info.get('group')!r}, not {node.group!r}")
            epoch = int(info["epoch"])
            if epoch < node.known_epoch:
                raise Refused(f"{self.leader_endpoint} leads epoch {epoch}, older than {node.known_epoch}")
            node.known_epoch = epoch
            node.adopt_view(info.get("view") or {})
            theirs = [(int(e), int(s)) for e, s in info["epochs"]]
            end = store.replica.end
            point = divergence_point(store.epochs.snapshot(), end, theirs, int(info["max"]), int(info["min"]))
            if point < end or (0 < end < int(info["min"])):
                cut = await asyncio.to_thread(store.replica.truncate, point if end >= int(info["min"]) else 0)
                self.truncated_bytes += cut
            self._copy_epochs(theirs)
            call = ch.stream_stream(rp.STREAM_PATH)(metadata=creds.metadata())
            await call.write(rp.hello(node.group, node.member, node.endpoint, epoch, store.replica.end,
                                      leader_endpoint=node.leader_port_endpoint))
            state_task = asyncio.create_task(self._copy_state(ch))
            self.sessions += 1
            try:
                await self._receive(call, epoch, theirs)
            finally:
                state_task.cancel()
                call.cancel()

    async def _receive(self, call, epoch: int, theirs) -> None:
        store = self.node.store
        acked = -1
        while True:
            raw = await asyncio.wait_for(call.read(), IDLE_S)
            if raw is grpc.aio.EOF:
                raise ConnectionError("the leader ended the stream")
            fr = rp.decode(raw)
            if fr.kind == rp.REFUSE:
                raise Refused(fr.payload.decode("utf-8", "replace"))
            if fr.epoch != epoch:
                raise Refused(f"a frame of epoch {fr.epoch} in a stream of epoch {epoch}")
            self.connected = True
            self.last_frame_at = time.monotonic()
            self.leader_end = fr.end
            if fr.kind == rp.DATA:
                # confirmed once written, dispatched after the confirmation (ReplicaLog.append)
                await asyncio.to_thread(store.replica.append, fr.offset, fr.payload, True)
                self._copy_epochs(theirs)
            confirmed = store.replica.confirmed()
            if confirmed != acked:
                await call.write(rp.encode(rp.ACK, epoch, confirmed))
                acked = confirmed
            if fr.kind == rp.DATA:
                await asyncio.to_thread(store.drain_dispatch)
            self.last_error = None

    def _copy_epochs(self, theirs: list[tuple[int, int]]) -> None:
        """The leader's epoch entries for what this log now has."""
        store = self.node.store
        end = store.replica.end
        have = store.epochs.snapshot()
        want = [x for x in theirs if x[1] < end or (x[1] == end == 0)]
        if want[:len(have)] != have or len(want) < len(have):
            store.epochs.replace(want)
            return
        for e, s in want[len(have):]:
            store.epochs.begin(e, s)

    async def _copy_state(self, ch) -> None:
        node = self.node
        interval = node.config.replication_state_interval_ms / 1000
        fn = ch.unary_unary(rp.STATE_PATH)
        creds = MemberCredentials.of(node)
        while True:
            try:
                doc = rp.loads(await fn(b"", timeout=30, metadata=creds.metadata()))
                if doc.get("ok") and node.service is not None:
                    await asyncio.to_thread(state.apply, doc["state"], node.store, node.service, node.state_dir)
                    self.state_copies += 1
            except (grpc.aio.AioRpcError, ValueError, OSError) as e:
                log.warning("replication: copying the leader's state failed: %s", refusal(e) or e)
            await asyncio.sleep(interval)
