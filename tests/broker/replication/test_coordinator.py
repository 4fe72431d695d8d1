"""broker/replication/coordinator.py over the in-process coordinator (tidemq.testing.memory_coordinator):
election, the recorded in-sync set, leases and fencing without a ZooKeeper, time moved on a
ManualClock, every member stepped in turn. The members are stand-ins holding what the coordinator
reads of a node (role, epoch, log end, acks, lease); the whole node runs over the same coordinator
in tests/sim/. (The coordinator setting's parsing: test_hosts_and_chroot.)"""

import threading
from types import SimpleNamespace

import pytest

from tidemq.broker.replication.acks import ReplicaAcks
from tidemq.broker.replication.coordinator import GroupCoordinator, parse
from tidemq.broker.replication.lease import Lease
from tidemq.io import ManualClock
from tidemq.store import PutReason
from tidemq.testing.memory_coordinator import MemoryCoordinatorService

SESSION_S = 1.5
RATIO = 0.5
LAG_S = 1.0
WAIT_S = 0.3


@pytest.mark.parametrize("setting, hosts, chroot", [
    ("127.0.0.1:2181", "127.0.0.1:2181", "/tidemq"),
    ("127.0.0.1:2181/", "127.0.0.1:2181", "/tidemq"),
    ("a:1,b:2,c:3/mq", "a:1,b:2,c:3", "/mq"),
    ("a:1/prod/mq/", "a:1", "/prod/mq"),
    ("a:1//", "a:1", "/tidemq"),
])
def test_hosts_and_chroot(setting, hosts, chroot):
    assert parse(setting) == (hosts, chroot)


class Stub:
    """What GroupCoordinator reads of a node, and its actions applied as node.apply would."""

    def __init__(self, member: str, end: int, clock, service, sync: bool = True, group: str = "g") -> None:
        self.member, self.group = member, group
        self.endpoint, self.leader_port_endpoint = f"{member}:1", ""
        self.store = SimpleNamespace(replica=SimpleNamespace(end=end))
        self.leading, self.fenced, self.epoch, self.leader_endpoint = False, None, 0, ""
        self.step_down_wanted = False
        self.lease = Lease(clock, RATIO, SESSION_S)
        self.acks = ReplicaAcks(sync, 1, 60_000, int(LAG_S * 1000), lambda: self.store.replica.end, clock, self.lease)
        self.config = SimpleNamespace(election_wait_ms=int(WAIT_S * 1000), coordinator="memory")
        self.session = service.client(member, SESSION_S)
        self.gc = GroupCoordinator(self, self.session, clock)
        self.led: list[int] = []            # epochs led
        self.alive = True

    def view(self) -> dict:
        """Its own group, as routes name it (node.view: here, its leader only)."""
        return {"group": self.group, "leader": self.leader_endpoint, "members": {}}

    def apply(self, a) -> None:
        if a.kind == "lead":
            self.leading, self.fenced, self.epoch, self.leader_endpoint = True, None, a.epoch, self.endpoint
            self.acks.forget()
            self.acks.set_isr(a.isr)
            self.lease.renew(a.lease_from)
            self.led.append(a.epoch)
        elif a.kind == "follow":
            self.leading, self.fenced, self.epoch, self.leader_endpoint = False, None, 0, a.endpoint
            self.lease.revoke()
            self.acks.forget()
        elif a.kind == "fence":
            self.fenced = a.why
            self.lease.revoke()
        elif a.kind == "unfence":
            self.fenced = None


