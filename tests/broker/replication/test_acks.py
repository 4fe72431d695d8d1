"""The leader's view of its followers: the in-sync set, the SYNC wait, the high watermark, the lease
(threads gated on events, time moved on a ManualClock)."""

import threading

from tidemq.broker.replication.acks import ReplicaAcks
from tidemq.broker.replication.lease import Lease
from tidemq.io import ManualClock
from tidemq.store import PutReason

LAG_S = 2.0


def make(sync=True, n=1, lease=False):
    end = [0]
    clock = ManualClock()
    ls = Lease(clock, 0.5, 4.0) if lease else None
    return ReplicaAcks(sync, n, 60_000, int(LAG_S * 1000), lambda: end[0], clock, ls), end, clock


def connect(a, member, confirmed=0):
    return a.connect(member, "e-" + member, confirmed).conn


def test_async_never_waits_nor_refuses_and_serves_the_whole_log():
    a, end, _ = make(sync=False)
    end[0] = 500
    assert a.refusal() is None and a.wait(500, 0.0) is None
    assert a.hw == 500


def test_refused_until_the_set_holds_enough_followers():
    a, end, _ = make(n=2)
    reason, text = a.refusal()
    assert reason is PutReason.REPLICAS_NOT_ENOUGH and "it has 0" in text
    connect(a, "f1"), connect(a, "f2")
    assert sorted(a.caught_up()) == ["f1", "f2"]        # connected with the leader's whole (empty) log
    assert a.include_if_caught_up("f1")
    assert a.refusal()[0] is PutReason.REPLICAS_NOT_ENOUGH
    assert a.include_if_caught_up("f2")
    assert a.refusal() is None and a.refusals == 2


def test_a_sync_put_waits_for_every_member_of_the_set_not_for_enough_of_them():
    a, end, _ = make(n=1)
    c1, c2 = connect(a, "f1"), connect(a, "f2")
    a.set_isr(["f1", "f2"])
    end[0] = 100
    got = []
    started = threading.Event()

    def put():
        started.set()
        got.append(a.wait(100, 60.0))
    t = threading.Thread(target=put)
    t.start()
    started.wait()
    a.confirm("f1", c1, 100)              # one follower is enough for in_sync_replicas_min=1 ...
    assert a.wait(100, 0.0) is PutReason.REPLICATION_TIMEOUT, "... but f2 is in the set: not yet"
    a.confirm("f2", c2, 100)
    t.join(60)
    assert got == [None] and a.hw == 100


def test_a_laggard_leaves_the_waits_only_when_excluded_and_the_put_goes_on_then():
    a, end, clock = make(n=1)
    c1, _ = connect(a, "f1"), connect(a, "f2")
    a.set_isr(["f1", "f2"])
    end[0] = 100
    a.sent("f1", c1, 100, 100)
    a.confirm("f1", c1, 100)
    clock.advance(LAG_S + 0.1)
    assert a.laggards() == ["f1", "f2"]          # f1's confirmation proved it caught up LAG_S + 0.1 s ago
    a.sent("f1", c1, 100, 100)                    # a heartbeat at the end, confirmed: caught up now
    a.confirm("f1", c1, 100)
    assert a.laggards() == ["f2"]
    assert a.wait(100, 0.0) is PutReason.REPLICATION_TIMEOUT, "f2 is still in the set: the put waits"
    a.update_isr(exclude=["f2"])                 # (after the coordinator's record dropped it)
    assert a.wait(100, 0.0) is None and a.hw == 100


def test_caught_up_means_had_the_leaders_end_at_some_moment_and_the_high_watermark():
    a, end, clock = make(n=1)
    c1, c2 = connect(a, "f1"), connect(a, "f2")
    a.set_isr(["f1"])
    end[0] = 1000
    a.sent("f1", c1, 1000, 1000)
    a.confirm("f1", c1, 1000)
    assert a.hw == 1000
    a.sent("f2", c2, 600, 1000)                   # a frame that did not reach the leader's end
    a.confirm("f2", c2, 600)
    assert a.caught_up() == []
    a.sent("f2", c2, 1000, 1000)                  # one that did
    clock.advance(0.5)
    end[0] = 1200                                 # the leader moved on meanwhile
    a.confirm("f2", c2, 1000)
    assert a.caught_up() == ["f2"], "it had, 0.5 s ago, everything the leader had then, and the watermark"
    clock.advance(LAG_S)
    assert a.caught_up() == [], "too long ago"
    assert not a.include_if_caught_up("f2") and a.isr == {"f1"}


def test_a_follower_joins_the_waits_only_with_the_high_watermark_looked_at_as_it_joins():
    a, end, _ = make(n=1)
    c1, c2 = connect(a, "f1"), connect(a, "f2")
    a.set_isr(["f1"])
    end[0] = 100
    a.sent("f1", c1, 100, 100)
    a.confirm("f1", c1, 100)                      # the high watermark: 100
    a.sent("f2", c2, 100, 100)
    a.confirm("f2", c2, 100)
    end[0] = 300                                  # a put appended up to 300, waiting for f1
    assert a.caught_up() == ["f2"]                # what the coordinator looked at ...
    a.confirm("f1", c1, 300)                      # ... then a put acknowledged without f2
    assert a.wait(300, 0.0) is None and a.hw == 300
    assert not a.include_if_caught_up("f2"), "it lacks an acknowledged put: never in the set"
    assert a.isr == {"f1"} and a.isr_changes == 0
    a.confirm("f2", c2, 300)
    assert a.include_if_caught_up("f2") and a.isr == {"f1", "f2"} and a.isr_changes == 1
    assert not a.include_if_caught_up("f2"), "in the set already"


