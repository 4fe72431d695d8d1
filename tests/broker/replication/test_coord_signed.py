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

from .test_coordinator import World

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