class World:
    def __init__(self, ends: dict[str, int], sync: bool = True) -> None:
        self.clock = ManualClock()
        self.service = MemoryCoordinatorService(self.clock)
        self.members = {m: Stub(m, e, self.clock, self.service, sync) for m, e in ends.items()}
        self.leases: list[tuple[str, int, float]] = []       # (member, epoch, lease end) of every leader seen

    @classmethod
    def m0_leads(cls, n: int, *caught_up: str) -> "World":
        """Members m0 .. m<n-1>, their logs empty, started: m0 elected (ties go to the smallest id) and
        ``caught_up`` (every other member by default) caught up and recorded in the set with it."""
        w = cls({f"m{i}": 0 for i in range(n)})
        w.start()
        w.run(1.0)
        assert w.leader() == "m0"
        caught_up = caught_up or tuple(f"m{i}" for i in range(1, n))
        w.catch_up("m0", *caught_up)
        w.run(0.2)
        assert w.isr_record() == ["m0", *caught_up]
        return w

    def start(self, *names) -> None:
        for m in names or self.members:
            s = self.members[m]
            s.alive = True
            s.gc.start()

    def kill(self, m: str) -> None:
        s = self.members[m]
        s.alive = False
        s.session.abandon()

    def restart(self, m: str, end: int | None = None) -> None:
        old = self.members[m]
        new = Stub(m, old.store.replica.end if end is None else end, self.clock, self.service)
        self.members[m] = new
        new.gc.start()

    def step(self, dt: float = 0.05, paused=()) -> None:
        self.clock.advance(dt)
        self.service.tick()
        for m, s in self.members.items():
            if not s.alive or m in paused:
                continue
            try:
                actions = s.gc.step()
            except Exception:  # noqa: BLE001 - Unreachable: the next step
                continue
            for a in actions:
                if a.kind == "lead":
                    # a new epoch begins: every older leader's lease has run out by now
                    for other in self.members.values():
                        if other is not s and other.group == s.group and other.leading and other.lease.valid():
                            raise AssertionError(f"{s.member} elected while {other.member}'s lease is valid")
                s.apply(a)

    def run(self, seconds: float, paused=()) -> None:
        for _ in range(int(seconds / 0.05)):
            self.step(paused=paused)

    def leader(self) -> str | None:
        got = [m for m, s in self.members.items() if s.alive and s.leading and not s.fenced]
        assert len(got) <= 1, got
        return got[0] if got else None

    def isr_record(self) -> list[str] | None:
        got = self.service.get("/tidemq/groups/g/isr")
        import json
        return None if got is None else json.loads(got.data)["members"]

    def catch_up(self, leader: str, *followers: str) -> None:
        """The followers connected to the leader and have its whole log (acks, as leader.py feeds them)."""
        acks = self.members[leader].acks
        end = self.members[leader].store.replica.end
        for f in followers:
            c = acks.connect(f, f + ":1", end).conn
            acks.sent(f, c, end, end)
            acks.confirm(f, c, end)


def test_a_fresh_group_elects_the_longest_log_and_records_it_alone_in_the_set():
    w = World({"m0": 100, "m1": 300, "m2": 300})
    w.start()
    w.run(1.0)
    assert w.leader() == "m1", "the longest log, ties to the smallest id"
    assert w.isr_record() == ["m1"]
    assert w.members["m0"].leader_endpoint == w.members["m2"].leader_endpoint == "m1:1"


def test_caught_up_followers_join_the_record_and_a_laggard_leaves_it_before_the_waits():
    w = World.m0_leads(3)
    lead = w.leader()
    others = sorted(set(w.members) - {lead})
    acks = w.members[lead].acks
    assert acks.isr == set(others)
    w.members[lead].store.replica.end = 500         # a put appended; only the first follower confirms
    w.catch_up(lead, others[0])
    w.service.cut(lead)                             # the record cannot be written: the laggard stays waited for
    w.run(LAG_S + 0.2)
    assert others[1] in acks.isr and w.isr_record() == [lead, *others]
    w.service.heal(lead)
    w.catch_up(lead, others[0])
    w.run(0.2)
    assert w.isr_record() == [lead, others[0]] and acks.isr == {others[0]}, "removed from the record, then the waits"


def test_two_followers_joining_at_one_step_release_a_waiting_put_only_once_both_have_it():
    w = World({"m0": 0, "m1": 0, "m2": 0, "m3": 0})
    w.start()
    w.run(1.0)
    lead = w.leader()
    first, *late = sorted(set(w.members) - {lead})
    w.members[lead].store.replica.end = 100
    w.catch_up(lead, first)
    w.run(0.2)
    assert w.isr_record() == [lead, first]
    acks = w.members[lead].acks
    w.members[lead].store.replica.end = 500         # a SYNC put appended up to 500
    released = []
    assert acks.when_confirmed(500, lambda: released.append(acks.wait(500, 0.0))) is not None
    conns = {m: acks.connect(m, m + ":1", 100).conn for m in late}      # both have the watermark (100)
    w.step()                                        # both join in one step, the waits first
    assert acks.isr == {first, *late} and w.isr_record() == [lead, first, *late]
    for m in [first, *late]:
        assert not released, "released before every member of the set has it"
        acks.confirm(m, conns.get(m) or acks.followers[m].conn, 500)
    assert released == [None]


