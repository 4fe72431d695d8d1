"""A seeded simulation of a broker group of three in one process, without ZooKeeper: the real
ReplicationNode, election (coordinator.py), in-sync set (acks.py), leases, leader and follower
streams (leader.py, follower.py) and stores, over the in-process coordinator
(tidemq.testing.memory_coordinator), an in-memory transport that drops, delays, resets and
partitions (tidemq.testing.memory_transport), FaultyFileIO disks, and an event loop whose clock
moves only when nothing is ready (tidemq.testing.sim_loop): one seed is one run, replayable.

One run: a producer sends without pause to whichever member answered last (another after a
refusal or no answer; a put the client gave up on still reaches the member when it runs again),
and a caller that goes (its deadline: ``CLIENT_TIMEOUT_S``, or, for a seeded ``GONE_RATE`` of the
sends, a short one within a put's usual wait: ``GONE_AFTER_S``) cancels its call at the member as
gRPC does (delivered when the member runs: a stopped one sees it once resumed); the member settles
such a put as the broker's send path does (broker/puts.py ``on_gone``, resends.settled_gone),
consumers read from any member, and a chaos schedule kills (kill -9: the page cache survives),
stops (SIGSTOP) and restarts members, cuts links between two members and between a member and
the coordinator, isolates the leader, fills a follower's disk and fails a member's commit-log
fsyncs (a leader's: it steps down). Then every fault is healed and the group must settle: one
leader, every member's log equal to it and in its in-sync set. Checked after every run:

* no acknowledged message lost (SYNC; under ASYNC the loss is counted: what the new leader had
  not copied), none stored twice;
* no write acknowledged by a leader of an older epoch once a newer epoch began, and no epoch
  began while another member's lease was valid;
* every member's log the leader's, byte for byte, after healing;
* no consumer served a record that was later cut (SYNC: reads stop at the high watermark; under
  ASYNC counted).

A member's put runs as the broker's do (broker/puts.py: appended on the loop, under SYNC its
followers' confirmations awaited there, at most ``PUT_WAIT_S``): an appended put not confirmed
in that time is confirmed by the client's resend, which the broker answers from ``store.confirm``
(produce/send_path.Unconfirmed), as the official clients' retries are. A put refused or not answered
(a member killed or stopped, no leader, not confirmed in time) is sent again with the same message
ids, up to ``SEND_ATTEMPTS`` times in all, to the member the last one would forward it to, as the
official clients resend: each member answers a resend as the broker's send path does, from its
dedup window, the puts it appended but could not confirm, and the index after it took the lead
(produce/resends.py, rebuilt at every change of role as server.activate rebuilds the services,
whose puts a follower's never makes: broker/puts.py), so a message copied to a follower and
resent to it once it leads is counted "twice" unless the broker recognises it. SYNC_FLUSH's group commit
runs on the loop too (``MessageStore(stepped_flush=True)``, ``SimMember._flusher``): each fsync takes
a seeded ``fsync_s`` of virtual time, so followers may confirm a record before the leader's fsync of
it ends, and no real thread decides the order: the same seed is the same run.

The coordination takes its time, as ZooKeeper and a busy broker do (each random run draws its bounds,
each event a delay within them; scripted scenarios run without): a session expires up to one tickTime
after its deadline (ZooKeeper's expiry buckets), a watch's notification is on its way a while, each
coordinator step waits its thread's wake-up and round trips, a leader's step-down after its log
failed waits two writes more, an election's winner learns of its record a write's round trip later,
a change of role reaches the loop a while after the step asked for it, and a leader's stream may be
busy sending a frame while the log moves on. The window between a fault and the group's answer to it
is then as wide as it is with real processes (an instantaneous coordinator closed them: a leader whose
log failed kept streaming after its cut for long enough only in an e2e run, fixed in 5a1604c).

``python -m tests.sim.group_sim SEED [--async]`` replays one seed with the group's log;
``python -m tests.sim.group_sim --seeds N [--from K] [--async]`` prints the figures of seeds K..K+N-1.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import random
import sys
from dataclasses import dataclass, field

from tidemq.broker.produce import dedup, resends
from tidemq.broker.produce.batch import STORED
from tidemq.broker.produce.resends import Resends, Unconfirmed
from tidemq.broker.puts import PutsClosed, StorePuts
from tidemq.broker.replication.coordination import Create, SetData
from tidemq.broker.replication.node import ReplicationNode
from tidemq.config import BrokerConfig, ReplicationConfig
from tidemq.io import ManualClock
from tidemq.record import codec
from tidemq.store import GetStatus, Message, MessageStore, PutStatus, StoreConfig
from tidemq.testing.faulty_io import FaultyFileIO, SimulatedCrash
from tidemq.testing.memory_coordinator import MemoryCoordinatorService
from tidemq.testing.memory_transport import MemoryNetwork
from tidemq.testing.sim_loop import run as run_on_sim_loop

TOPIC = "SimT"
QUEUES = 2
NAMES = ("m0", "m1", "m2")
SESSION_S = 1.5
LAG_MS = 1000
ELECTION_WAIT_MS = 200
CLIENT_TIMEOUT_S = 3.0           # a client waits this long for an answer, then tries another member
CONFIRM_S = 2.0                  # how long a client resends an appended, unconfirmed put
PUT_WAIT_S = 0.5                 # a SYNC put's wait for its followers (replication_timeout_ms)
GONE_RATE = 0.25                 # the sends whose caller goes early (a short deadline, a dropped connection)
GONE_AFTER_S = (0.0002, 0.005)   # ... after this long (drawn in it): while its put waits for the disk, the followers
SEND_ATTEMPTS = 3                # a client sends a message this many times at most (same id), as the official clients
SETTLE_S = 60.0                  # after healing, the group must settle within this (virtual) time
# disk faults hit the segment files only: the store's disk check (a thread on real time) writes a
# marker in the directory, and a fault it met would take the directory offline at a moment the seed
# does not decide (a full disk's marker write failing takes it offline for good: store/disk.py)
SEGMENT_FILES = "commitlog/0"
# how long the coordination takes, as with ZooKeeper and a busy broker (each run draws one of each, then
# every event draws within it: GroupSim.__init__); scripted scenarios run without (their timing is theirs)
ZK_TICK_S = (0.05, 0.1, 0.25, 0.5)       # the server's tickTime: a session expires up to one tick after its deadline
NOTIFY_S_MAX = (0.0005, 0.002, 0.01, 0.05)   # a watch's notification on its way to the member
STEP_S_MAX = (0.0005, 0.005, 0.02, 0.08)     # a wake-up to the coordinator's step (its thread, its round trips)
APPLY_S_MAX = (0.0005, 0.002, 0.01, 0.05)    # a step's change of role (lead, follow, fence) to the loop running it
ZK_WRITE_S_MAX = (0.002, 0.02, 0.1, 0.3)     # a write's round trip (ZooKeeper fsyncs its log first): a leader's
                                             # step-down (two writes), an election's record (the lead then applied)
SEND_S_MAX = (0.0, 0.0005, 0.003, 0.01)      # a leader's stream sending a frame (gRPC's write: the loop, the window)

log = logging.getLogger("tidemq.sim")


class SimFailure(AssertionError):
    pass


def store_config(name: str, sync_flush: bool) -> StoreConfig:
    return StoreConfig(root_dir=f"/sim/{name}", auto_create_topics=True, segment_size_bytes=32 * 1024,
                       preallocate_next_segment=False, consume_queue_units_per_segment=64, index_slots=64,
                       index_entries=1024, flush_disk_type="SYNC_FLUSH" if sync_flush else "ASYNC_FLUSH",
                       flush_interval_ms=60_000, flush_thorough_interval_ms=600_000,
                       flush_consume_queue_interval_ms=60_000, checkpoint_interval_ms=60_000,
                       clean_resource_interval_ms=3_600_000, topic_queues_default=QUEUES)


def replication_config(name: str, mode: str, min_in_sync: int) -> ReplicationConfig:
    return ReplicationConfig(broker_group="g", broker_id=name, replication_mode=mode, in_sync_replicas_min=min_in_sync,
                             replication_timeout_ms=2_000, replica_lag_time_max_ms=LAG_MS,
                             coordinator_session_timeout_ms=int(SESSION_S * 1000), election_wait_ms=ELECTION_WAIT_MS,
                             replication_state_interval_ms=600_000, replication_retry_ms=100, leader_lease_ratio=0.5)


class EpochRecorder(MemoryCoordinatorService):
    """The coordinator, remembering when each epoch began (its compare-and-set went through), who
    led it, and every version of the recorded in-sync set."""

    def __init__(self, clock, on_epoch) -> None:
        super().__init__(clock)
        self.began: dict[int, float] = {}
        self.leaders: dict[int, str] = {}
        self.isr_history: list[tuple[float, int, list[str]]] = []     # (time, epoch, members)
        self.on_epoch = on_epoch

    def _apply(self, op, sid: int) -> None:
        super()._apply(op, sid)
        if isinstance(op, SetData) and op.path.endswith("/epoch"):
            e = int(op.data)
            self.began[e] = self.clock.monotonic_s()
            self.on_epoch(e)
        elif isinstance(op, (SetData, Create)) and op.path.endswith("/isr"):
            doc = json.loads(op.data)
            self.isr_history.append((self.clock.monotonic_s(), int(doc["epoch"]), list(doc["members"])))
        elif isinstance(op, Create) and op.path.endswith("/leader"):
            doc = json.loads(op.data)
            self.leaders[int(doc["epoch"])] = doc["member"]


@dataclass
class Ack:
    id: int
    member: str
    epoch: int
    at_s: float
    resend: bool = False     # answered as a resend of a message stored and confirmed before (its window)


@dataclass
class Stats:
    sent: int = 0
    acked: int = 0
    refused: int = 0
    no_answer: int = 0
    gone: int = 0                # messages whose caller went early (cancelled its call at the member)
    unconfirmed: int = 0
    resent: int = 0              # messages sent again (same id) after no answer, a refusal, not confirmed in time
    recognised: int = 0          # resent messages a member found stored before (answered, not stored again)
    lost: int = 0
    twice: int = 0
    older_epoch_acks: int = 0
    served: int = 0
    served_then_cut: int = 0
    elections: int = 0
    unwritable_s_max: float = 0.0
    faults: list = field(default_factory=list)


class SimMember:
    """One broker process: a store on its own FaultyFileIO disk, a ReplicationNode (this is its Host)."""

    def __init__(self, sim: "GroupSim", name: str) -> None:
        self.sim = sim
        self.name = name
        self.endpoint = f"{name}:1"
        self.fio = FaultyFileIO()
        self.alive = False
        self.paused = False
        self._resume: asyncio.Event | None = None
        self.service = None               # the Host has no MessagingService here (no state to copy)
        self.store: MessageStore | None = None
        self.node: ReplicationNode | None = None
        self._ping: asyncio.Task | None = None
        self._flush_task: asyncio.Task | None = None
        self.flush_open: asyncio.Event | None = None
        self.kills = 0
        self.puts: StorePuts | None = None
        self.resends: Resends | None = None

    # Host ---------------------------------------------------------------------------------------
    async def activate(self, leading: bool) -> None:
        """server.activate's part here: the send path's state built again for the new role (its dedup
        window empty, the index looked up for a while after it began on a log holding messages) and
        the puts of a follower's never made."""
        if self.puts is not None:
            self.puts.close()
        self.puts = StorePuts(self.store, leading=leading)
        self.resends = Resends(self.store, BrokerConfig())

    async def leader_port(self, open_: bool) -> None:
        pass

    @property
    def server(self):
        return self.node.server

    async def gate(self) -> None:
        """Where this member's coroutines wait while it is stopped (SIGSTOP)."""
        while self.paused:
            await self._resume.wait()

    async def _step_gate(self) -> None:
        """Before each of the coordinator's steps: stopped, it waits; then the step takes its time (a
        seeded draw: its thread's wake-up and its round trips to ZooKeeper; a leader's step-down after
        its log failed: two writes more), so that such a leader steps down some time after, not at once."""
        await self.gate()
        sim, node = self.sim, self.node
        d = sim.lag(sim.step_s_max)
        if node.leading and node.step_down_wanted:
            d += sim.lag(sim.zk_write_s_max) + sim.lag(sim.zk_write_s_max)    # it leaves the set, the lease goes
        if d:
            await asyncio.sleep(d)
            await self.gate()

    def _applied_late(self, apply):
        """node.apply, run a seeded while after the step asked for it (the coordinator thread hands it to
        the loop, busy with other work: run_coroutine_threadsafe)."""
        async def applied(a) -> None:
            d = self.sim.lag(self.sim.apply_s_max)
            if a.kind == "lead":
                d += self.sim.lag(self.sim.zk_write_s_max)      # the election's record written: the answer's way back
            if d:
                await asyncio.sleep(d)
                await self.gate()
            await apply(a)
        return applied

    # life ---------------------------------------------------------------------------------------
    async def start(self) -> None:
        sim = self.sim
        self._resume = asyncio.Event()
        # SYNC_FLUSH's group commit runs on this loop (``_flusher``), not on a thread of real time
        self.store = MessageStore(store_config(self.name, sim.sync_flush), fio=self.fio, clock=sim.clock,
                                  stepped_flush=True).start()
        session = sim.coord.client(self.name, SESSION_S)
        self.node = ReplicationNode(self, replication_config(self.name, sim.mode, sim.min_in_sync), clock=sim.clock,
                                    transport=sim.net.transport(self.name), coordination=session,
                                    coordinator_thread=False)
        self.node.gate = self._step_gate
        self.node.apply = self._applied_late(self.node.apply)
        self.node.acks.timeout_s = PUT_WAIT_S  # then the client's resend confirms it
        self.puts, self.resends = None, None  # (the node's first role change builds them: activate)
        self.alive = True
        self.flush_open = asyncio.Event()         # cleared: its group commit waits (a scripted scenario's)
        self.flush_open.set()
        loop = asyncio.get_running_loop()
        self._flush_task = loop.create_task(self._flusher(self.store)) if sim.sync_flush else None
        await self.node.start()
        self._ping = loop.create_task(self._pings(session))

    async def _flusher(self, store: MessageStore) -> None:
        """The store's group commit (SYNC_FLUSH), on the loop: once a flush is asked for, an fsync
        that takes ``sim.fsync_s`` (its covering everything appended meanwhile: one group commit);
        followers may confirm a record before it ends, and a failed fsync cuts what they confirmed
        (log_failure.py). A stopped process (SIGSTOP) does not fsync."""
        gc = store.group_commit
        asked = asyncio.Event()
        gc.on_request = asked.set                 # called on this loop's thread (every put is made here)
        while self.alive and self.store is store:
            await self.gate()
            if not gc.pending():
                asked.clear()
                await asked.wait()
                continue
            await asyncio.sleep(self.sim.fsync_s)
            await self.flush_open.wait()
            await self.gate()
            if self.alive and self.store is store:
                gc.step()

    async def _pings(self, session) -> None:
        """kazoo's heartbeats: the session lives while the process runs and reaches the coordinator."""
        while self.alive:
            await asyncio.sleep(SESSION_S / 3)
            await self.gate()
            session.ping()

    def kill(self) -> None:
        """kill -9: nothing more runs, the session is left to expire, the page cache survives."""
        self.alive = False
        self.kills += 1
        node = self.node
        node.coordinator.stop()
        if node.client is not None:
            node.client.cancel()
        for t in (self._ping, node._runner, node._isr_task, node._served_task, self._flush_task):
            if t is not None:
                t.cancel()
        self.sim.net.killed(self.name)
        node.coordinator.c.abandon()
        self.store.kill()
        self.fio = self.fio.after_crash()
        self.paused = False
        self._resume.set()

    def pause(self) -> None:
        self.paused = True
        self._resume.clear()

    def resume(self) -> None:
        self.paused = False
        self._resume.set()

    # the broker's side of a send ------------------------------------------------------------------
    async def serve_put(self, msgs: list[Message]) -> tuple:
        """("ok", epoch, at, phys list) | ("refused", reason) | ("unconfirmed",) | ("dead",); a resend
        of messages stored before answered as the broker's send path answers it (produce/resends.py)."""
        await self.gate()
        if not self.alive or self.puts is None:
            return ("dead",)
        clock = self.sim.clock
        store, resends = self.store, self.resends
        ids = [(m.properties or {}).get(codec.PROP_UNIQ_KEY, "") for m in msgs]     # (a script's: none)
        keys = b"".join(resends.key(TOPIC, i) for i in ids)
        found = resends.find(keys, range(len(msgs)), lambda i: TOPIC, lambda i: ids[i])
        self.sim.stats.recognised += len(found)
        if any(isinstance(f, Unconfirmed) for f in found.values()):
            return ("unconfirmed",)                   # in the log, not confirmed yet: never appended again
        todo = [k for k in range(len(msgs)) if k not in found]
        if not todo:
            return ("ok", self.node.epoch, clock.monotonic_s(), [])
        todo_keys = b"".join(dedup.key_at(keys, k) for k in todo)
        try:
            rs = await self.puts.run(store.put_batch, [msgs[k] for k in todo],
                                     on_appended=lambda r: resends.remember_appended(todo_keys, r, None),
                                     on_gone=lambda r: resends.settled_gone(todo_keys, r, None))
        except SimulatedCrash:
            return ("dead",)
        except PutsClosed:                            # a change of role under way: sent again
            return ("refused", "closed")
        if not self.alive or self.store is not store:     # killed while it waited: no answer
            return ("dead",)
        results = [rs[i] for i in range(len(todo))]
        for k, r in zip(todo, results):               # what the send path remembers (send_path._record)
            key = dedup.key_at(keys, k)
            if not any(key):
                continue
            if r.status is PutStatus.PUT_OK:
                resends.remember(key, [r.queue_offset], [r.commitlog_offset], [STORED], {})
            elif r.commitlog_offset >= 0:
                resends.remember_unconfirmed(key, r.status, r.queue_offset, r.commitlog_offset,
                                             r.commitlog_offset + r.size)
        if all(r.status is PutStatus.PUT_OK for r in results):
            return ("ok", self.node.epoch, clock.monotonic_s(), [r.commitlog_offset for r in results])
        if not any(r.status is PutStatus.FLUSH_SLAVE_TIMEOUT for r in results):
            return ("refused", results[0].reason)
        # appended, not yet confirmed: the client resends; the broker answers from store.confirm
        end = max(r.commitlog_offset + r.size for r in results if r.commitlog_offset >= 0)
        deadline = clock.monotonic_s() + CONFIRM_S
        while clock.monotonic_s() < deadline:
            await asyncio.sleep(0.02)
            await self.gate()
            if not self.alive:
                return ("dead",)
            try:
                why = self.store.confirm(end)
            except Exception:  # noqa: BLE001 - the store stopped
                return ("dead",)
            if why is None:
                return ("ok", self.node.epoch, clock.monotonic_s(), [r.commitlog_offset for r in results])
        return ("unconfirmed",)

    def log_bytes(self) -> bytes:
        """The whole commit log, as it is (every member's must be the leader's after healing)."""
        out, off = bytearray(), 0
        while True:
            at, data, _raw, nxt = self.store.replica.read_span(off, 1 << 20)
            if not data:
                return bytes(out)
            if at != off:
                out += b"<%d>" % at                # a jump (past the log's cleaned head)
            out += data                            # as the leader sends it: a segment's end as a BLANK header
            off = nxt


