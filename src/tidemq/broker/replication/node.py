"""This broker's place in its group: leader (of an epoch) or follower (of a leader), and the
changes between them.

Roles come from the settings (``broker_role``, ``leader_endpoint``: a static group, failover by
hand with ``tidemq replication promote``) or from the coordinator (``coordinator``: ZooKeeper,
coordinator.py, which calls :meth:`lead`, :meth:`follow`, :meth:`fence`).

* ``lead(epoch)``: the follower's copy stops, the store takes puts again from its log's end as the
  leader of ``epoch`` (its epoch file says where that began), a leader's MessagingService is built
  from the state files the follower kept copying (its dedup window looks up message ids in the
  index for ``send_dedup_after_restart_s``: a producer's retry of a put the old leader stored is
  answered, not stored twice), and its background tasks start.
* ``follow(endpoint)``: the store refuses puts (NOT_LEADER, naming the leader), a follower's
  service serves reads, and the copy starts (follower.py: it first cuts what
  diverged).
* ``fence(why)``: a leader that cannot prove it still holds its lease (the coordinator's session
  is suspended) refuses every put at once; ``unfence()`` when the session comes back with the
  lease still its own.

The leader port (forward.py) is served all the time: by this broker's services while it leads,
forwarded to the leader while it follows.
"""

from __future__ import annotations

import asyncio
import logging

from ...config import ReplicationConfig
from .acks import ReplicaAcks
from .follower import ReplicationClient
from .leader import ReplicationServer

log = logging.getLogger("tidemq.broker")