class _Points:
    """The waits' lock (an RLock, as ReplicaAcks makes it), calling ``at_point()`` at every moment another
    thread could take it in between: before each outermost acquire and after each last release by
    the stepping thread. A confirmation landed there is one the event loop's thread could land."""

    def __init__(self, at_point) -> None:
        self._l = threading.RLock()
        self._depth = 0
        self._at_point = at_point

    def acquire(self, blocking=True, timeout=-1):
        if self._depth == 0:
            self._at_point()
        got = self._l.acquire(blocking, timeout)
        if got:
            self._depth += 1
        return got

    __enter__ = acquire

    def release(self) -> None:
        self._depth -= 1
        self._l.release()
        if self._depth == 0:
            self._at_point()

    def __exit__(self, *exc) -> None:
        self.release()

    def _is_owned(self) -> bool:
        return self._l._is_owned()

    def _release_save(self):
        self._depth, saved = 0, (self._depth, self._l._release_save())
        return saved

    def _acquire_restore(self, saved) -> None:
        self._l._acquire_restore(saved[1])
        self._depth = saved[0]


def _join_with_a_confirmation_at(point: int) -> int:
    """`late` joins (the step that finds it caught up) while a SYNC put waits for `first`, whose
    confirmation lands at the ``point``-th moment of that step another thread could act in; the
    number of such moments."""
    w = World({"m0": 0, "m1": 0, "m2": 0})
    w.start()
    w.run(1.0)
    lead = w.leader()
    first, late = sorted(set(w.members) - {lead})
    w.members[lead].store.replica.end = 100
    w.catch_up(lead, first)
    w.run(0.2)
    assert w.isr_record() == [lead, first]
    acks = w.members[lead].acks
    w.members[lead].store.replica.end = 500         # a SYNC put appended up to 500, waiting for `first`
    released = []
    assert acks.when_confirmed(500, lambda: released.append(acks.wait(500, 0.0))) is not None
    late_conn = acks.connect(late, late + ":1", 100).conn       # has the watermark (100), not the put
    seen = [0]

    def at_point():
        seen[0] += 1
        if seen[0] == point:
            acks.confirm(first, acks.followers[first].conn, 500)

    acks._cv = threading.Condition(_Points(at_point))       # (the lock that moves the watermark)
    w.step()
    acks._cv = threading.Condition(threading.RLock())
    record = w.isr_record()
    if released == [None]:
        assert all(acks.followers[m].confirmed >= 500 for m in record[1:]), \
            f"confirmation at moment {point}: the record {record} names a member without an acknowledged put"
    else:
        assert not released and record == [lead, first, late] and acks.isr == {first, late}, \
            f"confirmation at moment {point}: {released}, {record}"
    for m, c in ((first, acks.followers[first].conn), (late, late_conn)):
        acks.confirm(m, c, 500)
    w.step()
    assert released == [None] and w.isr_record() == [lead, first, late] and acks.isr == {first, late}
    return seen[0]


def test_a_put_acknowledged_while_a_follower_joins_keeps_the_follower_out_until_it_has_the_put():
    """The join looks for the high watermark and joins the waits under the lock that moves it: a
    confirmation landed at any moment of the step (before it, before or after any look of it, after
    it) leaves no recorded member without an acknowledged put."""
    moments = _join_with_a_confirmation_at(0)
    assert moments >= 4
    for point in range(1, moments + 2):
        _join_with_a_confirmation_at(point)


