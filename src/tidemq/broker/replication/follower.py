"""The follower's side of ``tidemq.Replication``: copy the leader's log and state, forever.

One session, over the transport seam (transport.py: gRPC for real, in memory in the simulation):
ask the leader for its epochs (``Epochs``); cut what this log has that the leader's never had
(store/epochs.divergence_point, store/replica.truncate); open the stream from this log's end;
write every DATA frame byte-identical (store/replica.append: checked, written) and every RAW
frame as it is (store/replica.append_raw: a stretch of the leader's log that is not whole records,
damaged on its disk; counted and reported, and replication goes on after it); confirm (ACK: the
written offset, or the durable one under SYNC_FLUSH) each frame that moved it and every
HEARTBEAT (the leader learns it is caught up: acks.py), then dispatch (its consume-queue units and
index entries: a read before that dispatches first). The loop is pipelined: the next frames are
received (and their CRC checked) while the last are written, every frame that arrived meanwhile is
written in one pass off the loop (contiguous DATA frames as one append), and one ACK covers every
write done while the last ACK was under way (never more than the log has: ReplicaLog.confirmed,
read when the ACK leaves). Keep the high watermark every frame carries
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
import os

from ...protocol import replication as rp
from ...said import Conditions, kind_of
from ...protocol.data import FrameError
from ...store.epochs import divergence_point
from ...store.replica import ReplicaError
from . import state
from .transport import TransportError

log = logging.getLogger("tidemq.broker")

IDLE_S = 5.0               # no frame for this long (the leader sends one every HEARTBEAT_S): a dead leader
CALL_TIMEOUT_S = 5.0       # Epochs and each State copy: a leader that does not answer within it is tried again
RETRY_S_MAX = 2.0          # the longest wait between sessions while this member's disk refuses writes
FRAMES_AHEAD = 16          # frames received ahead of the one being written (at most this many frame_bytes_max)
BATCH_BYTES_MAX = 8 << 20  # frame bytes written in one pass at most


class Refused(Exception):
    """The leader (or who we took for it) would not serve us; the text says why."""


class LocalWriteError(Exception):
    """This member's own disk refused the leader's bytes (OSError): not the leader's fault."""


