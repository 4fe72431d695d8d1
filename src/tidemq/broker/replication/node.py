"""This broker's place in its group: leader (of an epoch) or follower (of a leader), and the
changes between them.

Roles come from the settings (``broker_role``, ``leader_endpoint``: a static group, failover by
hand with ``tidemq replication promote``) or from the coordinator (``coordinator``: ZooKeeper;
coordinator.py, whose ``Action``s :meth:`apply` makes):

* ``lead(epoch)``: the follower's copy stops, the store takes puts again from its log's end as the
  leader of ``epoch`` (its epoch file says where that began), with the in-sync set the election
  recorded and a lease from the election's request (lease.py: every write checks it); the host
  builds a leader's services (a broker: its MessagingService from the state files the follower
  kept copying, whose dedup window looks up message ids in the index for
  ``send_dedup_after_restart_s``, and its background tasks).
  Until that service is in place (``installing``) the member says "leader (starting)" and every call
  that reaches its services waits for it (``until_installed``, proxy.py), for what is left of the
  client's deadline, then UNAVAILABLE (retried): none is answered by the follower's service it
  replaces (which would refuse a topic the leader creates, and put nothing: PutsClosed). The same
  while a leader that steps down (``follow``) installs its follower's service: no call is answered by
  the leader's service going (which would create a topic in a store that now follows).
* ``follow(endpoint)``: the store refuses puts (NOT_LEADER, naming the leader), the host serves
  reads as a follower, and the copy starts (follower.py: it first cuts what diverged).
* ``fence(why)``: a leader whose coordinator session is suspended refuses every write at once and
  closes its leader port (clients connected through it move to another member's); ``unfence()``
  when the session comes back with the lease still its own.

What a node needs of the process it runs in is ``Host`` (the Broker; the simulation's stand-in):
the store, the services to build for a role, the leader port. What it needs of the network is a
``Transport`` (transport.py) and, with automatic failover, a ``Coordinator`` (coordination.py).
Time is read through the Clock seam only.

The leader port (forward.py) is served by this broker's services while it leads, forwarded to the
leader while it follows, closed while it is fenced.

Reads: under SYNC replication consumers are served only up to the high watermark (what every
member of the in-sync set has: acks.hw on the leader, the last frame's on a follower), so that no
failover takes back what a consumer saw (``read_limit``, the store's commit limit: every read path
stops there, and long polls are woken when it moves); a lower bound of it is kept on disk for readers
of the files (served_end.py: Spark's file mode). ASYNC replication serves the whole log: a
failover takes back what the new leader had not copied, and a consumer may have seen it.

A failure of this member's own commit log (store/log_failure.py, ``store.on_log_failed``): a leader
acknowledges nothing more and steps down (coordinator.py: it leaves the recorded set and gives up
its lease), or alone leads a new epoch beginning at the cut; a follower is recorded as not electable
until its copy, started over, has the high watermark again (follower.py).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Protocol

from ...config import ReplicationConfig
from ...io import Clock, SystemClock
from ...said import Conditions, kind_of
from ..protection.members import MemberCredentials
from .acks import ReplicaAcks
from .coordinator import Action, GroupCoordinator
from .follower import ReplicationClient
from .leader import ReplicationServer
from .lease import Lease
from .served_end import INTERVAL_S as SERVED_END_INTERVAL_S, ServedEnd, forget as forget_served_end
from .transport import GrpcTransport, Transport

log = logging.getLogger("tidemq.broker")

ISR_LOOK_S = 0.5          # a send waiting for the in-sync set looks again this often (members come and go)


class Host(Protocol):
    """What a ReplicationNode needs of the process it runs in."""

    store: Any                    # the MessageStore
    service: Any                  # the MessagingService the state copy reads (leader) and writes (follower), or None

    @property
    def endpoint(self) -> str: ...

    async def activate(self, leading: bool) -> None:
        """Build the services of this role (a leader's: its background tasks too)."""
        ...

    async def leader_port(self, open_: bool) -> None:
        """Serve the leader port, or stop serving it."""
        ...


class ReplicationNode:
    def __init__(self, host: Host, config: ReplicationConfig, clock: Clock | None = None,
                 transport: Transport | None = None, coordination=None, coordinator_thread: bool = True) -> None:
        """``coordination``: the Coordinator to elect through (None: ZooKeeper, from ``coordinator``);
        ``coordinator_thread``: step it on a thread (a blocking client: ZooKeeper) or on the loop."""
        self.host = host
        self.config = config
        self.clock = clock or SystemClock()
        self.transport = transport or GrpcTransport(lambda: MemberCredentials.of(self))
        self.group = config.broker_group
        self.store = host.store
        automatic = bool(config.coordinator) or coordination is not None
        self.lease = Lease(self.clock, config.leader_lease_ratio, config.coordinator_session_timeout_ms / 1000) \
            if automatic else None
        self._failures_at_lead = 0        # the log's failures (commit_log.failures) before the epoch it leads
        self.acks = ReplicaAcks(config.sync, config.in_sync_replicas_min, config.replication_timeout_ms,
                                config.replica_lag_time_max_ms, lambda: self.store.replica.end, self.clock, self.lease,
                                self._leader_durable)
        self.epoch = 0                    # the epoch this broker leads (0: it does not)
        self.known_epoch = self.store.epochs.last_epoch
        self.hw_known = 0                 # the high watermark as the leader's last frame said (a follower)
        self.leading = False
        self.fenced: str | None = None
        self.leader_endpoint = ""         # the leader's endpoint (this broker's own while it leads)
        self.client: ReplicationClient | None = None
        self.server = ReplicationServer(self)
        self._coordination = coordination
        self._coordinator_thread = coordinator_thread
        self.coordinator: GroupCoordinator | None = None
        self._runner: threading.Thread | asyncio.Future | None = None
        self._isr_task: asyncio.Task | None = None
        self.served_end: ServedEnd | None = None      # SYNC: the high watermark's lower bound on disk
        self._served_failures = Conditions(log, "replication: the served end")     # (a disk refusing it)
        self._served_task: asyncio.Task | None = None
        self.members: dict[str, dict] = {}    # the group as this broker knows it: member -> endpoints, role
        self.role_changes = 0
        self._port_open: bool | None = None
        self._lock = asyncio.Lock()
        self.role_changed: asyncio.Event | None = None    # set (and replaced) at each change of role or leader
        self.step_down_wanted = False         # a leader whose log failed: the coordinator's step gives up the lease
        self._loop: asyncio.AbstractEventLoop | None = None
        self._isr_grew: asyncio.Event | None = None   # set (and replaced) when a follower joins the waits
        self._view_ask: asyncio.Future | None = None  # a static follower's Epochs call for routes (shared)
        # while a change of role installs the services of the new role (lead: from the store taking puts
        # until the leader's service is in place; follow: the follower's), set once they are: calls wait
        # for them (``until_installed``: proxy.py) instead of being answered by the services going (a
        # follower's: TOPIC_NOT_FOUND for a topic the leader would create)
        self.installing: asyncio.Event | None = None
        self.install_waits = 0                # calls that came meanwhile and waited for the new role's services

    def _changed(self) -> None:
        """Calls forwarded to a leader this member no longer follows end now (forward.py)."""
        old, self.role_changed = self.role_changed, asyncio.Event()
        if old is not None:
            old.set()

    # who we are ---------------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        return self.host.endpoint

    @property
    def member(self) -> str:
        return self.config.broker_id or self.endpoint

    @property
    def leader_port_endpoint(self) -> str:
        p = self.config.leader_port
        return f"{self.endpoint.rpartition(':')[0]}:{p}" if p else ""

    @property
    def service(self):
        return self.host.service

    @property
    def broker(self):
        """The host, by the name protection/members.py looks its member credentials up under."""
        return self.host

    @property
    def state_dir(self) -> str:
        return self.host.service.state_dir

    @property
    def role(self) -> str:
        """"leader" once this member leads with its leader's service in place ("leader (starting)"
        before: elected, its service being built), "leader (fenced)", or "follower"."""
        if self.leading:
            if self.fenced:
                return "leader (fenced)"
            return "leader (starting)" if self.installing is not None else "leader"
        return "follower"

    async def until_installed(self, timeout_s: float) -> bool:
        """Wait, at most ``timeout_s``, while a change of role installs its services (``installing``: a
        promotion's store may take puts, the leader's service is not in place yet); True: none does
        (any more)."""
        ev = self.installing
        if ev is None:
            return True
        self.install_waits += 1
        try:
            await asyncio.wait_for(ev.wait(), timeout_s)
        except asyncio.TimeoutError:
            return False
        return True

    def log_failed_in_epoch(self) -> bool:
        """The commit log failed (store/log_failure.py) in the epoch this member leads, or a failure's
        cut is under way: it is sealed at its durable end D with a BLANK, and goes on in a new segment,
        but its followers may hold records after D, copied before the fsync failed. Until a new epoch
        (it steps down; a static leader leads one beginning at D) it sends its followers nothing more:
        the BLANK to one and the records to another made two logs in one epoch, whichever then led.
        Read after the log's bytes: a seal a read saw was made while the log was frozen."""
        cl = self.store.commit_log
        if len(cl.failures) > self._failures_at_lead:
            return True
        return cl.frozen and not (cl.failures and cl.failures[-1].resume_offset is None)   # (halted for good: not a cut)

    def _leader_durable(self) -> int:
        """The leader's own part of the high watermark (acks.py): what a fault of it cannot take back,
        and never past the durable end of a failure of its log in the epoch it leads. After the cut the
        flushed offset goes on at the new segment (log_failure.py), but the sealed stretch is not in
        this log: a follower that copied records in it before the fsync failed served them (the high
        watermark moved with the others' confirmations), and a new leader without them took them back."""
        own = self.store.replica.confirmed()          # (read first: a failure is recorded before it moves)
        for f in self.store.commit_log.failures[self._failures_at_lead:]:
            own = min(own, f.durable_end)
        return own

    def read_limit(self) -> int | None:
        """The log offset consumers may be served up to (SYNC: the high watermark), None: no limit."""
        if not self.config.sync:
            return None
        return self.acks.hw if self.leading else self.hw_known

    # lifecycle ----------------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.store.on_log_failed(self._on_log_failed)
        root = self.store.config.root_dir
        if self.config.sync:
            # readers of the files (Spark's file mode) stop where consumers do (served_end.py): the file
            # is there before anything is copied or led
            self.served_end = ServedEnd(self.store.fio, root)
            await asyncio.to_thread(self.served_end.open)
            self._served_task = asyncio.create_task(self._keep_served_end())
        else:
            await asyncio.to_thread(forget_served_end, self.store.fio, root)
        if self.config.sync:
            # consumers (every read path: store/reader.py) stop at the high watermark; a long poll
            # waiting for it looks again whenever it may have moved (the senders' wake-ups: after
            # every append and every move of acks.hw; on a follower, follower.py)
            self.store.set_commit_limit(self.read_limit)
            self.acks.add_waker(self.store.readable_advanced)
        if self.lease is not None:
            c = self._coordination
            base = "/tidemq"
            if c is None:
                from ...config import coordinator as coordinator_address
                from . import zk_address
                from .coord_zk import ZkCoordinator
                addr = coordinator_address.parse(self.config.coordinator)
                base = addr.chroot
                c = ZkCoordinator(addr.hosts, self.config.coordinator_session_timeout_ms / 1000,
                                  zk_address.kazoo_options(addr, self.config.coordinator_password), self.group)
                c.on_granted(self.lease.session_granted)
            keys = MemberCredentials.of(self).keys
            if keys is not None:                    # the group's records signed and checked (coord_signed.py)
                from .coord_signed import SignedCoordinator
                c = SignedCoordinator(c, keys[1], self.group)
            self.coordinator = GroupCoordinator(self, c, self.clock, base)
            await self.follow("")                 # until the election says otherwise
            if self._coordinator_thread:
                await asyncio.to_thread(self.coordinator.start)
                self._runner = threading.Thread(target=self.coordinator.run_thread, name="tidemq-coordinator",
                                                args=(self.apply, asyncio.get_running_loop()), daemon=True)
                self._runner.start()
            else:
                self.coordinator.start()
                self._runner = asyncio.ensure_future(self.coordinator.run_loop(self.apply, self.gate))
        elif self.config.broker_role == "leader":
            await self.lead(max(1, self.store.epochs.last_epoch))
        else:
            await self.follow(self.config.leader_endpoint)

    async def _keep_served_end(self) -> None:
        """SYNC: the high watermark's lower bound on disk (served_end.py), at most once a second."""
        while True:
            await asyncio.sleep(SERVED_END_INTERVAL_S)
            await asyncio.to_thread(self._save_served_end)

    async def cut_served_end(self, end: int) -> None:
        """This log is cut back to ``end`` (follower.py, before it cuts, ``hw_known`` lowered first: a save
        running meanwhile reads it after the cut): the served end on disk never past it. Raises
        OSError when it cannot be written (the copy does not go on: readers of the files would read
        the new leader's records past it as confirmed)."""
        if self.served_end is not None:
            await asyncio.to_thread(self.served_end.cut, end)

    def _save_served_end(self) -> None:
        if self.served_end is None:
            return
        try:
            self.served_end.save(self.read_limit)
        except OSError as e:              # the next round writes it again; readers read less meanwhile
            self._served_failures.failed(kind_of(e), f"could not be written ({e})")
        else:
            self._served_failures.recovered("written again")

    async def gate(self) -> None:
        """Where a paused member would wait (the simulation's hook; nothing here)."""

    async def stop(self) -> None:
        if self.coordinator is not None:
            self.coordinator.stop()
            if isinstance(self._runner, threading.Thread):
                await asyncio.to_thread(self._runner.join, 30)
            elif self._runner is not None:
                self._runner.cancel()
                try:
                    await self._runner
                except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
                    pass
            await asyncio.to_thread(self.coordinator.c.stop)
        if self._isr_task is not None:
            self._isr_task.cancel()
            self._isr_task = None
        if self._served_task is not None:
            self._served_task.cancel()
            self._served_task = None
            await asyncio.to_thread(self._save_served_end)
        if self._view_ask is not None:
            self._view_ask.cancel()
            self._view_ask = None
        if self.client is not None:
            await self.client.stop()
            self.client = None
        self.acks.forget()

    # a failure of this member's own commit log (store/log_failure.py) ----------------------------
    def _on_log_failed(self, failure) -> None:
        """From the thread that found it: the store cut its log back to ``failure.durable_end``. A
        follower may have confirmed what the cut took: it says at once, from this thread, that it may
        not be elected (coordinator.py), until its copy has the high watermark again (follower.py)."""
        if self.leading:
            if self.coordinator is not None:
                self.step_down_wanted = True      # the coordinator renews the lease no more (coordinator.py)
            if self.lease is not None:
                self.lease.revoke()               # nothing acknowledged from now on (acks.py checks it)
        elif self.coordinator is not None:
            self.coordinator.set_eligible(False)
            if self.client is not None:
                self.client.ineligible = True
        if self._loop is not None:
            self._loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._log_failed(failure)))

    async def _log_failed(self, failure) -> None:
        """A leader whose log was cut back steps down instead of writing on (27.1): records after the
        cut may be on its followers, and within one epoch every member's log must be a prefix of the
        leader's. With a coordinator it leaves the in-sync set (when others are in it) and gives up the
        lease, so that a member of the set is elected; alone (a static group, or the set's only
        member) it leads a new epoch beginning at the cut, and the followers cut what they have
        after it. A follower's next session starts its copy over (follower.py)."""
        if not self.leading:
            return
        log.error("broker group %s: %s's commit log failed (%s): it no longer leads epoch %d", self.group,
                  self.member, failure.error, self.epoch)
        if self.coordinator is not None:
            self.step_down_wanted = True          # the coordinator's next step (coordinator.py)
            self.lease.revoke()                   # (again: a renewal may have come in between)
            self.coordinator.wake()
        else:
            await self.lead(self.epoch + 1, self.acks.isr)

    async def apply(self, a: Action) -> None:
        """Make a change the coordinator asks for (coordinator.py)."""
        if a.kind == "lead":
            await self.lead(a.epoch, a.isr, a.lease_from)
        elif a.kind == "follow":
            await self.follow(a.endpoint, a.epoch)
        elif a.kind == "fence":
            await self.fence(a.why)
        elif a.kind == "unfence":
            await self.unfence()
        elif a.kind == "apply_topic":
            name, queues, owned = a.topic
            await self.apply_topic(name, queues, owned)
            self.coordinator.topology.applied(name, queues, owned)

    # role changes -------------------------------------------------------------------------------
    async def lead(self, epoch: int, isr=(), lease_from: float | None = None) -> None:
        async with self._lock:
            # from here until the leader's service is in place, calls wait for it (``until_installed``)
            self.installing = asyncio.Event()
            try:
                await self._lead(epoch, isr, lease_from)
            finally:
                done, self.installing = self.installing, None
                done.set()
            await self._leader_port(True)
            if self.coordinator is None and self._isr_task is None:
                self._isr_task = asyncio.create_task(self._keep_isr())
            self.store.readable_advanced()        # the high watermark is the leader's now
            log.warning("broker group %s: %s leads, epoch %d, from log offset %d, in-sync set %s", self.group,
                        self.member, epoch, self.store.replica.end, [self.member, *sorted(self.acks.isr)])

    async def _lead(self, epoch: int, isr, lease_from: float | None) -> None:
        """lead()'s steps up to the leader's service in place (under the lock, ``installing`` set)."""
        if self.client is not None:
            await self.client.stop()
            self.client = None
        if self.leading:
            # a new epoch of this leader (its log failed and was cut, or it was elected again): no
            # stream, Epochs answer or put in between names it the leader of an epoch whose start
            # is not recorded yet (a follower asking then would find nothing diverged): its streams
            # end and it is no leader until the epoch is recorded and the store leads in it
            self.leading, self.leader_endpoint = False, ""     # (nobody to forward to meanwhile)
            self._changed()
        isr = tuple(isr)
        self.acks.forget()
        self.acks.set_isr(isr, hw=min(self.hw_known, self.store.replica.end))
        if self.lease is not None and lease_from is not None:
            self.lease.renew(lease_from)
        self.store.writer.replicas = self.acks
        cut = self._sealed_since_epoch()
        if cut is not None and epoch > self.store.epochs.last_epoch:
            # this log was sealed at ``cut`` (a failure of it cut it back there: log_failure.py), in
            # the epoch it was written in: the new epoch begins there, so that a follower holding
            # records after the cut finds them diverged and cuts them (then copies the seal)
            await asyncio.to_thread(self.store.epochs.begin, epoch, cut)
        await asyncio.to_thread(self.store.lead, epoch)
        self._failures_at_lead = len(self.store.commit_log.failures)
        self.epoch = epoch
        self.known_epoch = max(self.known_epoch, epoch)
        self.leading, self.fenced, self.step_down_wanted = True, None, False
        self.leader_endpoint = self.endpoint
        self._changed()
        self.members[self.member] = self._me("leader")
        self.role_changes += 1
        await self.host.activate(leading=True)

    async def follow(self, leader_endpoint: str, epoch: int = 0) -> None:
        async with self._lock:
            was = self.leading or self.host.service is None
            if self.leading:
                self.hw_known = max(self.hw_known, self.acks.hw if self.config.sync else 0)
            self.leading, self.fenced, self.epoch = False, None, 0
            if self.lease is not None:
                self.lease.revoke()
            self.known_epoch = max(self.known_epoch, epoch)
            self.store.follow(self.follower_text(leader_endpoint))
            self.store.writer.replicas = None
            self.acks.forget()
            self.members[self.member] = self._me("follower")
            if was:
                self.role_changes += 1
                self.installing = asyncio.Event()     # (calls wait for the follower's service: until_installed)
                try:
                    await self.host.activate(leading=False)
                finally:
                    done, self.installing = self.installing, None
                    done.set()
            if self.client is not None and self.client.leader_endpoint != leader_endpoint:
                await self.client.stop()
                self.client = None
            if self.leader_endpoint != leader_endpoint or was:
                self._changed()
            self.leader_endpoint = leader_endpoint
            if leader_endpoint and self.client is None:
                self.client = ReplicationClient(self, leader_endpoint)
                self.client.start()
            await self._leader_port(True)
            log.warning("broker group %s: %s follows %s", self.group, self.member, leader_endpoint or "(no leader yet)")

    def _sealed_since_epoch(self) -> int | None:
        """The earliest seal of this log (commit_log.sealed) in its last epoch, or None."""
        sealed = self.store.commit_log.sealed
        if not sealed:
            return None
        entries = self.store.epochs.snapshot()
        since = entries[-1][1] if entries else 0
        at = [start + pos for start, pos in sealed.items() if start + pos >= since]
        return min(at) if at else None

    async def fence(self, why: str) -> None:
        async with self._lock:
            if not self.leading or self.fenced:
                return
            self.fenced = why
            self._changed()
            if self.lease is not None:
                self.lease.revoke()
            self.store.follow(f"fenced: {why}; writes go to the leader the coordinator names")
            await self._leader_port(False)        # clients connected through it move to another member's
            log.error("broker group %s: %s refuses writes: %s", self.group, self.member, why)

    async def unfence(self) -> None:
        async with self._lock:
            if not self.leading or not self.fenced:
                return
            self.fenced = None
            await asyncio.to_thread(self.store.lead, 0)
            await self._leader_port(True)
            log.warning("broker group %s: %s holds its lease again, writes accepted", self.group, self.member)

    async def _leader_port(self, open_: bool) -> None:
        if self._port_open is open_:
            return
        try:
            await self.host.leader_port(open_)
            self._port_open = open_
        except OSError as e:                      # tried again at the next change of role
            self._port_open = None
            log.error("broker group %s: %s the leader port failed: %s", self.group,
                      "opening" if open_ else "closing", e)

    async def promote(self) -> int:
        """Manual failover (no coordinator): lead with an epoch above every one this broker knows."""
        if self.coordinator is not None:
            raise ValueError("this group has a coordinator: it elects the leader (stop the leader to fail over)")
        epoch = max(self.known_epoch, self.store.epochs.last_epoch, self.epoch) + 1
        await self.lead(epoch)
        return epoch

    async def _keep_isr(self) -> None:
        """A static group's in-sync set (no coordinator to record it in): kept here, as the
        coordinator keeps it (laggards out, caught-up followers in)."""
        step_s = min(0.2, self.config.replica_lag_time_max_ms / 4000)
        while True:
            await asyncio.sleep(step_s)
            if not self.leading:
                continue
            for m in self.acks.caught_up():
                if self.acks.include_if_caught_up(m):       # (looked at again under the waits' lock)
                    self.isr_grew()
                    log.warning("broker group %s: %s is in sync", self.group, m)
            lag = self.acks.laggards()
            if lag:
                self.acks.update_isr(exclude=lag)           # all at once
            for m in lag:
                log.warning("broker group %s: %s fell behind (no confirmation of the leader's end within "
                            "replica_lag_time_max_ms=%d): out of the in-sync set", self.group, m,
                            self.config.replica_lag_time_max_ms)

    async def apply_topic(self, name: str, queues: int, owned: tuple[int, ...]) -> None:
        """A topic spread over the cluster (topology.py): here with its queue count, and puts
        without a queue id go to the queues this group owns."""
        await asyncio.to_thread(self.store.create_spread_topic, name, queues, owned)
        log.info("topic %s: %d queue(s) in the cluster, this group owns %s", name, queues, list(owned))

    def spread(self, topic: str) -> tuple[int, tuple[int, ...]] | None:
        """(queues, the ones this group owns) of a topic spread over the cluster, else None."""
        doc = self.coordinator.topics.get(topic) if self.coordinator is not None else None
        if not doc:
            return None
        return int(doc.get("queues", 0)), tuple(doc.get("owners", {}).get(self.group, ()))

    def cluster_route(self, topic: str):
        """coordinator.route(topic), or None without a coordinator."""
        return self.coordinator.route(topic) if self.coordinator is not None else None

    # a send while the in-sync set is short ---------------------------------------------------------
    def in_sync_short(self) -> bool:
        """This SYNC leader's in-sync set holds fewer followers than in_sync_replicas_min: puts are
        refused (HA_NOT_AVAILABLE) until it grows."""
        return self.leading and self.config.sync and len(self.acks.isr) < self.config.in_sync_replicas_min

    def isr_grew(self) -> None:
        """A follower joined the waits (the coordinator's thread or the loop): sends waiting for the
        set (``until_in_sync``) look again."""
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._wake_isr_waiters)
        except RuntimeError:                      # the loop is closed: nobody waits
            pass

    def _wake_isr_waiters(self) -> None:
        old, self._isr_grew = self._isr_grew, None
        if old is not None:
            old.set()

    def _coming_back(self) -> bool:
        """A member outside the in-sync set that may join it soon: a live member of the group the
        coordinator names (after a failover, the others reconnecting; a restarted member on its way),
        or (a static group) a follower connected now."""
        out = set(self.acks.isr) | {self.member}
        if self.coordinator is not None:
            return any(m not in out for m in self.coordinator.members())
        return any(f["connected"] and f["member"] not in out for f in self.acks.status())

    async def until_in_sync(self, timeout_s: float) -> None:
        """A send arriving while the set is short (``in_sync_short``) waits, at most ``timeout_s``,
        while a member may come back into it (``_coming_back``), so that a send right after a
        failover or a restart is taken rather than refused; with nobody to wait for it goes on at
        once. Either way the put itself then follows issue 27's rules: refused below the minimum
        (HA_NOT_AVAILABLE, which the clients retry), acknowledged once every member of the set has
        it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self.in_sync_short() and not self._coming_back() and self.coordinator is not None:
            # a member that registered a moment ago (its watch not heard yet): the members read now,
            # by every such send (sends asking together share one read: coordinator.ask_members). Not
            # rate-limited by time: a member that came back within the limit was refused at once
            await self.fresh_view(min(timeout_s, ISR_LOOK_S))
        while self.in_sync_short() and self._coming_back():
            left = deadline - loop.time()
            if left <= 0:
                return
            if self._isr_grew is None:
                self._isr_grew = asyncio.Event()
            try:
                await asyncio.wait_for(self._isr_grew.wait(), min(left, ISR_LOOK_S))
            except asyncio.TimeoutError:
                pass                              # looked at again: a member may have gone meanwhile

    # what other parts ask ------------------------------------------------------------------------
    def follower_text(self, leader_endpoint: str) -> str:
        who = f"the leader is {leader_endpoint}" if leader_endpoint else "no leader is elected yet"
        return f"not the leader of broker group {self.group!r} ({self.member} follows); {who}"

    def write_refusal(self) -> str | None:
        """Why this broker takes no writes now (it follows, or it is fenced), or None."""
        if self.leading and not self.fenced:
            return None
        if self.fenced:
            return f"fenced: {self.fenced}"
        return self.follower_text(self.leader_endpoint)

    def serving_refusal(self, group: str, epoch: int) -> str | None:
        """Why a follower's stream is refused (None: served)."""
        if not self.leading or self.fenced:
            return self.write_refusal()
        if self.log_failed_in_epoch():
            return f"{self.member}'s commit log failed in epoch {self.epoch}: it sends nothing more and steps down"
        if group and group != self.group:
            return f"this is broker group {self.group!r}, not {group!r}"
        if epoch > self.epoch:
            return f"epoch {epoch} is newer than mine ({self.epoch}): I do not lead any more"
        return None

    def _me(self, role: str) -> dict:
        return {"endpoint": self.endpoint, "leader_endpoint": self.leader_port_endpoint, "role": role}

    def member_seen(self, member: str, hello: dict) -> None:
        self.members[member] = {"endpoint": str(hello.get("endpoint", "")),
                                "leader_endpoint": str(hello.get("leader_endpoint", "")), "role": "follower"}

    def view(self) -> dict:
        """The group: its members' endpoints and roles, the leader, the epoch (routes, status);
        ``complete``: False while the coordinator's members are not known as they are now (before the
        first read, or a change signalled and not read yet: ``fresh_view`` waits for it)."""
        complete = True
        if self.coordinator is not None:
            members = self.coordinator.members()
            complete = self.coordinator.members_fresh()
        else:
            members = dict(self.members)
            if self.leading:
                live = {f["member"] for f in self.acks.status() if f["connected"]}
                members = {m: v for m, v in members.items() if m == self.member or m in live}
        return {"group": self.group, "leader": self.leader_endpoint, "epoch": self.epoch or self.known_epoch,
                "members": members, "complete": complete}

    async def fresh_view(self, timeout_s: float) -> dict:
        """``view()`` with the members the coordinator holds now: read on demand (the coordinator's
        loop reads them at once; routes asking meanwhile share the read), waited for at most
        ``timeout_s`` (the loop may be busy with a change of role); then the last read, when no change
        was signalled since (``complete``: the coordinator's watch says it is still what it holds), else
        ``complete`` False. A static group's follower asks its leader for its view instead."""
        c = self.coordinator
        if c is None:
            if not self.leading and self.leader_endpoint:
                await self._leader_view(timeout_s / 2)     # half: time to answer, the leader gone or not
            return self.view()
        ticket = c.ask_members()
        read = await asyncio.to_thread(c.wait_members, ticket, timeout_s)
        out = self.view()
        out["complete"] = read or out["complete"]
        return out

    async def _leader_view(self, timeout_s: float) -> None:
        """The leader's view for a route: routes asking while an Epochs call is on its way share it
        (one call to the leader for a burst of routes, not one each); each waits for it at most
        ``timeout_s`` (then the last view)."""
        ask = self._view_ask
        if ask is None or ask.done():
            ask = self._view_ask = asyncio.ensure_future(self._ask_leader_view(timeout_s))
        try:
            await asyncio.wait_for(asyncio.shield(ask), timeout_s)
        except asyncio.TimeoutError:
            pass

    async def _ask_leader_view(self, timeout_s: float) -> None:
        """A static group's follower takes its leader's view as it is now (the Epochs answer, as at the
        start of its copy: follower.py), so that its routes name the followers that joined since; a
        leader that does not answer within ``timeout_s`` leaves the view it gave last."""
        from ...protocol import replication as rp
        try:
            async with self.transport.connect(self.leader_endpoint) as ch:
                info = rp.loads(await ch.epochs(timeout_s))
        except Exception as e:  # noqa: BLE001 - unreachable, or not an answer: the last view
            log.debug("replication: the view of the leader at %s: %r", self.leader_endpoint, e)
            return
        if isinstance(info, dict) and info.get("leader") and info.get("group") == self.group:
            self.adopt_view(info.get("view") or {})

    def adopt_view(self, view: dict) -> None:
        """A follower takes the leader's view of the group (static groups)."""
        if self.coordinator is None and isinstance(view.get("members"), dict):
            self.members = {str(m): dict(v) for m, v in view["members"].items() if isinstance(v, dict)}
            self.members[self.member] = self._me("follower")

    def status(self) -> dict:
        out = {"group": self.group, "member": self.member, "role": self.role, "epoch": self.epoch,
               "known_epoch": self.known_epoch, "leader": self.leader_endpoint, "fenced": self.fenced,
               "mode": self.config.replication_mode, "in_sync_replicas_min": self.config.in_sync_replicas_min,
               "log_end": self.store.replica.end, "epochs": self.store.epochs.snapshot(),
               "role_changes": self.role_changes, "install_waits": self.install_waits,
               "coordinator": self.config.coordinator or None,
               "high_watermark": self.acks.hw if self.leading else self.hw_known}
        if self.leading:
            out["followers"] = self.acks.status()
            out["in_sync"] = [self.member, *sorted(self.acks.isr)]
            out["sync_timeouts"] = self.acks.timeouts
            out["sync_refusals"] = self.acks.refusals
            out["lease_refusals"] = self.acks.lease_refusals
        if self.lease is not None:
            out["lease"] = self.lease.status()
        if self.client is not None:
            out["replica"] = self.client.status()
        if self.coordinator is not None:
            out["coordinator_state"] = self.coordinator.state
            out["elections"] = self.coordinator.elections
            out["isr_recorded"] = self.coordinator.isr()
            refused = getattr(self.coordinator.c, "refused", None)      # (signed records: coord_signed.py)
            if refused is not None:
                out["coordinator_records_refused"] = dict(refused)
        return out
