"""Leader election, leases and epochs on ZooKeeper (kazoo): automatic failover of a broker group.

No consensus of our own: ZooKeeper's sessions are the leases, its ephemeral nodes the holders,
a node's version the compare-and-set that makes epochs unique. Under the coordinator's chroot
(``coordinator = "HOST:PORT[,...]/chroot"``, default ``/tidemq``)::

    /groups/<group>/epoch            persistent: the group's last epoch (a decimal); taking the
                                     lease sets it to +1 with the version read (compare-and-set)
    /groups/<group>/leader           ephemeral: {"member", "endpoint", "leader_endpoint", "epoch"},
                                     the lease: it goes with its holder's session
    /groups/<group>/members/<id>     ephemeral per live member: {"endpoint", "leader_endpoint",
                                     "log_end", "round"}: who is there, and (during an election) how
                                     far each member's log goes
    /groups/<group>/isr              persistent, written by the leader: {"epoch", "members"}: the
                                     leader and the followers in sync (acks.py); only they may
                                     take the lease after it
    /topics/<topic>                  persistent: {"queues": N, "owners": {group: [queue ids]}}: the
                                     cluster's topology (several groups, one topic: cluster.py)

The election, on the leader node's deletion (its session expired: killed, cut off, stopped): every
live member posts its log end for this round (the epoch the leader node had); after
``election_wait_ms``, or once every live member posted, the member with the longest log among
those in the last ISR (ties: the smallest id) sets the epoch to +1 (compare-and-set) and creates
the leader node; the others follow it. A member that never sees the new leader node try again.
The new leader appends (epoch, its log end) to its epoch file; a returning old leader finds a
newer epoch, cuts what diverged (follower.py) and follows.

Fencing: while this broker's session is suspended (the connection lost; the lease may be gone
without it knowing) a leader refuses every write and closes its leader port; back connected with
the leader node still its own, it takes writes again; the session lost, it follows whoever leads.
Everything here runs on one thread of its own (``tidemq-coordinator``); kazoo's callbacks only
wake it; changes of role go to the broker's loop (node.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

log = logging.getLogger("tidemq.broker")

STEP_S = 0.2                  # the coordinator thread looks again at least this often


def parse(coordinator: str) -> tuple[str, str]:
    """('HOST:PORT,...', '/chroot') of a coordinator setting."""
    hosts, slash, chroot = coordinator.partition("/")
    return hosts, ("/" + chroot.strip("/")) if slash and chroot.strip("/") else "/tidemq"


class ZkCoordinator:
    def __init__(self, node, loop: asyncio.AbstractEventLoop) -> None:
        from kazoo.client import KazooClient
        self.node = node
        self.loop = loop
        cfg = node.config
        hosts, self.base = parse(cfg.coordinator)
        self.group_path = f"{self.base}/groups/{node.group}"
        self.timeout_s = cfg.coordinator_session_timeout_ms / 1000
        self.zk = KazooClient(hosts=hosts, timeout=self.timeout_s,
                              connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 1.5, "max_delay": 1.0},
                              command_retry={"max_tries": 3, "delay": 0.05, "backoff": 2, "max_delay": 0.5})
        self.state = "new"
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._members: dict[str, dict] = {}
        self._isr_written: tuple | None = None
        self._member_created_for = None     # the session our member node belongs to
        self.elections = 0
        self.topology: dict[str, dict] = {}      # topic -> {"queues", "owners": {group: [queue ids]}}
        self.groups: dict[str, dict] = {}        # group -> {"leader", "members"}: other groups, for routes
        self._applied: dict[str, tuple] = {}     # topic -> (queues, owned) made local
        self._topics_due = 0.0

    # lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.zk.add_listener(self._listener)
        self.zk.start(timeout=max(30.0, self.timeout_s))
        self.state = "connected"
        for p in ("members", ""):
            self.zk.ensure_path(f"{self.group_path}/{p}".rstrip("/"))
        self.zk.ensure_path(f"{self.base}/topics")
        if not self.zk.exists(f"{self.group_path}/epoch"):
            try:
                self.zk.create(f"{self.group_path}/epoch", b"0")
            except Exception:  # noqa: BLE001 - another member made it first
                pass
        self._thread = threading.Thread(target=self._run, name="tidemq-coordinator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        try:
            self.zk.stop()          # our ephemeral nodes (the lease, the member) go at once
            self.zk.close()
        except Exception:  # noqa: BLE001 - stopping
            pass

    def _listener(self, state) -> None:
        self.state = str(state).lower()
        self._wake.set()

    # the thread ---------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(STEP_S)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._step()
            except Exception as e:  # noqa: BLE001 - the coordinator thread must go on
                log.warning("coordinator: %r (trying again)", e)
                self._stop.wait(STEP_S)

    def _call(self, coro, timeout_s: float = 120.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=timeout_s)

    def _step(self) -> None:
        from kazoo.protocol.states import KazooState
        node = self.node
        if self.zk.state != KazooState.CONNECTED:
            if node.leading and not node.fenced:
                self._call(node.fence(f"the coordinator's session is {str(self.zk.state).lower()}: this broker "
                                      f"cannot tell whether it still holds its lease"))
            return
        self._ensure_member()
        if time.monotonic() >= self._topics_due:
            self._topics_due = time.monotonic() + 1.0
            self._sync_topology()
        leader = self._leader()
        if leader is not None:
            data, owner = leader
            if owner == self.zk.client_id[0] and data.get("member") == node.member:
                if node.leading and node.fenced:
                    self._call(node.unfence())
                elif not node.leading:        # a lease of ours that we do not act on: give it up
                    self._delete_leader()
                    return
                self._write_isr()
                return
            if data.get("member") == node.member:
                # the lease of this broker's previous process (killed; its session not expired yet):
                # nobody serves it; wait for it to go, then elect
                if node.leading or node.leader_endpoint:
                    self._call(node.follow(""))
                return
            if node.leading or node.leader_endpoint != data.get("endpoint"):
                self._call(node.follow(str(data.get("endpoint", "")), int(data.get("epoch", 0))))
            return
        if node.leading:
            # our lease is gone (the session expired and came back): step down, then elect
            self._call(node.follow(""))
        self._elect()

    def _ensure_member(self) -> None:
        from kazoo.exceptions import NodeExistsError
        sid = self.zk.client_id[0]
        path = f"{self.group_path}/members/{self.node.member}"
        if self._member_created_for == sid and self.zk.exists(path):
            return
        data = self._member_data(round_=-1)
        try:
            self.zk.create(path, data, ephemeral=True)
        except NodeExistsError:
            # a node of our previous session (not expired yet): replace it
            try:
                self.zk.delete(path)
                self.zk.create(path, data, ephemeral=True)
            except Exception:  # noqa: BLE001 - tried again at the next step
                return
        self._member_created_for = sid

    def _member_data(self, round_: int) -> bytes:
        n = self.node
        return json.dumps({"endpoint": n.endpoint, "leader_endpoint": n.leader_port_endpoint,
                           "log_end": n.store.replica.end, "round": round_}).encode()

    def _leader(self) -> tuple[dict, int] | None:
        got = self.zk.exists(f"{self.group_path}/leader", watch=lambda _e: self._wake.set())
        if got is None:
            return None
        try:
            raw, stat = self.zk.get(f"{self.group_path}/leader")
        except Exception:  # noqa: BLE001 - gone meanwhile
            return None
        try:
            return json.loads(raw), stat.ephemeralOwner
        except ValueError:
            return {}, stat.ephemeralOwner

    def _delete_leader(self) -> None:
        try:
            self.zk.delete(f"{self.group_path}/leader")
        except Exception:  # noqa: BLE001 - gone already
            pass

    def _read_members(self) -> dict[str, dict]:
        out = {}
        base = f"{self.group_path}/members"
        for m in self.zk.get_children(base, watch=lambda _e: self._wake.set()):
            try:
                raw, _ = self.zk.get(f"{base}/{m}")
                out[m] = json.loads(raw)
            except Exception:  # noqa: BLE001 - gone meanwhile, or not ours
                continue
        self._members = out
        return out

    def _isr(self) -> list[str] | None:
        try:
            raw, _ = self.zk.get(f"{self.group_path}/isr")
            return list(json.loads(raw)["members"])
        except Exception:  # noqa: BLE001 - none yet: every member may lead
            return None

    def _write_isr(self) -> None:
        node = self.node
        members = [node.member] + sorted(f["member"] for f in node.acks.status() if f["in_sync"])
        want = (node.epoch, tuple(members))
        if want == self._isr_written:
            return
        doc = json.dumps({"epoch": node.epoch, "members": members}).encode()
        path = f"{self.group_path}/isr"
        if self.zk.exists(path):
            self.zk.set(path, doc)
        else:
            self.zk.create(path, doc)
        self._isr_written = want
        self._read_members()

    def _elect(self) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError
        node = self.node
        raw, stat = self.zk.get(f"{self.group_path}/epoch")
        epoch = int(raw or b"0")
        me = node.member
        self.zk.set(f"{self.group_path}/members/{me}", self._member_data(epoch))
        deadline = time.monotonic() + node.config.election_wait_ms / 1000
        while True:
            members = self._read_members()
            posted = {m: d for m, d in members.items() if d.get("round") == epoch}
            if len(posted) == len(members) or time.monotonic() >= deadline:
                break
            if self._stop.wait(0.05) or self._leader() is not None:
                return
        isr = self._isr()
        eligible = {m: d for m, d in posted.items() if isr is None or m in isr}
        if not eligible:
            log.error("broker group %s: no member of the last ISR (%s) is alive: no leader is elected (a leader "
                      "would lose acknowledged messages; start one of them, or promote by hand)", node.group, isr)
            self._stop.wait(1.0)
            return
        best = max(eligible, key=lambda m: (int(eligible[m].get("log_end", 0)), [-ord(c) for c in m]))
        if best != me:
            # the best one takes the lease; if it does not within a while, elect again
            end = time.monotonic() + self.timeout_s + node.config.election_wait_ms / 1000 + 2.0
            while time.monotonic() < end and not self._stop.is_set():
                if self._leader() is not None:
                    return
                self._stop.wait(0.05)
            return
        self.elections += 1
        try:
            self.zk.set(f"{self.group_path}/epoch", str(epoch + 1).encode(), version=stat.version)
        except BadVersionError:
            return                                  # another member moved the epoch: look again
        doc = {"member": me, "endpoint": node.endpoint, "leader_endpoint": node.leader_port_endpoint,
               "epoch": epoch + 1}
        try:
            self.zk.create(f"{self.group_path}/leader", json.dumps(doc).encode(), ephemeral=True)
        except NodeExistsError:
            return
        self._call(node.lead(epoch + 1))
        self._isr_written = None
        self._write_isr()

    # several groups, one cluster ----------------------------------------------------------------
    def create_topic(self, name: str, queues: int, groups: list[str]) -> dict:
        """Spread ``name``'s ``queues`` over ``groups`` (queue q to groups[q % len]); kept in the
        coordinator, made local by each group's members within a second."""
        from kazoo.exceptions import NodeExistsError
        owners = {g: [q for q in range(queues) if q % len(groups) == i] for i, g in enumerate(groups)}
        doc = {"queues": queues, "owners": owners}
        path = f"{self.base}/topics/{name}"
        raw = json.dumps(doc).encode()
        try:
            self.zk.create(path, raw)
        except NodeExistsError:
            old = json.loads(self.zk.get(path)[0])
            if old.get("queues", 0) > queues or any(set(old.get("owners", {}).get(g, [])) - set(owners.get(g, []))
                                                    for g in old.get("owners", {})):
                raise ValueError(f"topic {name!r} is spread already ({old}); its queues cannot move or shrink")
            self.zk.set(path, raw)
        self.topology[name] = doc
        self._topics_due = 0.0
        self._wake.set()
        return doc

    def delete_topic(self, name: str) -> bool:
        """Forget a spread topic's entry (`topic delete` once every owning group deleted its part);
        False when there was none."""
        from kazoo.exceptions import NoNodeError
        try:
            self.zk.delete(f"{self.base}/topics/{name}")
        except NoNodeError:
            return False
        self.topology.pop(name, None)
        self._applied.pop(name, None)
        return True

    def _topics(self) -> dict[str, dict]:
        out = {}
        for t in self.zk.get_children(f"{self.base}/topics"):
            d = self._json(f"{self.base}/topics/{t}")
            if isinstance(d, dict):
                out[t] = d
        return out

    def _sync_topology(self) -> None:
        topics = self._topics()
        self.topology = topics
        for t in [t for t in self._applied if t not in topics]:    # forgotten: made again if spread again
            del self._applied[t]
        groups = {}
        for g in self.zk.get_children(f"{self.base}/groups"):
            d = self._group(g)
            groups[g] = {"group": g, "leader": (d["leader"] or {}).get("endpoint", ""),
                         "members": {m: {"endpoint": md.get("endpoint", ""),
                                         "leader_endpoint": md.get("leader_endpoint", "")}
                                     for m, md in d["members"].items()}}
        self.groups = groups
        mine = self.node.group
        for t, doc in topics.items():
            owned = tuple(doc.get("owners", {}).get(mine, ()))
            want = (int(doc.get("queues", 0)), owned)
            if not owned or self._applied.get(t) == want:
                continue
            self._call(self.node.apply_topic(t, want[0], owned))
            self._applied[t] = want

    def route(self, topic: str) -> list[tuple[dict, list[int]]] | None:
        """(group view, its queue ids) per group holding ``topic``, when the topic is spread over the
        cluster; None otherwise (a topic of this group alone)."""
        doc = self.topology.get(topic)
        if doc is None:
            return None
        out = []
        for g, qids in sorted(doc.get("owners", {}).items()):
            view = self.node.view() if g == self.node.group else self.groups.get(g)
            if view is not None and qids:
                out.append((view, list(qids)))
        return out

    # views --------------------------------------------------------------------------------------
    def members(self) -> dict[str, dict]:
        """The live members (as the last look saw them), with their roles."""
        leader = self.node.leader_endpoint
        return {m: {"endpoint": d.get("endpoint", ""), "leader_endpoint": d.get("leader_endpoint", ""),
                    "role": "leader" if d.get("endpoint") == leader else "follower"}
                for m, d in self._members.items()}

    def cluster(self) -> dict:
        """Every group (members, leader, epoch) and every topic's queue owners."""
        groups = {g: self._group(g) for g in self.zk.get_children(f"{self.base}/groups")}
        return {"coordinator": self.node.config.coordinator, "groups": groups, "topics": self._topics()}

    def _json(self, path: str):
        """A node's JSON, or None (gone, or not JSON)."""
        try:
            return json.loads(self.zk.get(path)[0])
        except Exception:  # noqa: BLE001 - gone meanwhile, or not ours
            return None

    def _group(self, g: str) -> dict:
        """A group as the coordinator has it: {"leader", "epoch", "members", "isr"}."""
        gp = f"{self.base}/groups/{g}"
        members = {}
        for m in self.zk.get_children(f"{gp}/members") if self.zk.exists(f"{gp}/members") else ():
            d = self._json(f"{gp}/members/{m}")
            if d is not None:
                members[m] = d
        leader = self._json(f"{gp}/leader") if self.zk.exists(f"{gp}/leader") else None
        epoch = int(self.zk.get(f"{gp}/epoch")[0] or b"0") if self.zk.exists(f"{gp}/epoch") else 0
        return {"leader": leader, "epoch": epoch, "members": members, "isr": self._isr_of(gp)}

    def _isr_of(self, gp: str):
        try:
            return json.loads(self.zk.get(f"{gp}/isr")[0])
        except Exception:  # noqa: BLE001 - none yet
            return None