class ReplicationClient:
    def __init__(self, node, leader_endpoint: str) -> None:
        self.node = node
        self.leader_endpoint = leader_endpoint
        self.connected = False
        self.failures = Conditions(log, f"replication from {leader_endpoint}")    # failed sessions (run)
        self.leader_end = 0               # the leader's log end, as its last frame said
        self.last_frame_at = 0.0
        self.sessions = 0
        self.truncated_bytes = 0
        self.last_error: str | None = None
        self.state_copies = 0
        self.state_bytes = 0
        self.state_copies_failed = 0
        self.state_copies_refused = 0     # of those, answers whose MAC was missing or wrong (state.Unauthenticated)
        # a copy that keeps failing (every replication_state_interval_ms: a leader sealing under another
        # key, a state directory refused) is said once while it lasts, and once when it works again
        self.state_failures = Conditions(log, f"replication from {leader_endpoint}: copying the leader's state")
        self.local_errors = 0             # sessions ended by this member's own disk
        self.ineligible: bool | None = None   # recorded as not electable (its log started over); None: not asked
        self.heartbeats = 0               # HEARTBEAT frames received
        self.acks_sent = 0                # ACK frames sent (each confirms the log's end, or a HEARTBEAT)
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
                "state_copies_failed": self.state_copies_failed, "state_copies_refused": self.state_copies_refused,
                "heartbeats": self.heartbeats, "acks_sent": self.acks_sent,
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
                # said once per kind of failure while the copy fails, counted, without a traceback (a
                # full disk, a leader gone): its text may name an offset that moves at every retry
                self.failures.failed(kind_of(e) if not isinstance(e, Refused) else f"Refused: {e}", text)
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
            node.hw_known = 0
            await node.cut_served_end(0)                  # (first: a crash after the cut finds it lowered)
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
                to = point if end >= int(info["min"]) else 0
                node.hw_known = min(node.hw_known, to)
                await node.cut_served_end(to)             # (first: a crash after the cut finds it lowered)
                cut = await asyncio.to_thread(store.replica.truncate, to)
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
        """The copy, pipelined: a reader task receives (and decodes, and so checks the frame CRC of)
        the next frames while the last ones are written; each pass takes every frame that arrived
        meanwhile (up to ``BATCH_BYTES_MAX``), writes them in one call off the loop (contiguous DATA
        frames as one append: one check-and-write, one pwrite, one dispatch batch), and a
        confirmer task says what the log has as soon as the write is done, before the dispatch
        (one ACK for everything written while the last ACK was under way)."""
        frames: asyncio.Queue = asyncio.Queue(FRAMES_AHEAD)
        confirm = _Confirmer(stream, epoch, self.node.store.replica, self)
        reader = asyncio.create_task(self._read_ahead(stream, frames))
        confirmer = asyncio.create_task(confirm.run())
        try:
            while not self.stopped:
                batch, stop = await self._gather(frames, epoch)
                if confirmer.done():
                    confirmer.result()            # its write failed: the stream broke
                    raise TransportError("the confirmations stopped")
                if batch:
                    await self._apply(batch, theirs, confirm)
                if stop is not None:
                    raise stop
        finally:
            reader.cancel()
            confirmer.cancel()
            if confirmer.done() and not confirmer.cancelled():
                confirmer.exception()             # (said by the session's own error)

    async def _read_ahead(self, stream, frames: asyncio.Queue) -> None:
        """Receive and decode frames into ``frames`` (at most FRAMES_AHEAD wait); a failure (the
        stream ended or broke, a damaged frame, nothing for IDLE_S) goes in as the last item."""
        while True:
            try:
                raw = await asyncio.wait_for(stream.read(), IDLE_S)
                if raw is None:
                    raise TransportError("the leader ended the stream")
                item = rp.decode(raw)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - raised in order, after the frames before it
                await frames.put(e)
                return
            await frames.put(item)

    async def _gather(self, frames: asyncio.Queue, epoch: int) -> tuple[list, Exception | None]:
        """The frames that arrived (at least one waited for), in order, up to BATCH_BYTES_MAX bytes;
        and what ends the session after them (a failure, a REFUSE, a frame of another epoch)."""
        batch: list = []
        size = 0
        item = await frames.get()
        while True:
            if isinstance(item, Exception):
                return batch, item
            if item.kind == rp.REFUSE:
                return batch, Refused(item.payload.decode("utf-8", "replace"))
            if item.epoch != epoch:
                return batch, Refused(f"a frame of epoch {item.epoch} in a stream of epoch {epoch}")
            batch.append(item)
            size += len(item.payload)
            if size >= BATCH_BYTES_MAX or frames.empty():
                return batch, None
            item = frames.get_nowait()

    async def _apply(self, batch: list, theirs, confirm: _Confirmer) -> None:
        node, store = self.node, self.node.store
        self.connected = True
        self.last_frame_at = self._now()
        self.leader_end = batch[-1].end
        writes = [fr for fr in batch if fr.kind in (rp.DATA, rp.RAW)]
        if writes:
            loop = asyncio.get_running_loop()
            try:
                # confirmed once written, dispatched after the confirmation (ReplicaLog.append)
                if store.replica.flush_after_append:       # an fsync each pass (SYNC_FLUSH): off the loop
                    await asyncio.to_thread(write_frames, store, writes,
                                            lambda: loop.call_soon_threadsafe(confirm.wake))
                else:
                    # into the page cache (~1 us a record): on the loop, no hop to a thread and back;
                    # the ACK is sent before the dispatch, which runs next on the loop (a read before
                    # it dispatches first: put_lock.py)
                    write_frames(store, writes, confirm.wake, dispatch=False)
                    loop.call_soon(store.drain_dispatch)
            except _DiskError as e:
                # (a failed fsync or write of the log: the store cut it back to what was durable and
                # sealed it there, store/log_failure.py; the next session starts the copy over)
                failed = LocalWriteError(f"this member's disk refused the leader's bytes at {e.offset}: {e.error}")
                failed.error = e.error             # (its kind: said.kind_of)
                raise failed from None
            self._copy_epochs(theirs)
        # what every member of the in-sync set has; never past what this log has
        fr_hw = max(fr.hw for fr in batch)
        hw = max(node.hw_known, min(fr_hw, store.replica.end))
        if hw != node.hw_known:
            node.hw_known = hw
            store.readable_advanced()         # consumers waiting for it look again (SYNC: node.read_limit)
        if self.ineligible and fr_hw <= store.replica.end and node.coordinator is not None:
            # its copy has everything acknowledged again: it may be elected
            if await asyncio.to_thread(node.coordinator.set_eligible, True):
                self.ineligible = False
                log.warning("replication: this member's copy has the high watermark (%d) again: it may be "
                            "elected", fr_hw)
        heartbeats = sum(fr.kind == rp.HEARTBEAT for fr in batch)
        self.heartbeats += heartbeats
        confirm.wake(heartbeat=heartbeats > 0)
        self.failures.recovered("copying again")           # (the failures since the last frames applied)
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
                challenge = os.urandom(state.CHALLENGE_BYTES)    # fresh each time: an older answer does not check
                async for raw in ch.state(max(CALL_TIMEOUT_S, interval), challenge):
                    got = whole.add(rp.decode(raw))
                    if got is not None:
                        doc = rp.loads(state.open_answer(got, state.node_key(node), node.group, challenge))
                if doc is None:
                    raise ValueError("the state answer ended before the document did")
                if doc.get("ok") and node.service is not None:
                    await asyncio.to_thread(state.apply, doc["state"], node.store, node.service, node.state_dir)
                    self.state_copies += 1
                    self.state_bytes = whole.have
                    self.state_failures.recovered()
            except (TransportError, FrameError, ValueError, OSError) as e:
                self.state_copies_failed += 1
                self.state_copies_refused += isinstance(e, state.Unauthenticated)
                self.state_failures.failed(kind_of(e), f"failed: {e}")
            await asyncio.sleep(interval)


