"""replication/coord_signed.py over the in-process coordinator: records signed with the cluster's key,
bound to their node and, for an ephemeral node, to the session that owns it; the election runs over it
unchanged (test_coordinator.py's stand-ins), and a forged leader record is followed by nobody.
(With real processes and a real ZooKeeper: test_coord_signed_e2e.py.)"""

import json

import pytest

from tidemq.broker.replication.coord_signed import Refusal, RecordRefused, SignedCoordinator
from tidemq.broker.replication.coordination import Create, SetData
from tidemq.broker.replication.coordinator import GroupCoordinator
from tidemq.io import ManualClock
from tidemq.testing.memory_coordinator import MemoryCoordinatorService

from .test_coordinator import LAG_S, SESSION_S, World

KEY = "s3cret-sk"


def test_a_record_verifies_only_where_and_by_whom_it_was_written():
    clock = ManualClock()
    service = MemoryCoordinatorService(clock)
    a, b = (SignedCoordinator(service.client(n, 10.0), KEY) for n in ("a", "b"))
    outsider = service.client("x", 10.0)
    for c in (a, b, outsider):
        c.start()
    assert a.create("/r", b"1") and b.get("/r").data == b"1"
    assert a.transaction([SetData("/r", b"2", 0), Create("/e", b"lease", ephemeral=True)])
    assert b.get("/r").data == b"2" and b.get("/e").data == b"lease"
    other = SignedCoordinator(service.client("c", 10.0), "another key")
    other.start()
    with pytest.raises(RecordRefused) as e:
        other.get("/r")
    assert e.value.reason is Refusal.BAD_SIGNATURE, "a member with other keys"
    outsider.create("/q", service.get("/r").data)                                   # moved to another node
    outsider.create("/u", b"2")                                                      # unsigned
    leased = service.get("/e").data
    outsider.create("/e2", leased, ephemeral=True)                                  # another session's lease
    for path, why in (("/q", Refusal.BAD_SIGNATURE), ("/u", Refusal.UNSIGNED), ("/e2", Refusal.BAD_SIGNATURE)):
        with pytest.raises(RecordRefused) as e:
            b.get(path)
        assert e.value.reason is why, path
    assert b.refused == {"unsigned": 1, "bad_signature": 2}


def test_a_signed_group_elects_and_a_forged_leader_record_is_followed_by_nobody():
    w = World({"m0": 100, "m1": 300})
    for s in w.members.values():
        s.session = SignedCoordinator(s.session, KEY, "g")
        s.gc = GroupCoordinator(s, s.session, w.clock)
    w.start()
    w.run(1.0)
    assert w.leader() == "m1" and w.members["m0"].leader_endpoint == "m1:1"
    outsider = w.service.client("x", 10.0)
    outsider.start()
    outsider.set("/tidemq/groups/g/leader", json.dumps({"member": "evil", "endpoint": "evil:1", "epoch": 9}).encode())
    seen = set()
    for _ in range(60):
        w.step()
        seen |= {s.leader_endpoint for s in w.members.values()}
    assert "evil:1" not in seen, "nobody followed the forged record"
    assert w.leader() in ("m0", "m1") and all(s.leader_endpoint == w.members[w.leader()].endpoint
                                              for s in w.members.values())
    assert w.members["m1"].session.refused["unsigned"] >= 1


ISR = "/tidemq/groups/g/isr"
EPOCH = "/tidemq/groups/g/epoch"


def signed_world(ends):
    w = World(ends)
    for s in w.members.values():
        s.session = SignedCoordinator(s.session, KEY, "g")
        s.gc = GroupCoordinator(s, s.session, w.clock)
    w.start()
    w.run(1.0)
    return w


def restart_signed(w, m, end):
    w.restart(m, end)
    s = w.members[m]
    s.gc.stop()
    s.session = SignedCoordinator(s.session, KEY, "g")
    s.gc = GroupCoordinator(s, s.session, w.clock)
    s.gc.start()


def isr_members(w):
    return json.loads(record(w, ISR))["members"]


def record(w, path):
    got = w.service.get(path)
    return got.data[:got.data.index(b"\x00tidemq-sig1:")]


def test_an_older_epochs_signed_in_sync_set_written_back_elects_nobody(caplog):
    """The in-sync set of epoch 1 (naming m2) written back, as it was signed, after m2 left the set in
    epoch 2: with m2 the only live member it was elected and served a log without what was acknowledged
    in epoch 2. The set's epoch is below the group's epoch record (both are written in one transaction):
    refused, nobody is elected on it (m1 back either: nobody can tell the set now; it is said)."""
    w = signed_world({"m0": 0, "m1": 0, "m2": 0})
    assert w.leader() == "m0"
    w.catch_up("m0", "m1", "m2")
    w.run(0.2)
    assert isr_members(w) == ["m0", "m1", "m2"]
    old = w.service.get(ISR).data                     # epoch 1's set, signed
    w.members["m2"].store.replica.end = 10_000        # (a tail nobody acknowledged: the longest log)
    for _ in range(int((LAG_S + 0.3) / 0.05)):
        w.catch_up("m0", "m1")
        w.step(paused=("m2",))
    assert isr_members(w) == ["m0", "m1"]
    w.kill("m0")
    w.run(SESSION_S * 2, paused=("m2",))
    assert w.leader() == "m1" and json.loads(record(w, ISR)) == {"epoch": 2, "members": ["m1"]}
    outsider = w.service.client("x", 10.0)
    outsider.start()
    assert outsider.set(ISR, old)                     # epoch 1's record, written back
    w.kill("m1")
    w.run(SESSION_S * 4)
    assert w.leader() is None, "m2 is not in epoch 2's set: never elected on epoch 1's"
    assert w.members["m2"].led == []
    restart_signed(w, "m1", 10_000)
    w.run(2.0)
    assert w.leader() is None and w.members["m2"].led == []
    assert "the in-sync record is of epoch 1, older than the group's epoch 2" in caplog.text