def test_two_of_three_dropped_by_one_record_write_leave_the_waits_at_once():
    """in_sync_replicas_min=2, the set {x, y, z}; x and y fall behind, y and z hold the waiting put:
    the record drops both, and the put is judged on {z}: REPLICA_LOST (excluding x first would have
    released it OK on {y, z})."""
    w = World({"m0": 0, "m1": 0, "m2": 0, "m3": 0})
    w.start()
    w.run(1.0)
    lead = w.leader()
    x, y, z = sorted(set(w.members) - {lead})
    acks = w.members[lead].acks
    acks.min_in_sync = 2
    w.catch_up(lead, x, y, z)
    w.run(0.2)
    assert w.isr_record() == [lead, x, y, z]
    w.catch_up(lead, x, y, z)                       # all three caught up at this moment ...
    w.members[lead].store.replica.end = 500         # ... then a SYNC put appended up to 500
    released = []
    assert acks.when_confirmed(500, lambda: released.append(acks.wait(500, 0.0))) is not None
    w.catch_up(lead, y, z)
    assert not released, "x is in the set and lacks it"
    w.members[lead].store.replica.end = 600         # the leader goes on; only z keeps up
    for _ in range(int((LAG_S + 0.3) / 0.05)):
        w.catch_up(lead, z)
        w.step()
        if w.isr_record() != [lead, x, y, z]:
            break
    assert w.isr_record() == [lead, z] and acks.isr == {z}, "x and y dropped by one record write"
    assert released == [PutReason.REPLICA_LOST]


def test_only_a_member_of_the_recorded_set_is_elected_and_the_election_waits_for_one():
    w = World.m0_leads(3, "m1")
    # m2 has the longest log (say it kept a tail no one acknowledged) but is not in the set
    w.members["m2"].store.replica.end = 10_000
    w.kill("m0")
    w.kill("m1")                                    # no member of the set is alive
    w.run(SESSION_S * 4)
    assert w.leader() is None, "m2 may lack acknowledged messages: never elected"
    w.restart("m1")
    w.run(2.0)
    assert w.leader() == "m1" and w.isr_record() == ["m1"]


def test_the_378_lost_reproduction_a_lagging_follower_is_never_elected_while_a_set_member_lives():
    """Issue 27: m2 stopped (out of the set once the record dropped it), the leader killed and m2
    back first, the up-to-date m1 stopped for less than its session: the election waits for m1."""
    w = World.m0_leads(3)
    w.members["m0"].store.replica.end = 70_308       # acknowledged puts: every set member confirms them...
    w.catch_up("m0", "m1")                           # ... but m2 is stopped: the puts wait for it
    w.members["m0"].acks.wait(70_308, 0.0)
    for _ in range(int((LAG_S + 0.3) / 0.05)):       # m2 stopped for longer than replica_lag_time_max_ms
        w.catch_up("m0", "m1")
        w.step(paused=("m2",))
    assert w.isr_record() == ["m0", "m1"], "dropped from the record first"
    assert w.members["m0"].acks.wait(70_308, 0.0) is None, "then the puts go on without it"
    w.members["m1"].store.replica.end = 70_308
    w.kill("m0")
    # m0's session expires; m2 runs again, m1 is stopped for less than its session
    w.run(SESSION_S + 0.5, paused=("m1",))
    assert w.leader() is None, "the election waits for the set's live member m1"
    w.run(2.0)
    assert w.leader() == "m1"


def test_unforced_all_sessions_expire_at_once_and_the_lagging_member_registers_first():
    w = World.m0_leads(3, "m1")                      # m2 never caught up (its disk is full)
    for m in w.members:
        w.service.cut(m)                            # a coordinator stall: every session expires
    w.run(SESSION_S + 0.5)
    assert w.leader() is None
    w.service.heal("m2")                            # the lagging member comes back first
    w.run(3.0)
    assert w.leader() is None, "m2 is not in the recorded set"
    w.service.heal("m1")
    w.service.heal("m0")
    w.run(3.0)
    assert w.leader() in ("m0", "m1") and "m2" not in (w.isr_record() or [])


