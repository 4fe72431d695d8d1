"""Leader election, the recorded in-sync set, leases and epochs for one broker group, over the
coordinator seam (coordination.py: ZooKeeper for real, coord_zk.py; in one process for tests and
the simulation, tidemq.testing.memory_coordinator).

No consensus of our own: the coordinator's sessions are the leases, its ephemeral nodes the
holders, its versions the compare-and-set that makes epochs unique and keeps the in-sync set
whole. Under the coordinator's chroot (``coordinator = "HOST:PORT[,...]/chroot"``, default
``/tidemq``)::

    /groups/<group>/epoch            persistent: the group's last epoch (a decimal)
    /groups/<group>/leader           ephemeral: {"member", "endpoint", "leader_endpoint", "epoch"}: the
                                     lease; it goes with its holder's session
    /groups/<group>/members/<id>     ephemeral per live member: {"endpoint", "leader_endpoint",
                                     "log_end", "round"}: who is there, and (during an election) how
                                     far each member's log goes
    /groups/<group>/isr              persistent: {"epoch", "members"}: the in-sync set (the leader
                                     first), written only by the leader of that epoch, each change a
                                     compare-and-set on the node's version
    /groups/<group>/ineligible/<id>  persistent: a member whose own log lost what it had confirmed
                                     (its commit log failed: its copy starts over); made before it
                                     drops a byte, removed once it has the high watermark again:
                                     never elected meanwhile, in the set or not
    /topics/<topic>                  the cluster's topology (topology.py)

**The in-sync set** (Kafka's ISR, RocketMQ 5's SyncStateSet) is what makes an acknowledgement
final. The leader's SYNC puts wait for every follower in it (acks.py); a follower that falls behind
(not caught up for ``replica_lag_time_max_ms``) is removed from the *record* first, and only then
do the waits go on without it; one that caught up is added to the waits first, then to the record.
So the record never names a member that lacks an acknowledged message.

**The election**, when the leader node is gone (its session expired: killed, cut off, stopped):
only a live member of the recorded in-sync set may lead, and the election waits for one (never
"the longest log among whoever answered first"). Every live member posts its log end for the
round (the current epoch); after ``election_wait_ms``, or once every live member of the set
posted, the set's member with the longest log (ties: the smallest id) takes the lease in one
transaction: the set's node unchanged since it read it, the epoch +1 (compare-and-set), the leader
node created, the set rewritten for the new epoch (the new leader and the set's live members).
The others follow it; one that never sees the new leader node starts a new round. A fresh group
(no record yet) elects among every live member. The new leader appends (epoch, its log end) to its
epoch file; a returning old leader finds a newer epoch, cuts what diverged (follower.py), follows.

**The lease**: a leader that confirms, at a step, that the leader node is still its own in its
current session renews its lease (lease.py) from the time it sent that request; every write
checks it. A session cannot expire, and so no other member can be elected, before the service
stopped hearing from the leader for the whole session timeout, which is longer than the lease.

**Signed records** (authentication on: coord_signed.py): a record not signed with the group's key is
never acted on: a refused leader record is followed by nobody, a refused member entry is not a member,
a refused in-sync set elects nobody (a refused epoch record is written again by the next election,
from the set's epoch); a leader whose set is refused writes it again from its waits (a watch on it: at the next step). The set and the epoch are written together, with one epoch:
a set older than the epoch record (one written back) elects nobody, an epoch record older than the
set's is gone past (never two leaders of one epoch).

**Fencing**: while the session is suspended (the connection lost) a leader refuses every write at
once and closes its leader port (node.py); back connected with the leader node still its own, it
renews and takes writes again; with the session lost, it follows whoever leads.

``GroupCoordinator.step()`` looks once and answers the changes of role to make (``Action``s); it
never blocks on anything but the coordinator's requests and reads the time only through the Clock
seam. ``run_thread`` drives it on a thread of its own (``tidemq-coordinator``, for ZooKeeper's
blocking client), ``run_loop`` on the event loop (the in-process coordinator); both apply the
actions on the broker's loop (node.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from dataclasses import dataclass
from typing import Awaitable, Callable, NamedTuple

from ...io import Clock
from .coordination import Coordinator, Create, NodeStat, SessionState, SetData, Unreachable
from .coord_signed import RecordRefused
from .coord_zk import parse  # noqa: F401  (the coordinator setting's hosts and chroot: imported from here)
from .topology import Topology

log = logging.getLogger("tidemq.broker")

STEP_S = 0.2                  # the group's loop looks again at least this often


class Action(NamedTuple):
    """A change the node makes (node.apply): lead, follow, fence, unfence, apply_topic."""
    kind: str
    epoch: int = 0
    endpoint: str = ""
    isr: tuple[str, ...] = ()
    lease_from: float | None = None
    why: str = ""
    topic: tuple = ()


@dataclass
class Round:
    epoch: int               # the epoch the round elects a successor of
    started_s: float
    posted: bool = False


@dataclass(frozen=True)
class IsrRecord:
    epoch: int
    members: tuple[str, ...]       # the leader first
    version: int


class GroupCoordinator:
    def __init__(self, node, c: Coordinator, clock: Clock, base: str = "/tidemq") -> None:
        self.node = node
        self.c = c
        self.clock = clock
        self.base = base
        cfg = node.config
        self.group_path = f"{base}/groups/{node.group}"
        self.timeout_s = c.timeout_s
        self.election_wait_s = cfg.election_wait_ms / 1000
        span = node.lease.span_s if node.lease is not None else self.timeout_s / 2
        self.step_s = min(STEP_S, span / 4)        # a few renewals within every lease
        self.state = "new"
        self.elections = 0
        self.topology = Topology(c, base, node)
        self._session = 0
        self._set_up = False
        self._member_ok = False
        self._round: Round | None = None
        self._isr: IsrRecord | None = None         # the leader's view of its record (None: read it)
        self._isr_watched = False                  # the leader watches its record (each change read again)
        self._members: dict[str, dict] = {}
        # the members as routes name them (topology.py, routes.py): read again at the first step after
        # a wake-up (the members' watch fires when one joins or goes, and so does every session state
        # change), not on a timer, and on demand: a route asks for a read (``ask_members``) and waits
        # for one begun after it asked (``wait_members``; routes asking meanwhile share it)
        self._members_due = True
        self._members_reads = 0
        self._members_asked = 0                    # reads asked for (tickets)
        self._members_done = 0                     # the last ticket a finished read covers
        self._members_cv = threading.Condition()
        self._said: str | None = None              # the last "cannot elect" said (said once)
        self._wake_t = threading.Event()
        self._wake_a: asyncio.Event | None = None
        self._stop = threading.Event()
        self.unreachable = 0                       # steps the coordinator could not be reached in
        c.set_waker(self.wake)

    # paths --------------------------------------------------------------------------------------
    def _p(self, name: str) -> str:
        return f"{self.group_path}/{name}"

    def wake(self) -> None:
        self._members_due = True                   # something changed: the members are read again,
        self._isr_watched = False                  # (and the leader's in-sync record: one written by
                                                   # someone else is seen at the next step)
        self.topology.changed()                    # and the cluster's topics and other groups
        self._poke()

    def _poke(self) -> None:
        self._wake_t.set()
        if self._wake_a is not None:
            self._wake_a.set()

    def start(self) -> None:
        """Open the session (blocking) and, when the coordinator answers, the group's nodes and this
        member's (else at the first step that reaches it)."""
        self.c.start()
        self.state = self.c.state.value
        try:
            self._setup()
            self._session = self.c.session_id
            self._ensure_member()
        except Unreachable:
            pass

    def _setup(self) -> None:
        if not self._set_up:
            for p in (self._p("members"), self._p("ineligible"), f"{self.base}/topics"):
                self.c.ensure_path(p)
            self.c.create(self._p("epoch"), b"0")
            self._set_up = True

    def stop(self) -> None:
        self._stop.set()
        self.wake()

    # the step -----------------------------------------------------------------------------------
    def step(self) -> list[Action]:
        """Look once; the changes of role to make. Unreachable when the coordinator cannot be asked
        (a leader is fenced at once then)."""
        node = self.node
        try:
            st = self.c.state
            self.state = st.value
            if st is SessionState.CONNECTED:
                return self._step()
            why = f"the coordinator's session is {st.value}"
        except Unreachable as e:
            self.state = self.c.state.value
            if not node.leading or node.fenced:
                raise
            why = f"the coordinator cannot be reached ({e})"
        if node.leading and not node.fenced:
            return [Action("fence", why=f"{why}: this broker cannot tell whether it still holds its lease")]
        return []

    def _step(self) -> list[Action]:
        c, node = self.c, self.node
        self._setup()
        if c.session_id != self._session:
            self._session, self._member_ok, self._round, self._isr = c.session_id, False, None, None
        self._ensure_member()
        out: list[Action] = []
        now = self.clock.monotonic_s()
        if self.topology.due(now):
            out += [Action("apply_topic", topic=t) for t in self.topology.sync(now)]
        if self._members_due or self._members_asked > self._members_done:
            self._read_members()                    # the group's view (routes name every member)
        sent_at = self.clock.monotonic_s()
        try:
            got = c.get(self._p("leader"), watch=True)
        except RecordRefused as e:
            return out + self._leader_refused(e)
        if got is not None:
            self._round = None
            self._said = None
            data = _json(got.data)
            member, epoch = str(data.get("member", "")), int(data.get("epoch", 0) or 0)
            if member == node.member and got.owner == self._session:
                if not node.leading or node.epoch != epoch:
                    # a lease of ours that we do not act on (lead() failed): give it up, elect again
                    c.delete(self._p("leader"), got.version)
                    return out
                if node.step_down_wanted:
                    if self.step_down():                # its log failed: a member of the set leads
                        node.step_down_wanted = False
                        out.append(Action("follow"))
                    return out
                node.lease.renew(sent_at)
                if node.fenced:
                    out.append(Action("unfence"))
                out += self._keep_isr()
                return out
            if member == node.member:
                # the lease of this member's previous session (a restart; not expired yet): nobody
                # serves it; wait for it to go, then elect
                if node.leading or node.leader_endpoint:
                    out.append(Action("follow"))
                return out
            endpoint = str(data.get("endpoint", ""))
            if node.leading or node.leader_endpoint != endpoint:
                out.append(Action("follow", epoch=epoch, endpoint=endpoint))
            return out
        if node.leading:
            out.append(Action("follow"))        # our lease is gone: step down, then elect
            return out
        out += self._elect()
        return out

    def _leader_refused(self, e: RecordRefused) -> list[Action]:
        """The leader record is not signed by a member (coord_signed.py): nobody is followed for it. A
        record of this member's session overwritten: the lease is given up (deleted: an election); a
        leader whose record is not its own any more steps down, as when its record is gone."""
        if e.owner == self._session and e.owner:
            self.c.delete(e.path, e.version)
        if self.node.leading:
            return [Action("follow", why=str(e))]
        return []

    # members ------------------------------------------------------------------------------------
    def _member_doc(self, round_: int) -> bytes:
        n = self.node
        return json.dumps({"endpoint": n.endpoint, "leader_endpoint": n.leader_port_endpoint,
                           "log_end": n.store.replica.end, "round": round_}).encode()

    def _ensure_member(self) -> None:
        path = self._p(f"members/{self.node.member}")
        if self._member_ok:
            return
        try:
            got = self.c.get(path)
        except RecordRefused as e:                  # overwritten by someone without the keys: made again
            self.c.delete(path, e.version)
            got = None
        if got is not None and got.owner != self._session:
            self.c.delete(path)                     # a node of our previous session (not expired yet)
        if got is None or got.owner != self._session:
            if not self.c.create(path, self._member_doc(-1), ephemeral=True):
                return                              # tried again at the next step
        self._member_ok = True

    def _read_members(self) -> dict[str, dict]:
        base = self._p("members")
        self._members_due = False                   # (a wake-up from now on makes it due again)
        with self._members_cv:
            covers = self._members_asked            # every read asked for until now: this one answers it
        out = {}
        try:
            for m in self.c.children(base, watch=True):
                try:
                    got = self.c.get(f"{base}/{m}")
                except RecordRefused:               # not a member's (coord_signed.py): not one
                    if m == self.node.member:
                        self._member_ok = False     # ours overwritten: made again at the next step
                    continue
                if got is not None:
                    out[m] = _json(got.data)
        except Unreachable:
            self._members_due = True
            raise
        self._members = out
        with self._members_cv:
            self._members_reads += 1
            self._members_done = max(self._members_done, covers)
            self._members_cv.notify_all()
        return out

    def members_fresh(self) -> bool:
        """Whether ``members()`` is what the coordinator held at the last look, with no change
        signalled since (False before the first read, after a watch fired or the session changed)."""
        return self._members_reads > 0 and not self._members_due

    def ask_members(self) -> int:
        """Ask the loop for a read of the members now (from the thread that runs the loop's actions,
        or any thread with ``run_thread``); the ticket ``wait_members`` waits for."""
        with self._members_cv:
            self._members_asked += 1
            ticket = self._members_asked
        self._poke()
        return ticket

    def wait_members(self, ticket: int, timeout_s: float) -> bool:
        """Blocking (a thread): wait at most ``timeout_s`` for a read of the members begun after
        ``ticket`` was asked for; whether one finished (False: the coordinator could not be read)."""
        with self._members_cv:
            return self._members_cv.wait_for(lambda: self._members_done >= ticket, timeout_s)

    def _read_isr(self, watch: bool = False) -> IsrRecord | None:
        got = self.c.get(self._p("isr"), watch)
        if got is None:
            return None
        doc = _json(got.data)
        members = doc.get("members")
        if not isinstance(members, list):
            return None
        return IsrRecord(int(doc.get("epoch", 0) or 0), tuple(str(m) for m in members), got.version)

    # the in-sync set (leader) -------------------------------------------------------------------
    def _keep_isr(self) -> list[Action]:
        """Drop laggards from the record (then from the waits), add caught-up followers (to the
        waits, then to the record): one compare-and-set per change."""
        node, acks = self.node, self.node.acks
        rec = self._isr
        if rec is None or not self._isr_watched:
            self._isr_watched = True
            try:
                rec = self._read_isr(watch=True)
            except RecordRefused as e:
                return self._rewrite_isr(e)
            if rec is None or rec.epoch != node.epoch or not rec.members or rec.members[0] != node.member:
                if rec is not None and rec.epoch > node.epoch:
                    return [Action("follow")]       # a newer epoch recorded its set: we do not lead any more
                return []
            self._reconcile(rec)
            self._isr = rec
        drop = set(acks.laggards())
        # each joins the waits only if it has the high watermark, looked at under the lock that
        # moves it: every put acknowledged before the join has it, every one after waits for it
        add = {m for m in acks.caught_up() if acks.include_if_caught_up(m)}
        if not drop and not add:
            return []
        followers = (set(rec.members[1:]) - drop) | add
        if add and hasattr(node, "isr_grew"):
            node.isr_grew()                         # sends waiting for the set to grow (node.until_in_sync)
        members = (node.member, *sorted(followers))
        doc = json.dumps({"epoch": node.epoch, "members": list(members)}).encode()
        try:
            ok = self.c.set(self._p("isr"), doc, rec.version)
        except Unreachable:
            self._isr = None                        # the outcome is unknown: read the record again
            raise
        if not ok:
            self._isr = None                        # someone else wrote it: read again at the next step
            return []
        self._isr = IsrRecord(node.epoch, members, rec.version + 1)
        acks.update_isr(exclude=drop)               # the record dropped them: the waits go on without
                                                    # them, all at once (never judged on a set half-changed)
        log.warning("broker group %s: in-sync set %s (%s)", node.group, list(members),
                    "; ".join(x for x in (f"{', '.join(sorted(drop))} fell behind" if drop else "",
                                          f"{', '.join(sorted(add))} caught up" if add else "") if x))
        return []

    def _rewrite_isr(self, e: RecordRefused) -> list[Action]:
        """The in-sync record was written by someone without the group's key (coord_signed.py): this
        leader, whose lease no other member can take meanwhile, writes it again from its waits (each of
        them has every acknowledged put), compare-and-set on the version it refused; else no member
        could be elected on it once this one is gone."""
        node = self.node
        members = (node.member, *sorted(node.acks.isr))
        doc = json.dumps({"epoch": node.epoch, "members": list(members)}).encode()
        if self.c.set(self._p("isr"), doc, e.version):
            self._isr = IsrRecord(node.epoch, members, e.version + 1)
            log.warning("broker group %s: the in-sync record was written by someone without the group's key: "
                        "written again, %s", node.group, list(members))
        return []

    def _reconcile(self, rec: IsrRecord) -> None:
        """The waits follow the record read (after a write whose outcome was unknown)."""
        acks = self.node.acks
        want = set(rec.members[1:])
        acks.update_isr(include=want - acks.isr, exclude=acks.isr - want)

    # the election -------------------------------------------------------------------------------
    def _elect(self) -> list[Action]:
        c, node = self.c, self.node
        now = self.clock.monotonic_s()
        try:
            got = c.get(self._p("epoch"))
        except RecordRefused as e:
            # written by someone without the group's key: the in-sync set (written with it, with the
            # same epoch) says what it was; the election writes it again (compare-and-set on the
            # version refused); with no set readable, nobody is elected
            got = None if self._read_isr() is None else NodeStat(b"0", e.version, 0)
            if got is None:
                raise
        if got is None:
            c.create(self._p("epoch"), b"0")
            return []
        rec = self._read_isr()
        epoch = int(got.data or b"0")
        if rec is not None and rec.epoch != epoch:
            # both are written in one transaction (below), always with the same epoch: a set older than
            # the epoch is an older record written back (it may name a member that left the set since):
            # nobody is elected on it; an epoch older than the set's is one written back: the election
            # goes past the set's (never a second leader of an epoch that was led)
            if rec.epoch < epoch:
                said = f"the in-sync record is of epoch {rec.epoch}, older than the group's epoch {epoch}"
                if said != self._said:
                    self._said = said
                    log.warning("broker group %s: %s (written back by someone?): no leader is elected on it",
                                node.group, said)
                return []
            epoch = rec.epoch
        if self._round is None or self._round.epoch != epoch:
            self._round = Round(epoch, now)
        r = self._round
        if not r.posted:
            if not c.set(self._p(f"members/{node.member}"), self._member_doc(epoch)):
                self._member_ok = False
                return []
            r.posted = True
        members = self._read_members()
        # only a live member of the recorded set may lead (a fresh group: any live member), and none
        # whose log lost what it had confirmed
        live = set(members) if rec is None else set(members) & set(rec.members)
        live -= set(c.children(self._p("ineligible")))
        if not live:
            said = f"no member of the in-sync set {list(rec.members)} is alive" if rec else "no member is alive"
            if said != self._said:
                self._said = said
                log.warning("broker group %s: %s: no leader is elected until one of them is back (any other "
                            "member may lack acknowledged messages)", node.group, said)
            return []
        posted = {m: d for m, d in members.items() if m in live and d.get("round") == epoch}
        if len(posted) < len(live) and now < r.started_s + self.election_wait_s:
            return []
        if not posted:
            return []
        best = max(posted, key=lambda m: (int(posted[m].get("log_end", 0) or 0), [-ord(ch) for ch in m]))
        if best != node.member:
            # the best one takes the lease; if it does not within a while, a new round
            if now > r.started_s + self.timeout_s + self.election_wait_s + 2.0:
                self._round = None
            return []
        new_epoch = epoch + 1
        # the new set: this member and the set's live members (a fresh group: this member alone;
        # the others join once caught up)
        isr = (node.member, *sorted(m for m in live if m != node.member and rec is not None))
        lead = json.dumps({"member": node.member, "endpoint": node.endpoint,
                           "leader_endpoint": node.leader_port_endpoint, "epoch": new_epoch}).encode()
        isr_doc = json.dumps({"epoch": new_epoch, "members": list(isr)}).encode()
        ops = [SetData(self._p("epoch"), str(new_epoch).encode(), got.version),
               Create(self._p("leader"), lead, ephemeral=True),
               SetData(self._p("isr"), isr_doc, rec.version) if rec is not None else Create(self._p("isr"), isr_doc)]
        sent_at = self.clock.monotonic_s()
        self.elections += 1
        if not c.transaction(ops):
            self._round = None                  # another member moved first, or the set changed: look again
            return []
        self._isr = IsrRecord(new_epoch, isr, 0 if rec is None else rec.version + 1)
        self._round = None
        return [Action("lead", epoch=new_epoch, isr=isr[1:], lease_from=sent_at)]

    def set_eligible(self, eligible: bool) -> bool:
        """Record (blocking) whether this member may be elected: False before its log drops what it had
        confirmed, True once it has the high watermark again. False when the coordinator cannot be
        reached (the caller tries again; it drops nothing meanwhile)."""
        path = self._p(f"ineligible/{self.node.member}")
        try:
            self._setup()
            if eligible:
                self.c.delete(path)
            else:
                self.c.create(path, b"")
            return True
        except Unreachable:
            return False

    def eligible(self) -> bool | None:
        """Whether the record says this member may be elected (None: the coordinator cannot say)."""
        try:
            return self.c.get(self._p(f"ineligible/{self.node.member}")) is None
        except Unreachable:
            return None

    def step_down(self) -> bool:
        """This leader gives up its lease (its log failed: node.py) and, when the recorded set has other
        members that may be elected, leaves it first, so that one of them is. Blocking (a thread). False
        when it cannot (the coordinator unreachable, the lease not its own): it goes on leading."""
        node = self.node
        try:
            try:
                rec = self._read_isr()
            except RecordRefused as e:
                # written by someone without the group's key (coord_signed.py): written again from the
                # waits first, as a leader does (_rewrite_isr), then left as below; refused again (a
                # race): False, tried again at the next step
                self._rewrite_isr(e)
                rec = self._read_isr()
            # (a member recorded ineligible may not be elected: a set of only such members had no
            # leader ever again; then this one stays in it and is elected in a new epoch at its cut)
            barred = set(self.c.children(self._p("ineligible"))) if rec is not None else set()
            if rec is not None and rec.epoch == node.epoch and node.member in rec.members and \
                    any(m != node.member and m not in barred for m in rec.members):
                others = [m for m in rec.members if m != node.member]
                doc = json.dumps({"epoch": rec.epoch, "members": others}).encode()
                if not self.c.set(self._p("isr"), doc, rec.version):
                    return False
            got = self.c.get(self._p("leader"))
            if got is None or got.owner != self._session:
                return False
            self.c.delete(self._p("leader"), got.version)
        except Unreachable:
            return False
        self._isr = None
        self.wake()
        return True

    # drivers ------------------------------------------------------------------------------------
    def run_thread(self, apply: Callable[[Action], Awaitable[None]], loop: asyncio.AbstractEventLoop) -> None:
        """Step on this thread until stopped; actions run on ``loop`` (blocking ZooKeeper calls stay off it)."""
        said = None
        while not self._stop.is_set():
            self._wake_t.wait(self.step_s)
            self._wake_t.clear()
            if self._stop.is_set():
                return
            try:
                actions = self.step()
                said = None
            except Unreachable as e:
                self.unreachable += 1
                if str(e) != said:
                    said = str(e)
                    log.info("coordinator: %s (trying again)", e)
                continue
            except Exception as e:  # noqa: BLE001 - the group's loop must go on
                log.warning("coordinator: %r (trying again)", e)
                self._stop.wait(self.step_s)
                continue
            for a in actions:
                try:
                    asyncio.run_coroutine_threadsafe(apply(a), loop).result(timeout=120)
                except Exception as e:  # noqa: BLE001 - looked at again at the next step
                    log.warning("coordinator: %s failed: %r", a.kind, e)

    async def run_loop(self, apply: Callable[[Action], Awaitable[None]],
                       gate: Callable[[], Awaitable[None]] | None = None) -> None:
        """Step on the event loop (a coordinator that never blocks: the in-process one)."""
        self._wake_a = asyncio.Event()
        while not self._stop.is_set():
            if gate is not None:
                await gate()
            try:
                actions = self.step()
            except Unreachable:
                self.unreachable += 1
                actions = []
            except Exception as e:  # noqa: BLE001 - the group's loop must go on
                log.warning("coordinator: %r (trying again)", e)
                actions = []
            for a in actions:
                try:
                    await apply(a)
                except Exception as e:  # noqa: BLE001 - looked at again at the next step
                    log.warning("coordinator: %s failed: %r", a.kind, e)
            try:
                await asyncio.wait_for(self._wake_a.wait(), self.step_s)
            except asyncio.TimeoutError:
                pass
            self._wake_a.clear()

    # views --------------------------------------------------------------------------------------
    def members(self) -> dict[str, dict]:
        """The live members (as the last look saw them), with their roles."""
        leader = self.node.leader_endpoint
        return {m: {"endpoint": d.get("endpoint", ""), "leader_endpoint": d.get("leader_endpoint", ""),
                    "role": "leader" if d.get("endpoint") == leader else "follower"}
                for m, d in self._members.items()}

    def isr(self) -> list[str] | None:
        """The in-sync set as this member last read or wrote it (the leader first)."""
        return list(self._isr.members) if self._isr is not None else None

    def create_topic(self, name: str, queues: int, groups: list[str]) -> dict:
        doc = self.topology.create_topic(name, queues, groups)
        self.wake()
        return doc

    def delete_topic(self, name: str) -> bool:
        return self.topology.delete_topic(name)

    def route(self, topic: str):
        return self.topology.route(topic)

    def cluster(self) -> dict:
        return self.topology.cluster(self.node.config.coordinator)

    @property
    def topics(self) -> dict[str, dict]:
        return self.topology.topics


def _json(raw: bytes) -> dict:
    try:
        doc = json.loads(raw)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}
