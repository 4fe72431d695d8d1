"""The follower's side of ``tidemq.Replication``: copy the leader's log and state, forever.

One session, over the transport seam (transport.py: gRPC for real, in memory in the simulation):
ask the leader for its epochs (``Epochs``); cut what this log has that the leader's never had
(store/epochs.divergence_point, store/replica.truncate); open the stream from this log's end;
write every DATA frame byte-identical (store/replica.append: checked, written) and every RAW
frame as it is (store/replica.append_raw: a stretch of the leader's log that is not whole records,
damaged on its disk; counted and reported, and replication goes on after it); confirm (ACK: the
written offset, or the durable one under SYNC_FLUSH) each frame that moved it and every
HEARTBEAT (the leader learns it is caught up: acks.py), then dispatch (its consume-queue units and
index entries: a read before that dispatches first); keep the high watermark every frame carries
(``node.hw_known``: what a follower serves reads up to under SYNC); copy the broker state every
``replication_state_interval_ms`` (state.py, in chunks: any size). A follower whose own log was
sealed early (its commit log failed: store/log_failure.py) starts its copy over: its log must be
the leader's offset for offset. A session ends when the stream
does (the leader stopped, was killed, refused us) or when nothing came for ``IDLE_S``; the next
starts after ``replication_retry_ms`` (longer, up to ``RETRY_S_MAX``, while this member's own disk
refuses the writes: a full disk), from wherever this log ends, so a follower cut off for a while
(a network cut, SIGSTOP) catches up without a gap.
"""

from __future__ import annotations

import asyncio
import logging

from ...protocol import replication as rp
from ...protocol.data import FrameError
from ...store.epochs import divergence_point
from ...store.replica import ReplicaError
from . import state
from .transport import TransportError

log = logging.getLogger("tidemq.broker")

IDLE_S = 5.0               # no frame for this long (the leader sends one every HEARTBEAT_S): a dead leader
CALL_TIMEOUT_S = 5.0       # Epochs and each State copy: a leader that does not answer within it is tried again
RETRY_S_MAX = 2.0          # the longest wait between sessions while this member's disk refuses writes


class Refused(Exception):
    """The leader (or who we took for it) would not serve us; the text says why."""