def test_a_leader_cut_off_fences_its_lease_runs_out_before_another_is_elected():
    w = World.m0_leads(3)
    m0 = w.members["m0"]
    assert m0.lease.valid()
    w.service.cut("m0")
    w.step()
    assert m0.fenced and not m0.lease.valid(), "fenced at its first look: writes refused at once"
    # (step() asserts at every election that no other leader's lease is still valid)
    for _ in range(int((SESSION_S + 1.0) / 0.05)):
        w.step()
        if w.leader() not in (None, "m0"):
            break
    new = w.leader()
    assert new in ("m1", "m2")
    assert w.isr_record() == [new, ({"m1", "m2"} - {new}).pop()], "the set's live members, in the new epoch"
    w.service.heal("m0")
    w.run(1.0)
    assert not m0.leading and m0.leader_endpoint == f"{new}:1", "back, it follows the new leader"


def test_a_paused_leader_wakes_up_with_its_lease_run_out_and_acknowledges_nothing():
    w = World.m0_leads(2)
    m0 = w.members["m0"]
    until = m0.lease.until_s
    w.run(SESSION_S * 3, paused=("m0",))             # SIGSTOP: m0 neither steps nor renews
    assert w.members["m1"].leading
    assert m0.leading and not m0.lease.valid() and w.clock.monotonic_s() > until
    assert m0.acks.refusal()[0].name == "LEASE_EXPIRED", "awake, before it looked: nothing acknowledged"
    w.run(0.5)
    assert not m0.leading and m0.leader_endpoint == "m1:1"


def test_the_lease_is_renewed_at_every_step_and_is_shorter_than_the_session():
    w = World({"m0": 0})
    w.start()
    w.run(1.0)
    m0 = w.members["m0"]
    assert m0.leading and m0.lease.renewals > 5
    assert 0 < m0.lease.until_s - w.clock.monotonic_s() <= RATIO * SESSION_S
    assert m0.gc.step_s <= RATIO * SESSION_S / 4


def test_a_leader_that_wants_to_step_down_leaves_the_record_and_a_member_of_the_set_leads_at_once():
    """node.step_down_wanted (its commit log failed, node.py): the next step takes it out of the
    recorded set and gives up the leader node; a member of the set is elected without waiting for
    its session to expire, and the old leader is never elected again while it is out of the set."""
    w = World.m0_leads(3)
    m0 = w.members["m0"]
    m0.step_down_wanted = True
    m0.lease.revoke()
    w.run(WAIT_S + 0.5)                                 # well within the session (1.5 s)
    assert w.leader() in ("m1", "m2") and not m0.leading and not m0.step_down_wanted
    assert "m0" not in w.isr_record(), "the new epoch's set is the old set's live members, without it"
    assert m0.leader_endpoint == w.members[w.leader()].endpoint


def test_a_leader_that_steps_down_does_not_leave_the_set_to_members_recorded_ineligible():
    """Found by the group simulation (seed 9286): a follower's log failed (ineligible), then the
    leader's: it left the set ['m1', 'm2'] to m2 alone, which may not be elected, and no member
    ever led again. It stays in the set (ineligible members do not count) and gives up the lease
    only: it is elected again, in a new epoch beginning at its cut (node.py)."""
    w = World.m0_leads(2)
    m0 = w.members["m0"]
    epoch = m0.epoch
    assert w.members["m1"].gc.set_eligible(False)
    m0.step_down_wanted = True
    m0.lease.revoke()
    w.run(WAIT_S + 1.0)
    assert "m0" in w.isr_record(), "the set keeps a member that may be elected"
    assert w.leader() == "m0" and m0.epoch > epoch and not m0.step_down_wanted


def test_a_member_recorded_ineligible_is_never_elected_until_it_says_it_may_be_again():
    """A follower whose commit log failed (node.py: set_eligible(False) before it drops a byte) is
    not elected, though in the recorded set with the longest log; once it has the high watermark
    again (follower.py: set_eligible(True)) it may be."""
    w = World.m0_leads(3)
    assert w.members["m1"].gc.set_eligible(False) and w.members["m1"].gc.eligible() is False
    w.members["m1"].store.replica.end = 10_000
    w.kill("m0")
    w.run(SESSION_S + WAIT_S + 1.0)
    assert w.leader() == "m2", "the ineligible member is passed over"
    w.catch_up("m2", "m1")
    w.run(0.2)
    assert w.members["m1"].gc.set_eligible(True) and w.members["m1"].gc.eligible() is True
    w.kill("m2")
    w.run(SESSION_S + WAIT_S + 1.0)
    assert w.leader() == "m1"


