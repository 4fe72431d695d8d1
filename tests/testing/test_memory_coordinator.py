"""tidemq.testing.memory_coordinator: ZooKeeper's model in one process on a ManualClock -- sessions
that expire when the service stops hearing from them, ephemeral nodes that go with them, versions,
compare-and-set, transactions, one-shot watches, a client cut off going SUSPENDED and, back after
its session expired, LOST then a new session."""

import math

from tidemq.broker.replication.coordination import Check, Create, SessionState, SetData, Unreachable
from tidemq.io import ManualClock
from tidemq.testing.memory_coordinator import MemoryCoordinatorService

import pytest


def world(timeout_s=1.0):
    clock = ManualClock()
    svc = MemoryCoordinatorService(clock)
    a, b = svc.client("a", timeout_s), svc.client("b", timeout_s)
    a.start()
    b.start()
    return clock, svc, a, b


def test_nodes_versions_and_compare_and_set():
    _, _, a, b = world()
    a.ensure_path("/g/members")
    assert a.create("/g/epoch", b"0") and not b.create("/g/epoch", b"x")
    got = b.get("/g/epoch")
    assert (got.data, got.version, got.owner) == (b"0", 0, 0)
    assert b.set("/g/epoch", b"1", version=0) and not a.set("/g/epoch", b"2", version=0), "the loser of a CAS"
    assert a.get("/g/epoch").version == 1
    assert a.children("/g") == ["epoch", "members"] and a.get("/nope") is None
    assert not a.delete("/g"), "a node with children stays"


def test_a_transaction_applies_whole_or_not_at_all():
    _, _, a, b = world()
    a.create("/e", b"0")
    ok = a.transaction([SetData("/e", b"1", 0), Create("/leader", b"a", ephemeral=True)])
    assert ok and a.get("/leader").owner == a.session_id
    assert not b.transaction([Check("/e", 1), Create("/leader", b"b", ephemeral=True)]), "the leader node exists"
    assert not b.transaction([SetData("/e", b"9", 0), Create("/other", b"")]), "a stale version: nothing applied"
    assert b.get("/other") is None and a.get("/e").data == b"1"


def test_a_session_expires_when_the_service_stops_hearing_from_it_and_its_ephemeral_nodes_go():
    clock, svc, a, b = world(timeout_s=1.0)
    a.create("/leader", b"a", ephemeral=True)
    woken = []
    b.set_waker(lambda: woken.append(1))
    assert b.get("/leader", watch=True) is not None
    clock.advance(0.6)
    assert a.ping() and b.ping()                 # heard: the sessions live on
    clock.advance(0.6)
    svc.tick()
    assert b.get("/leader") is not None
    svc.cut("a")                                 # a partition: a is no longer heard from
    with pytest.raises(Unreachable):
        a.get("/leader")
    assert a.state is SessionState.SUSPENDED, "it cannot tell whether its session lives"
    clock.advance(0.5)
    b.ping()
    clock.advance(0.5)
    svc.tick()
    assert b.get("/leader") is None and woken, "expired: the ephemeral node went, the watcher woke"
    sid = a.session_id
    svc.heal("a")
    with pytest.raises(Unreachable):
        a.get("/leader")                         # the request that learns of the expiry
    assert a.session_id != sid and a.state is SessionState.CONNECTED, "LOST, then a new session at once"


def test_a_clean_stop_closes_the_session_a_kill_leaves_it_to_expire():
    clock, svc, a, b = world()
    a.create("/x", b"", ephemeral=True)
    a.stop()
    assert b.get("/x") is None
    c = svc.client("c", 1.0)
    c.start()
    c.create("/y", b"", ephemeral=True)
    c.abandon()
    assert b.get("/y") is not None
    clock.advance(0.5)
    b.ping()
    clock.advance(0.5)
    svc.tick()
    assert b.get("/y") is None


def test_watchers_are_woken_in_the_order_they_watched():
    """A change wakes its watchers in the order they set their watches, whatever their addresses (a
    set of clients woke them in an order that differed from run to run: a seeded simulation, whose
    members act in the order they are woken, did not replay)."""
    clock = ManualClock()
    svc = MemoryCoordinatorService(clock)
    clients = [svc.client(f"c{i}", 1.0) for i in range(24)]
    woken = []
    for c in clients:
        c.start()
        c.set_waker(lambda c=c: woken.append(c.name))
    clients[0].create("/x", b"")
    order = list(reversed(clients[::2])) + clients[1::2]        # not the order they were made in
    for c in order:
        c.get("/x", watch=True)
    woken.clear()
    clients[0].set("/x", b"1")
    assert woken == [c.name for c in order]


def test_with_a_tick_a_session_expires_at_the_first_tick_at_or_after_its_deadline():
    clock = ManualClock()
    svc = MemoryCoordinatorService(clock, tick_s=0.5)
    a = svc.client("a", 1.0)
    a.start()
    a.create("/leader", b"a", ephemeral=True)
    heard = clock.monotonic_s()
    bucket = math.ceil((heard + 1.0) / 0.5 - 1e-9) * 0.5      # ZooKeeper's expiry bucket for it
    svc.cut("a")
    clock.advance(bucket - clock.monotonic_s() - 0.001)
    assert svc.tick() == [] and svc.get("/leader") is not None, "due, but its bucket has not come"
    clock.advance(0.001)
    assert svc.tick() == [a.session_id] and svc.get("/leader") is None


def test_without_a_tick_a_session_expires_at_its_deadline():
    clock, svc, a, b = world(timeout_s=1.0)
    svc.cut("a")
    clock.advance(0.5)
    assert b.ping()
    clock.advance(0.499)
    assert svc.tick() == []
    clock.advance(0.001)
    assert svc.tick() == [a.session_id]


def test_a_watch_notification_goes_through_deliver_and_wakes_its_client_only_when_delivered():
    clock = ManualClock()
    pending = []
    svc = MemoryCoordinatorService(clock, deliver=pending.append)
    a, b = svc.client("a", 1.0), svc.client("b", 1.0)
    a.start()
    b.start()
    woken = []
    b.set_waker(lambda: woken.append("b"))
    assert b.get("/leader", watch=True) is None
    a.create("/leader", b"a", ephemeral=True)
    assert woken == [] and len(pending) == 1, "on its way: not yet delivered"
    pending.pop()()
    assert woken == ["b"]