class _DiskError(OSError):
    def __init__(self, offset: int, error: OSError) -> None:
        super().__init__(str(error))
        self.offset, self.error = offset, error


def write_frames(store, writes: list, written, dispatch: bool = True) -> None:
    """Write the frames in order (a run of contiguous DATA frames within a segment as one
    ``ReplicaLog.append``), call ``written()`` (the confirmer looks), then dispatch (``dispatch``
    False: the caller has ``store.drain_dispatch`` run next)."""
    replica = store.replica
    seg = replica.segments.segment_size
    i, n = 0, len(writes)
    try:
        while i < n:
            fr = writes[i]
            off = fr.offset
            try:
                if fr.kind == rp.RAW:
                    replica.append_raw(off, fr.payload)
                    i += 1
                    continue
                j, end = i + 1, off + len(fr.payload)
                while j < n and writes[j].kind == rp.DATA and writes[j].offset == end and \
                        (end + len(writes[j].payload) - 1) // seg == off // seg and \
                        end - off < BATCH_BYTES_MAX:      # (one segment: check_frame's rule)
                    end += len(writes[j].payload)
                    j += 1
                data = fr.payload if j == i + 1 else b"".join(w.payload for w in writes[i:j])
                replica.append(off, data, True)
                i = j
            except OSError as e:
                raise _DiskError(off, e) from None
    finally:
        if i:
            written()
    if dispatch:
        store.drain_dispatch()


class _Confirmer:
    """Sends ACK (what this log has: ReplicaLog.confirmed, read when it is sent) when woken: after
    every write, and for a HEARTBEAT (the leader learns it is caught up: acks.py), unless an ACK
    that moved the confirmed offset went since the last HEARTBEAT -- the leader sends one after
    each ACK that moves the high watermark (for this member's readers), and answering each of those
    cost a round of wake-ups on both sides per write; the leader's record of it (acks.sent) is
    confirmed by the next ACK, and of two HEARTBEATs in a row (nothing written between: idle) the
    second is always answered, so the leader hears it is caught up at least every second
    heartbeat interval (a quarter of replica_lag_time_max_ms). One ACK covers every write done
    while the last was being sent."""

    def __init__(self, stream, epoch: int, replica, client: ReplicationClient) -> None:
        self.stream, self.epoch, self.replica, self.client = stream, epoch, replica, client
        self._event = asyncio.Event()
        self._heartbeat = False
        self.moved_since_heartbeat = False       # an ACK that moved the offset went since the last HEARTBEAT

    def wake(self, heartbeat: bool = False) -> None:
        self._heartbeat = self._heartbeat or heartbeat
        self._event.set()

    async def run(self) -> None:
        acked = -1
        while True:
            await self._event.wait()
            self._event.clear()
            confirmed = self.replica.confirmed()
            heartbeat, self._heartbeat = self._heartbeat, False
            if confirmed != acked:
                answer, self.moved_since_heartbeat = True, not heartbeat
            elif heartbeat:
                answer = not self.moved_since_heartbeat
                self.moved_since_heartbeat = False
            else:
                answer = False
            if answer:
                await self.stream.write(rp.encode(rp.ACK, self.epoch, confirmed))
                self.client.acks_sent += 1
                acked = confirmed