def _just_synced(w: World, m: str) -> None:
    """Step the group until ``m``'s cluster view is not due at the next step (read at the last one,
    nothing changed since): what it learns at the next step, it learns from a watch or an ask."""
    gc = w.members[m].gc
    for _ in range(100):
        w.step()
        if not gc.topology.due(w.clock.monotonic_s() + 0.05):
            return
    raise AssertionError("the view was never read")


def test_a_member_that_joins_is_in_the_view_at_the_next_step_on_the_watch_not_a_timer():
    w = World({"m0": 0, "m1": 0, "m2": 0})
    w.members["m2"].alive = False                   # not started yet
    w.start("m0", "m1")
    w.run(1.0)
    _just_synced(w, "m0")
    assert set(w.members["m0"].gc.members()) == {"m0", "m1"} and w.members["m0"].gc.members_fresh()
    w.start("m2")                                   # its member node: the others' watch fires
    assert not w.members["m0"].gc.members_fresh(), "a change signalled, not read yet"
    w.step()                                        # 0.05 s: the 1 s timer is far
    assert set(w.members["m0"].gc.members()) == {"m0", "m1", "m2"} and w.members["m0"].gc.members_fresh()
    w.kill("m2")
    w.run(SESSION_S + 0.5)                          # its session expires: its node goes
    assert set(w.members["m0"].gc.members()) == {"m0", "m1"}


def test_a_route_asks_for_a_read_begun_after_it_and_says_when_none_could_be_made():
    w = World({"m0": 0, "m1": 0})
    w.start()
    w.run(1.0)
    _just_synced(w, "m1")
    gc = w.members["m1"].gc
    ticket = gc.ask_members()
    assert not gc.wait_members(ticket, 0)           # not read yet
    w.step()
    assert gc.wait_members(ticket, 0)
    w.service.cut("m1")                             # the coordinator cannot be reached
    ticket = gc.ask_members()
    w.step()
    w.step()
    assert not gc.wait_members(ticket, 0), "no read could be made: the route says it is incomplete"
    w.service.heal("m1")
    w.step()
    assert gc.wait_members(ticket, 0)


def test_another_groups_members_leader_and_topics_are_seen_at_the_next_step_on_the_watch_not_a_timer():
    """A topic spread over groups g and h: g's member routes h's queues to h's members and leader as
    the coordinator holds them, and h's member makes its part of a topic spread a moment ago; each
    read again at the first step after the coordinator's watch fires (0.05 s here), not on a timer."""
    w = World({"g0": 0})
    for m in ("h0", "h1"):
        w.members[m] = Stub(m, 0, w.clock, w.service, group="h")
    w.members["h1"].alive = False                    # not started yet
    w.start("g0", "h0")
    for _ in range(200):
        if w.members["g0"].leading and w.members["h0"].leading:
            break
        w.step()
    assert w.members["g0"].leading and w.members["h0"].leading
    g0, h0 = w.members["g0"].gc, w.members["h0"].gc
    _just_synced(w, "g0")
    assert g0.topology.groups["h"] == {"group": "h", "leader": "h0:1", "members": {
        "h0": {"endpoint": "h0:1", "leader_endpoint": ""}}}
    w.start("h1")                                    # its member node: g0's watch on h's members fires
    w.step()
    assert set(g0.topology.groups["h"]["members"]) == {"h0", "h1"}
    _just_synced(w, "h0")
    g0.create_topic("T", 4, ["g", "h"])
    w.step()                                         # h0's watch on the topics fires
    assert h0.topology.topics["T"]["owners"] == {"g": [0, 2], "h": [1, 3]}
    assert [(v["group"], q) for v, q in g0.route("T")][1] == ("h", [1, 3])
    _just_synced(w, "g0")
    w.members["h0"].alive = False
    w.members["h0"].session.stop()                   # a clean stop: its leader and member nodes go at once
    w.step()
    assert g0.topology.groups["h"]["leader"] == "" and set(g0.topology.groups["h"]["members"]) == {"h1"}