class ReplicationNode:
    def __init__(self, broker, config: ReplicationConfig) -> None:
        self.broker = broker
        self.config = config
        self.group = config.broker_group
        self.store = broker.store
        self.acks = ReplicaAcks(config.sync, config.in_sync_replicas_min, config.replication_timeout_ms,
                                config.in_sync_lag_bytes_max, lambda: self.store.replica.end)
        self.epoch = 0                    # the epoch this broker leads (0: it does not)
        self.known_epoch = self.store.epochs.last_epoch
        self.leading = False
        self.fenced: str | None = None
        self.leader_endpoint = ""         # the leader's endpoint (this broker's own while it leads)
        self.client: ReplicationClient | None = None
        self.server = ReplicationServer(self)
        self.coordinator = None
        self.members: dict[str, dict] = {}    # the group as this broker knows it: member -> endpoints, role
        self.role_changes = 0
        self._lock = asyncio.Lock()

    # who we are ---------------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        c = self.broker.config
        return c.advertised_endpoint or f"{c.host}:{c.port}"

    @property
    def member(self) -> str:
        return self.config.broker_id or self.endpoint

    @property
    def leader_port_endpoint(self) -> str:
        p = self.config.leader_port
        return f"{self.endpoint.rpartition(':')[0]}:{p}" if p else ""

    @property
    def service(self):
        return self.broker.service

    @property
    def state_dir(self) -> str:
        return self.broker.service.state_dir

    @property
    def role(self) -> str:
        if self.leading:
            return "leader (fenced)" if self.fenced else "leader"
        return "follower"

    # lifecycle ----------------------------------------------------------------------------------
    async def start(self) -> None:
        if self.config.coordinator:
            from .coordinator import ZkCoordinator
            self.coordinator = ZkCoordinator(self, asyncio.get_running_loop())
            await self.follow("")                 # until the election says otherwise
            await asyncio.to_thread(self.coordinator.start)
        elif self.config.broker_role == "leader":
            await self.lead(max(1, self.store.epochs.last_epoch))
        else:
            await self.follow(self.config.leader_endpoint)

    async def stop(self) -> None:
        if self.coordinator is not None:
            await asyncio.to_thread(self.coordinator.stop)
        if self.client is not None:
            await self.client.stop()
            self.client = None
        self.acks.forget()

    # role changes -------------------------------------------------------------------------------
    async def lead(self, epoch: int) -> None:
        async with self._lock:
            if self.client is not None:
                await self.client.stop()
                self.client = None
            self.epoch = epoch
            self.known_epoch = max(self.known_epoch, epoch)
            self.store.writer.replicas = self.acks
            await asyncio.to_thread(self.store.lead, epoch)
            self.leading, self.fenced = True, None
            self.leader_endpoint = self.endpoint
            self.members[self.member] = self._me("leader")
            self.role_changes += 1
            await self.broker.activate(leading=True)
            log.warning("broker group %s: %s leads, epoch %d, from log offset %d", self.group, self.member, epoch,
                        self.store.replica.end)

    async def follow(self, leader_endpoint: str, epoch: int = 0) -> None:
        async with self._lock:
            was = self.leading or self.broker.service is None
            self.leading, self.fenced, self.epoch = False, None, 0
            self.known_epoch = max(self.known_epoch, epoch)
            self.store.follow(self.follower_text(leader_endpoint))
            self.store.writer.replicas = None
            self.acks.forget()
            self.members[self.member] = self._me("follower")
            if was:
                self.role_changes += 1
                await self.broker.activate(leading=False)
            if self.client is not None and self.client.leader_endpoint != leader_endpoint:
                await self.client.stop()
                self.client = None
            self.leader_endpoint = leader_endpoint
            if leader_endpoint and self.client is None:
                self.client = ReplicationClient(self, leader_endpoint)
                self.client.start()
            log.warning("broker group %s: %s follows %s", self.group, self.member, leader_endpoint or "(no leader yet)")

    async def fence(self, why: str) -> None:
        async with self._lock:
            if not self.leading or self.fenced:
                return
            self.fenced = why
            self.store.follow(f"fenced: {why}; writes go to the leader the coordinator names")
            log.error("broker group %s: %s refuses writes: %s", self.group, self.member, why)

    async def unfence(self) -> None:
        async with self._lock:
            if not self.leading or not self.fenced:
                return
            self.fenced = None
            await asyncio.to_thread(self.store.lead, 0)
            log.warning("broker group %s: %s holds its lease again, writes accepted", self.group, self.member)

    async def promote(self) -> int:
        """Manual failover (no coordinator): lead with an epoch above every one this broker knows."""
        if self.coordinator is not None:
            raise ValueError("this group has a coordinator: it elects the leader (stop the leader to fail over)")
        epoch = max(self.known_epoch, self.store.epochs.last_epoch, self.epoch) + 1
        await self.lead(epoch)
        return epoch

    async def apply_topic(self, name: str, queues: int, owned: tuple[int, ...]) -> None:
        """A topic spread over the cluster (coordinator.py): here with its queue count, and puts
        without a queue id go to the queues this group owns."""
        await asyncio.to_thread(self.store.create_spread_topic, name, queues, owned)
        log.info("topic %s: %d queue(s) in the cluster, this group owns %s", name, queues, list(owned))

    def spread(self, topic: str) -> tuple[int, tuple[int, ...]] | None:
        """(queues, the ones this group owns) of a topic spread over the cluster, else None."""
        doc = self.coordinator.topology.get(topic) if self.coordinator is not None else None
        if not doc:
            return None
        return int(doc.get("queues", 0)), tuple(doc.get("owners", {}).get(self.group, ()))

    def cluster_route(self, topic: str):
        """coordinator.route(topic), or None without a coordinator."""
        return self.coordinator.route(topic) if self.coordinator is not None else None

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
        """The group: its members' endpoints and roles, the leader, the epoch (routes, status)."""
        if self.coordinator is not None:
            members = self.coordinator.members()
        else:
            members = dict(self.members)
            if self.leading:
                live = {f["member"] for f in self.acks.status() if f["connected"]}
                members = {m: v for m, v in members.items() if m == self.member or m in live}
        return {"group": self.group, "leader": self.leader_endpoint, "epoch": self.epoch or self.known_epoch,
                "members": members}

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
               "role_changes": self.role_changes, "coordinator": self.config.coordinator or None}
        if self.leading:
            out["followers"] = self.acks.status()
            out["sync_timeouts"] = self.acks.timeouts
            out["sync_refusals"] = self.acks.refusals
        if self.client is not None:
            out["replica"] = self.client.status()
        if self.coordinator is not None:
            out["coordinator_state"] = self.coordinator.state
        return out