class GroupSim:
    def __init__(self, seed: int, mode: str = "SYNC", duration_s: float = 4.0, chaos: bool = True,
                 min_in_sync: int | None = None, sync_flush: bool | None = None, script=None) -> None:
        """``script``: a coroutine function (sim) -> None run instead of the random chaos (a scripted
        scenario); the run then lasts until it returns."""
        self.seed = seed
        self.mode = mode
        self.rng = random.Random(seed * 7919 + (1 if mode == "SYNC" else 2))
        # which callers go early, and when (its own draws: the others' stay as they were)
        self.gone_rng = random.Random(seed * 15_485_863 + (5 if mode == "SYNC" else 6))
        self.duration_s = duration_s
        self.chaos_on = chaos
        self.script = script
        self.min_in_sync = min_in_sync or (2 if mode == "SYNC" and self.rng.random() < 0.25 else 1)
        self.sync_flush = sync_flush if sync_flush is not None else self.rng.random() < 0.3
        # how long a leader's group commit fsync takes (its own draw: the others' stay as they were)
        self.fsync_s = random.Random(seed * 104_729 + 3).choice((0.0002, 0.001, 0.004, 0.015))
        # how long the coordination takes in this run (its own draws: the others' stay as they were)
        timing = random.Random(seed * 1_000_003 + 17)
        lags = script is None
        self.zk_tick_s = timing.choice(ZK_TICK_S) if lags else 0.0
        self.notify_s_max = timing.choice(NOTIFY_S_MAX) if lags else 0.0
        self.step_s_max = timing.choice(STEP_S_MAX) if lags else 0.0
        self.apply_s_max = timing.choice(APPLY_S_MAX) if lags else 0.0
        self.zk_write_s_max = timing.choice(ZK_WRITE_S_MAX) if lags else 0.0
        self.send_s_max = timing.choice(SEND_S_MAX) if lags else 0.0
        self.lag_rng = random.Random(seed * 2_750_159 + 19)    # each event's draw within them
        self.clock = ManualClock()
        self.coord = EpochRecorder(self.clock, self._epoch_began)
        self.coord.tick_s = self.zk_tick_s
        self.net = MemoryNetwork(self.rng, latency_s=0.0005, jitter_s=self.rng.choice([0.0, 0.002, 0.02]),
                                 reset_rate=self.rng.choice([0.0, 0.0, 0.002]))
        self.members = {n: SimMember(self, n) for n in NAMES}
        for m in self.members.values():
            self.net.add(m)
        if self.send_s_max:
            self.net.send_delay = lambda size: self.lag(self.send_s_max)
        self.stats = Stats()
        self.acks: dict[int, Ack] = {}
        self.bodies: dict[int, bytes] = {}
        self.served: dict[int, int] = {}            # commit-log offset -> id, as consumers were served
        self.trace: list[str] = []
        self._producing = True
        self._undo: list = []                       # (at, fn) fault ends
        self._tasks: list[asyncio.Task] = []

    # helpers -------------------------------------------------------------------------------------
    def now(self) -> float:
        return self.clock.monotonic_s()

    def say(self, text: str) -> None:
        self.trace.append(f"{self.now() - 1000:8.3f} {text}")

    def fail(self, what: str) -> None:
        raise SimFailure(f"seed {self.seed} ({self.mode}, min {self.min_in_sync}, "
                         f"{'SYNC_FLUSH' if self.sync_flush else 'ASYNC_FLUSH'}, lags: tick {self.zk_tick_s} s, "
                         f"notify {self.notify_s_max} s, step {self.step_s_max} s, apply {self.apply_s_max} s, "
                         f"write {self.zk_write_s_max} s, send {self.send_s_max} s): {what}\n"
                         f"replay: python -m tests.sim.group_sim {self.seed}{' --async' if self.mode == 'ASYNC' else ''}"
                         f"\nlast events:\n" + "\n".join(self.trace[-25:]))

    def lag(self, max_s: float) -> float:
        """One event's delay, drawn within this run's bound (0: none)."""
        return self.lag_rng.uniform(0.0, max_s) if max_s else 0.0

    def leaders(self) -> list[SimMember]:
        return [m for m in self.members.values() if m.alive and m.node.leading and not m.node.fenced]

    def writable(self) -> bool:
        for m in self.members.values():
            n = m.node
            if m.alive and not m.paused and n.leading and not n.fenced and n.lease.valid() and \
                    (self.mode == "ASYNC" or len(n.acks.isr) >= self.min_in_sync):
                return True
        return False

    async def until(self, cond, what: str, timeout_s: float = 30.0) -> None:
        """Wait (virtual time) until ``cond()``; a failure after ``timeout_s``."""
        deadline = self.now() + timeout_s
        while not cond():
            if self.now() > deadline:
                self.fail(f"not within {timeout_s} s: {what}")
            await asyncio.sleep(0.01)

    def isr(self) -> list[str] | None:
        return self.coord.isr_history[-1][2] if self.coord.isr_history else None

    def _epoch_began(self, epoch: int) -> None:
        self.stats.elections += 1
        self.say(f"epoch {epoch} begins")
        for m in self.members.values():
            if m.alive and m.node is not None and m.node.leading and m.node.lease.valid():
                self.fail(f"epoch {epoch} began while {m.name} (epoch {m.node.epoch}) held a valid lease")

    # the run -------------------------------------------------------------------------------------
    def run(self, quiet: bool = True) -> "GroupSim":
        """One run; ``quiet``: the group's log is not written (thousands of lines per run: a failure
        says its seed, replay it with the log: ``python -m tests.sim.group_sim SEED``)."""
        logger = logging.getLogger("tidemq")
        level = logger.level
        if quiet:
            logger.setLevel(logging.CRITICAL)
        # the dedup window's SipHash key is drawn at random per process (produce/dedup.py): seeded here
        # like every other draw, else a seed's run depends on it and cannot be replayed
        keys = dedup.KEY, resends.KEY
        dedup.KEY = resends.KEY = random.Random(self.seed * 31 + 7).randbytes(len(dedup.KEY))
        try:
            run_on_sim_loop(self._main, self.clock)
        finally:
            logger.setLevel(level)
            dedup.KEY, resends.KEY = keys
        return self

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        if self.notify_s_max:
            self.coord.deliver = lambda wake: loop.call_later(self.lag(self.notify_s_max), wake)
        try:
            for m in self.members.values():
                await m.start()
            self._tasks = [loop.create_task(self._producer()), loop.create_task(self._consumer()),
                           loop.create_task(self._watch())]
            if self.script is not None:
                await self.script(self)
            else:
                if self.chaos_on:
                    self._tasks.append(loop.create_task(self._chaos()))
                await asyncio.sleep(self.duration_s)
            self._producing = False
            await self._tasks[0]                                    # the last answer came in
            leader = await self._heal_and_settle()
            self._check(leader)
        finally:
            for t in self._tasks:
                t.cancel()
            for m in self.members.values():
                if m.alive:
                    try:
                        m.kill()
                    except BaseException:  # noqa: BLE001 - teardown
                        pass

    async def _producer(self) -> None:
        rng, seq, target = self.rng, 0, None
        loop = asyncio.get_running_loop()
        again, attempts = None, 0                  # the messages to send again (same ids), and how often sent
        while self._producing:
            await asyncio.sleep(rng.uniform(0.01, 0.08))
            if again is not None and attempts < SEND_ATTEMPTS:
                ids, msgs = again
                n = len(ids)
                attempts += 1
                self.stats.resent += n
            else:
                n = rng.choice((1, 1, 1, 2, 5))
                ids = list(range(seq, seq + n))
                seq += n
                msgs = []
                for i in ids:
                    body = b"%d|" % i + rng.randbytes(rng.choice((10, 100, 600)))
                    self.bodies[i] = body
                    msgs.append(Message(TOPIC, body, properties={codec.PROP_UNIQ_KEY: "sim-%d" % i}))
                self.stats.sent += n
                attempts = 1
            again = (ids, msgs)                    # until answered ok
            live = [m for m in self.members.values() if m.alive]
            m = target if target is not None and target.alive else (rng.choice(live) if live else None)
            if m is None:
                continue
            task = loop.create_task(m.serve_put(msgs))     # the request reaches the member, answered or not
            early = self.gone_rng.random() < GONE_RATE
            try:
                res = await asyncio.wait_for(asyncio.shield(task), self.gone_rng.uniform(*GONE_AFTER_S)
                                             if early else CLIENT_TIMEOUT_S)
            except asyncio.TimeoutError:
                self.stats.no_answer += n
                if early:
                    self.stats.gone += n
                self._call_cancelled(m, task)
                target = None
                continue
            if res[0] == "ok":
                _, epoch, at, phys = res
                for i in ids:
                    if i not in self.acks:
                        self.acks[i] = Ack(i, m.name, epoch, at, resend=not phys)
                self.stats.acked += n
                target = m
                again = None
            else:
                if res[0] == "refused":
                    self.stats.refused += n
                elif res[0] == "unconfirmed":
                    self.stats.unconfirmed += n
                else:
                    self.stats.no_answer += n
                # the next try goes where this member's leader port would forward it (the leader it knows)
                ep = m.node.leader_endpoint if m.alive and not m.node.leading else ""
                target = self.net.peers.get(ep) if ep else None

    def _call_cancelled(self, m: SimMember, task: asyncio.Task) -> None:
        """A caller went: its call is cancelled at the member (gRPC cancels the handler), once the
        member runs (a stopped one: when it is resumed, after what it was doing)."""
        async def cancel() -> None:
            await m.gate()
            task.cancel()
        self._tasks.append(asyncio.get_running_loop().create_task(cancel()))

    async def _consumer(self) -> None:
        """Reads from any running member, each queue from where it left off, what its store serves
        (SYNC: the store stops at the high watermark itself: node.read_limit through
        store.set_commit_limit; a record served past it fails the run)."""
        rng = self.rng
        cursor = [0] * QUEUES
        while True:
            await asyncio.sleep(rng.uniform(0.05, 0.3))
            live = [m for m in self.members.values() if m.alive and not m.paused]
            if not live:
                continue
            m = rng.choice(live)
            q = rng.randrange(QUEUES)
            try:
                g = m.store.get("sim", TOPIC, q, cursor[q], max_count=16)
            except Exception:  # noqa: BLE001 - the store stopped meanwhile
                continue
            limit = m.node.read_limit()
            if g.status is not GetStatus.FOUND:
                continue
            for msg in g.messages:
                if limit is not None and msg.commitlog_offset + msg.store_size > limit:
                    self.fail(f"{m.name} served offset {msg.commitlog_offset} past its high watermark {limit}")
                i = int(bytes(msg.body).split(b"|", 1)[0])
                phys = msg.commitlog_offset
                if phys in self.served and self.served[phys] != i and self.mode == "SYNC":
                    self.fail(f"offset {phys} served as message {self.served[phys]}, later as {i}")
                self.served[phys] = i
                self.stats.served += 1
                cursor[q] = msg.queue_offset + 1

    async def _watch(self) -> None:
        """The longest time no member could take a write."""
        since = None
        while True:
            await asyncio.sleep(0.05)
            if not self._producing:
                return
            if self.writable():
                if since is not None:
                    self.stats.unwritable_s_max = max(self.stats.unwritable_s_max, self.now() - since)
                since = None
            elif since is None:
                since = self.now()

    # faults --------------------------------------------------------------------------------------
    def _later(self, delay_s: float, fn) -> None:
        async def go():
            await asyncio.sleep(delay_s)
            fn()
        self._undo.append(fn)
        self._tasks.append(asyncio.get_running_loop().create_task(go()))

    async def _chaos(self) -> None:
        rng = self.rng
        await asyncio.sleep(rng.uniform(0.5, 1.5))
        while self._producing:
            leader = next(iter(self.leaders()), None)
            live = [m for m in self.members.values() if m.alive]
            pick = leader if leader is not None and rng.random() < 0.6 else rng.choice(list(self.members.values()))
            r = rng.random()
            if r < 0.18:
                if pick.alive:
                    self.say(f"kill {pick.name}")
                    self.stats.faults.append("kill")
                    pick.kill()
                    delay = rng.uniform(0.3, 3.0)
                    self._tasks.append(asyncio.get_running_loop().create_task(self._restart(pick, delay)))
            elif r < 0.36:
                if pick.alive and not pick.paused:
                    d = rng.choice((0.2, 1.0, SESSION_S * 1.5, SESSION_S * 3))
                    self.say(f"pause {pick.name} for {d:.2f} s")
                    self.stats.faults.append("pause")
                    pick.pause()
                    self._later(d, pick.resume)
            elif r < 0.52:
                a, b = rng.sample(NAMES, 2)
                d = rng.uniform(0.2, 4.0)
                self.say(f"cut {a}-{b} for {d:.2f} s")
                self.stats.faults.append("cut link")
                self.net.cut(a, b)
                self._later(d, lambda a=a, b=b: self.net.heal(a, b))
            elif r < 0.68:
                d = rng.uniform(0.2, 4.0)
                self.say(f"cut {pick.name} from the coordinator for {d:.2f} s")
                self.stats.faults.append("cut coordinator")
                self.coord.cut(pick.name)
                self._later(d, lambda n=pick.name: self.coord.heal(n))
            elif r < 0.78:
                if leader is not None:
                    d = rng.uniform(0.5, 4.0)
                    self.say(f"isolate the leader {leader.name} for {d:.2f} s")
                    self.stats.faults.append("isolate leader")
                    self.coord.cut(leader.name)
                    for o in NAMES:
                        if o != leader.name:
                            self.net.cut(leader.name, o)

                    def heal(n=leader.name):
                        self.coord.heal(n)
                        for o in NAMES:
                            self.net.heal(n, o)
                    self._later(d, heal)
            elif r < 0.88:
                followers = [m for m in live if not m.node.leading]
                if followers:
                    f = rng.choice(followers)
                    k = rng.randint(1, 40)
                    self.say(f"{f.name}'s disk full for {k} writes")
                    self.stats.faults.append("disk full")
                    f.fio.fail("pwrite", errno.ENOSPC, SEGMENT_FILES, times=k)
            elif r < 0.95:
                if live and self.sync_flush:
                    f = pick if pick.alive else rng.choice(live)       # the leader too: it steps down
                    k = rng.randint(1, 5)
                    self.say(f"{f.name}'s fsync fails {k} time(s)")
                    self.stats.faults.append("fsync error")
                    f.fio.fail("fsync", errno.EIO, SEGMENT_FILES, times=k)
            else:
                a, b = rng.sample(NAMES, 2)
                self.say(f"reset storm {a}-{b}")
                self.stats.faults.append("resets")
                old = self.net.reset_rate
                self.net.reset_rate = 0.05
                self._later(rng.uniform(0.1, 1.0), lambda old=old: setattr(self.net, "reset_rate", old))
            await asyncio.sleep(rng.uniform(0.2, 1.2))

    async def _restart(self, m: SimMember, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        if not m.alive:
            self.say(f"restart {m.name}")
            m.fio.clear_faults()
            await m.start()

    # healing and the checks ------------------------------------------------------------------------
    async def _heal_and_settle(self) -> SimMember:
        for t in self._tasks:
            t.cancel()
        self._tasks = []
        for fn in self._undo:
            fn()
        self.net.heal_all()
        self.net.reset_rate = 0.0
        for m in self.members.values():
            self.coord.heal(m.name)
            if m.alive:
                m.resume()
                m.fio.clear_faults()
                if m.store.log_failures:
                    # its commit log failed: its directory takes nothing more until a restart
                    # (store/log_failure.py), as an operator would restart it
                    self.say(f"restart {m.name} (its commit log failed)")
                    m.kill()
                    await m.start()
            else:
                m.fio.clear_faults()
                await m.start()
        self.say("healed")
        deadline = self.now() + SETTLE_S
        while self.now() < deadline:
            await asyncio.sleep(0.25)
            leaders = self.leaders()
            if len(leaders) != 1:
                continue
            lead = leaders[0]
            others = [m for m in self.members.values() if m is not lead]
            if lead.node.lease.valid() and all(
                    not o.node.leading and o.node.leader_endpoint == lead.endpoint
                    and o.store.replica.end == lead.store.replica.end for o in others) \
                    and lead.node.acks.isr == {o.name for o in others}:
                return lead
        states = {m.name: (m.alive, m.node.role, m.node.epoch, m.node.leader_endpoint, m.store.replica.end,
                           sorted(m.node.acks.isr), m.node.coordinator.state) for m in self.members.values()}
        self.fail(f"the group did not settle within {SETTLE_S} s after healing: {states}")

    def _check(self, lead: SimMember) -> None:
        st = self.stats
        want = lead.log_bytes()
        for m in self.members.values():
            if m is not lead and m.log_bytes() != want:
                self.fail(f"{m.name}'s log differs from the leader {lead.name}'s after healing")
        final: dict[int, int] = {}
        count: dict[int, int] = {}
        for kind, phys, size, mf, pos in lead.store.commit_log.iter_records(0, verify_crc=True):
            if kind != codec.REC_OK:
                continue
            msg = codec.decode_record(mf.mapping, pos, size)
            if msg.topic != TOPIC:
                continue
            i = int(bytes(msg.body).split(b"|", 1)[0])
            if bytes(msg.body) != self.bodies.get(i):
                self.fail(f"message {i} at {phys} is not what was sent")
            final[phys] = i
            count[i] = count.get(i, 0) + 1
        st.twice = sum(1 for c in count.values() if c > 1)
        if st.twice:
            self.fail(f"{st.twice} message(s) stored twice: {[i for i, c in count.items() if c > 1][:10]}")
        lost = sorted(i for i in self.acks if i not in count)
        st.lost = len(lost)
        if lost and self.mode == "SYNC":
            self.fail(f"{len(lost)} acknowledged message(s) lost: {lost[:10]} "
                      f"(acked by {[(self.acks[i].member, self.acks[i].epoch) for i in lost[:3]]})")
        began = self.coord.began
        for a in self.acks.values():
            if a.resend:
                continue            # confirmed when it was first stored (the window holds only those)
            newer = [e for e, t in began.items() if e > a.epoch and t <= a.at_s]
            if newer:
                st.older_epoch_acks += 1
        if st.older_epoch_acks:
            self.fail(f"{st.older_epoch_acks} write(s) acknowledged by a leader of an older epoch after a newer one began")
        cut = [p for p, i in self.served.items() if final.get(p) != i]
        st.served_then_cut = len(cut)
        if cut and self.mode == "SYNC":
            self.fail(f"{len(cut)} record(s) served to consumers were later cut: offsets {sorted(cut)[:10]}")


def totals(seeds: range, mode: str) -> dict:
    """The figures of many runs: sums of the counts, the longest time without a writable leader, and
    the seeds that failed (with the first line of why)."""
    out = {"mode": mode, "runs": 0, "sent": 0, "acked": 0, "resent": 0, "gone": 0, "recognised": 0, "lost": 0,
           "twice": 0,
           "older_epoch_acks": 0,
           "served": 0, "served_then_cut": 0, "elections": 0, "unwritable_s_max": 0.0, "failed": {}}
    for seed in seeds:
        sim = GroupSim(seed, mode)
        try:
            sim.run()
        except SimFailure as e:
            out["failed"][seed] = str(e).splitlines()[0]
        st = sim.stats
        out["runs"] += 1
        for k in ("sent", "acked", "resent", "gone", "recognised", "lost", "twice", "older_epoch_acks", "served",
                  "served_then_cut", "elections"):
            out[k] += getattr(st, k)
        out["unwritable_s_max"] = round(max(out["unwritable_s_max"], st.unwritable_s_max), 3)
    return out


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--seeds":
        # python -m tests.sim.group_sim --seeds 300 [--from K] [--async]: the figures of seeds K..K+N-1
        # (K: 0 unless given; several processes over different ranges)
        first = int(argv[argv.index("--from") + 1]) if "--from" in argv else 0
        print(json.dumps(totals(range(first, first + int(argv[1])), "ASYNC" if "--async" in argv else "SYNC")))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    seed = int(argv[0])
    sim = GroupSim(seed, "ASYNC" if "--async" in argv else "SYNC")
    try:
        sim.run(quiet=False)
    finally:
        print("\n".join(sim.trace))
    print(f"seed {seed}: ok, {sim.stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