class LocalWriteError(Exception):
    """This member's own disk refused the leader's bytes (OSError): not the leader's fault."""


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
        self.state_bytes = 0
        self.local_errors = 0             # sessions ended by this member's own disk
        self.ineligible: bool | None = None   # recorded as not electable (its log started over); None: not asked
        self.stopped = False
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self.run())

    def cancel(self) -> None:
        """Stop at once (and for good: asyncio.wait_for in Python 3.11 may swallow a cancellation)."""
        self.stopped = True
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        self.stopped = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
                pass
            self._task = None
        self.connected = False

    def _now(self) -> float:
        return self.node.clock.monotonic_s()

    def status(self) -> dict:
        store = self.node.store
        end = store.replica.end
        return {"leader": self.leader_endpoint, "connected": self.connected, "offset": end,
                "leader_end": self.leader_end, "lag_bytes": max(0, self.leader_end - end),
                "high_watermark": self.node.hw_known,
                "since_last_frame_s": round(self._now() - self.last_frame_at, 3) if self.last_frame_at else None,
                "sessions": self.sessions, "truncated_bytes": self.truncated_bytes, "state_copies": self.state_copies,
                "raw_bytes": store.replica.raw_bytes, "raw_regions": store.replica.raw_regions,
                "local_errors": self.local_errors, "last_error": self.last_error}

    async def run(self) -> None:
        retry_s = self.node.config.replication_retry_ms / 1000
        wait_s = retry_s
        while not self.stopped:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except (TransportError, Refused, FrameError, ReplicaError, LocalWriteError, OSError,
                    asyncio.TimeoutError, ValueError) as e:
                text = f"{type(e).__name__}: {e}"
                if text != self.last_error:
                    # said once per kind of failure, without a traceback (a full disk, a leader gone)
                    log.warning("replication from %s: %s (trying again)", self.leader_endpoint, text)
                self.last_error = text
                if isinstance(e, LocalWriteError):
                    self.local_errors += 1
                    wait_s = min(RETRY_S_MAX, max(retry_s, wait_s * 2))
                else:
                    wait_s = retry_s
            except Exception as e:  # noqa: BLE001 - the copy must go on: said once, with what it was
                text = f"{type(e).__name__}: {e}"
                if text != self.last_error:
                    log.warning("replication from %s: unexpected %s (trying again)", self.leader_endpoint, text,
                                exc_info=True)
                self.last_error = text
                wait_s = min(RETRY_S_MAX, max(retry_s, wait_s * 2))
            finally:
                self.connected = False
            await asyncio.sleep(wait_s)

    async def _session(self) -> None:
        node, store = self.node, self.node.store
        gc = node.coordinator
        if gc is not None and self.ineligible is None:
            self.ineligible = await asyncio.to_thread(gc.eligible) is False
        if store.commit_log.sealed:
            # this member's log was sealed early (its commit log failed, store/log_failure.py, or a
            # directory went offline): it goes on at the next segment, with a hole the leader's log
            # does not have. A follower's copy must be the leader's, offset for offset: it starts over.
            # It may have confirmed what it drops: first it says it may not be elected (coordinator.py)
            if gc is not None and not await asyncio.to_thread(gc.set_eligible, False):
                raise LocalWriteError("this member's log must start over, and the coordinator cannot be told "
                                      "it may not be elected meanwhile")
            self.ineligible = gc is not None
            cut = await asyncio.to_thread(store.replica.truncate, 0)
            store.commit_log.forget_seals_after(0)        # (an empty log has nothing sealed)
            log.warning("replication: this member's log had a sealed stretch (a failed or offline directory): "
                        "%d bytes dropped, the copy starts again from the leader's first offset", cut)
            self.truncated_bytes += cut
            node.hw_known = 0
        async with node.transport.connect(self.leader_endpoint) as ch:
            info = rp.loads(await ch.epochs(CALL_TIMEOUT_S))
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
                node.hw_known = min(node.hw_known, store.replica.end)
            self._copy_epochs(theirs)
            stream = ch.stream()
            await stream.write(rp.hello(node.group, node.member, node.endpoint, epoch, store.replica.end,
                                        leader_endpoint=node.leader_port_endpoint))
            state_task = asyncio.create_task(self._copy_state(ch))
            self.sessions += 1
            try:
                await self._receive(stream, epoch, theirs)
            finally:
                state_task.cancel()
                stream.cancel()

    async def _receive(self, stream, epoch: int, theirs) -> None:
        node, store = self.node, self.node.store
        acked = -1
        while not self.stopped:
            raw = await asyncio.wait_for(stream.read(), IDLE_S)
            if raw is None:
                raise TransportError("the leader ended the stream")
            fr = rp.decode(raw)
            if fr.kind == rp.REFUSE:
                raise Refused(fr.payload.decode("utf-8", "replace"))
            if fr.epoch != epoch:
                raise Refused(f"a frame of epoch {fr.epoch} in a stream of epoch {epoch}")
            self.connected = True
            self.last_frame_at = self._now()
            self.leader_end = fr.end
            if fr.kind in (rp.DATA, rp.RAW):
                try:
                    if fr.kind == rp.DATA:
                        # confirmed once written, dispatched after the confirmation (ReplicaLog.append)
                        await asyncio.to_thread(store.replica.append, fr.offset, fr.payload, True)
                    else:
                        await asyncio.to_thread(store.replica.append_raw, fr.offset, fr.payload)
                except OSError as e:
                    # (a failed fsync or write of the log: the store cut it back to what was durable and
                    # sealed it there, store/log_failure.py; the next session starts the copy over)
                    raise LocalWriteError(f"this member's disk refused the leader's bytes at {fr.offset}: {e}") \
                        from None
                self._copy_epochs(theirs)
            # what every member of the in-sync set has; never past what this log has
            hw = max(node.hw_known, min(fr.hw, store.replica.end))
            if hw != node.hw_known:
                node.hw_known = hw
                store.readable_advanced()         # consumers waiting for it look again (SYNC: node.read_limit)
            if self.ineligible and fr.hw <= store.replica.end and node.coordinator is not None:
                # its copy has everything acknowledged again: it may be elected
                if await asyncio.to_thread(node.coordinator.set_eligible, True):
                    self.ineligible = False
                    log.warning("replication: this member's copy has the high watermark (%d) again: it may be "
                                "elected", fr.hw)
            confirmed = store.replica.confirmed()
            if confirmed != acked or fr.kind == rp.HEARTBEAT:
                await stream.write(rp.encode(rp.ACK, epoch, confirmed))
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
        while True:
            try:
                whole = rp.StateAssembler(1 << 40)
                doc = None
                async for raw in ch.state(max(CALL_TIMEOUT_S, interval)):
                    got = whole.add(rp.decode(raw))
                    if got is not None:
                        doc = rp.loads(got)
                if doc is None:
                    raise ValueError("the state answer ended before the document did")
                if doc.get("ok") and node.service is not None:
                    await asyncio.to_thread(state.apply, doc["state"], node.store, node.service, node.state_dir)
                    self.state_copies += 1
                    self.state_bytes = whole.have
            except (TransportError, FrameError, ValueError, OSError) as e:
                log.warning("replication: copying the leader's state failed: %s", e)
            await asyncio.sleep(interval)