def test_members_dropped_together_leave_the_waits_as_one_step():
    """in_sync_replicas_min=2, {x, y, z}; x and y dropped by one record write; y and z hold the waiting
    put. One by one, dropping x first leaves {y, z}, both holding it: OK, with one of the two copies
    the minimum asks for outside the recorded set. As one step: {z}, below the minimum: REPLICA_LOST."""
    a, end, _ = make(n=2)
    conns = {m: connect(a, m) for m in ("x", "y", "z")}
    a.set_isr(["x", "y", "z"])
    end[0] = 500
    released = []
    assert a.when_confirmed(500, lambda: released.append(a.wait(500, 0.0))) is not None
    for m in ("y", "z"):
        a.confirm(m, conns[m], 500)
    assert not released
    a.update_isr(exclude=["x", "y"])
    assert released == [PutReason.REPLICA_LOST] and a.isr == {"z"}
    assert a.isr_changes == 1 and [a.followers[m].left_isr for m in "xyz"] == [1, 1, 0]


def test_a_put_waiting_while_the_set_shrinks_below_the_minimum_is_replica_lost():
    a, end, _ = make(n=1)
    connect(a, "f1")
    a.set_isr(["f1"])
    end[0] = 100
    assert a.wait(100, 0.0) is PutReason.REPLICATION_TIMEOUT
    a.update_isr(exclude=["f1"])
    assert a.wait(100, 0.0) is PutReason.REPLICA_LOST
    assert "shrank below in_sync_replicas_min" in a.describe(PutReason.REPLICA_LOST)
    assert a.refusal()[0] is PutReason.REPLICAS_NOT_ENOUGH, "and the next put is refused before it is written"


def test_a_stream_left_over_from_before_counts_no_more():
    a, end, _ = make(n=1)
    old = connect(a, "f1")
    new = connect(a, "f1", 40)                   # the follower connected again (the old stream lingers)
    a.set_isr(["f1"])
    end[0] = 100
    a.confirm("f1", old, 100)
    assert a.followers["f1"].confirmed == 40
    a.disconnect("f1", old)
    assert a.followers["f1"].connected
    a.confirm("f1", new, 100)
    assert a.wait(100, 0.0) is None


def test_the_high_watermark_never_moves_back():
    a, end, _ = make(n=1)
    c1, c2 = connect(a, "f1"), connect(a, "f2")
    a.set_isr(["f1"])
    end[0] = 300
    a.confirm("f1", c1, 300)
    assert a.hw == 300
    a.update_isr(include=["f2"])                  # joins with less (never, by caught_up(): shown anyway)
    assert a.hw == 300
    a.confirm("f2", c2, 200)
    assert a.hw == 300


def test_the_high_watermark_never_passes_what_the_leader_itself_keeps():
    """SYNC_FLUSH: followers may confirm what the leader has not fsynced yet; an fsync error of the
    leader then cuts its log at its durable end (log_failure.py). Followers serve up to the high
    watermark the leader tells them, so it counts the leader's own durable end as a confirmation."""
    end, durable = [0], [0]
    clock = ManualClock()
    a = ReplicaAcks(True, 1, 60_000, int(LAG_S * 1000), lambda: end[0], clock, None, lambda: durable[0])
    woken = []
    a.add_waker(lambda: woken.append(a.hw))
    c1 = connect(a, "f1")
    a.set_isr(["f1"])
    end[0] = 400
    a.confirm("f1", c1, 400)                 # the follower has it before the leader's fsync ended
    assert a.hw == 0, "served on the follower, then cut by the leader's failed fsync"
    durable[0] = 250                         # part of it fsynced: readable there at once, no event needed
    assert a.hw == 250
    durable[0] = 400                         # the put's group commit ended; its wait tells the senders
    assert a.wait(400, 0.0) is None and a.hw == 400 and woken[-1] == 400
    a.update_isr(exclude=["f1"])             # the leader alone in the set: its own durable end
    end[0] = 600
    assert a.hw == 400
    durable[0] = 600
    assert a.hw == 600
    durable[0] = 500                         # never moves back
    assert a.hw == 600


def test_every_write_checks_the_lease_before_and_after_the_append_async_too():
    for sync in (True, False):
        a, end, clock = make(sync=sync, lease=True)
        c1 = connect(a, "f1")
        a.set_isr(["f1"])
        reason, text = a.refusal()
        assert reason is PutReason.LEASE_EXPIRED and "holds no lease" in text
        a.lease.renew(clock.monotonic_s())        # renewed now: valid for 0.5 x 4 s
        assert a.refusal() is None
        end[0] = 100
        a.confirm("f1", c1, 100)
        assert a.wait(100, 0.0) is None
        clock.advance(2.0)                        # the process was stopped between the append and the answer
        assert a.wait(100, 0.0) is PutReason.REPLICATION_TIMEOUT, "appended, not acknowledged (its resend waits)"
        assert "lease ran out" in a.describe(PutReason.REPLICATION_TIMEOUT)
        assert a.refusal()[0] is PutReason.LEASE_EXPIRED and "ran out" in a.refusal()[1]