def test_an_older_epoch_record_written_back_is_not_led_again():
    """The epoch record of epoch 1 written back (as it was signed) while the in-sync set says epoch 2:
    the next election leads epoch 3, never a second epoch 2 (two logs in one epoch)."""
    w = signed_world({"m0": 0, "m1": 0})
    w.catch_up("m0", "m1")
    w.run(0.2)
    old = w.service.get(EPOCH).data                   # "1", signed
    w.kill("m0")
    w.run(SESSION_S * 2)
    assert w.leader() == "m1" and w.members["m1"].led == [2]
    outsider = w.service.client("x", 10.0)
    outsider.start()
    assert outsider.set(EPOCH, old)
    restart_signed(w, "m0", 0)
    w.catch_up("m1", "m0")
    w.run(0.5)
    w.kill("m1")
    w.run(SESSION_S * 2)
    assert w.leader() == "m0" and w.members["m0"].led == [3]


def test_a_leader_whose_in_sync_record_is_overwritten_writes_it_again_and_the_group_still_elects():
    """Someone without the keys overwrites the in-sync set: the leader (which holds the set in its
    waits) writes it again, signed, at once (a watch on it), and is never fenced for it; killed, the
    group elects a member of that set. Before, the forged record sat there until the leader read it again
    (then it was fenced for good: a record it could not read) and the group elected nobody after it."""
    w = signed_world({"m0": 0, "m1": 0})
    w.catch_up("m0", "m1")
    w.run(0.2)
    assert isr_members(w) == ["m0", "m1"]
    outsider = w.service.client("x", 10.0)
    outsider.start()
    assert outsider.set(ISR, json.dumps({"epoch": 1, "members": ["evil"]}).encode())
    w.catch_up("m0", "m1")
    w.run(0.5)
    assert w.leader() == "m0" and not w.members["m0"].fenced
    assert json.loads(record(w, ISR)) == {"epoch": 1, "members": ["m0", "m1"]}, "written again, signed"
    w.kill("m0")
    w.run(SESSION_S * 2)
    assert w.leader() == "m1"


def test_an_epoch_record_written_by_someone_without_the_key_is_written_again_by_the_next_election():
    """The epoch record overwritten unsigned: no member acts on it; the in-sync set (written with it,
    with the same epoch) says what it was, so the leader killed, the set's other member leads the next
    epoch and the record is signed again. Before, nobody was elected while it stood."""
    w = signed_world({"m0": 0, "m1": 0})
    w.catch_up("m0", "m1")
    w.run(0.2)
    outsider = w.service.client("x", 10.0)
    outsider.start()
    assert outsider.set(EPOCH, b"7")
    w.kill("m0")
    w.run(SESSION_S * 2)
    assert w.leader() == "m1" and w.members["m1"].led == [2] and record(w, EPOCH) == b"2"


def test_a_leader_whose_log_failed_steps_down_though_its_in_sync_record_was_overwritten():
    """The leader's log failed (node.step_down_wanted, its lease revoked) while someone without the keys
    had overwritten the in-sync set: the leader writes the set again, signed, without itself, and gives up
    the lease; a member of the set leads the next epoch. Before, step_down read the refused record and
    returned at every step (before the rewrite, which runs only when it stays leader): it led on, never
    stepping down, and the group never elected."""
    w = signed_world({"m0": 0, "m1": 0, "m2": 0})
    assert w.leader() == "m0"
    w.catch_up("m0", "m1", "m2")
    w.run(0.2)
    assert sorted(isr_members(w)) == ["m0", "m1", "m2"]
    outsider = w.service.client("x", 10.0)
    outsider.start()
    m0 = w.members["m0"]
    assert outsider.set(ISR, json.dumps({"epoch": m0.epoch, "members": ["evil"]}).encode())
    epoch = m0.epoch
    m0.step_down_wanted = True
    m0.lease.revoke()
    w.run(1.0)                                          # within the session (its lease's node stays)
    assert not m0.leading and not m0.step_down_wanted
    assert w.leader() in ("m1", "m2") and w.members[w.leader()].epoch > epoch
    assert "m0" not in isr_members(w) and "evil" not in isr_members(w)
