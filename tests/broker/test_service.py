"""broker/service.py in a broker group, in process: a leader elected through the in-process
coordinator (tidemq.testing.memory_coordinator, stepped on the test's loop) and its
MessagingService. QueryAssignment names the members the coordinator holds when it is asked (the
service reads them on demand, node.fresh_view, as QueryRoute does), not the last read: a member
that joined a moment ago is in the next assignment. The coordinator's loop and the calls share
one event loop, so "a moment ago" is exact: the member joins and the assignment is asked for
with nothing of the loop run in between (the cached view cannot have been read again)."""

import asyncio
import json
from types import SimpleNamespace

from tidemq.broker.replication.node import ReplicationNode
from tidemq.broker.replication.routes import INCOMPLETE
from tidemq.broker.service import MessagingService
from tidemq.config import BrokerConfig, ReplicationConfig
from tidemq.io import SystemClock
from tidemq.protocol.stubs import Code, pb, spb
from tidemq.store import MessageStore, StoreConfig
from tidemq.testing.memory_coordinator import MemoryCoordinatorService

from ..support.wait import PATIENCE_S

SESSION_S = 60.0
MEMBERS = "/tidemq/groups/g/members"


class Deadline:
    """What the service reads of a call's context here: the client's deadline (``left_s`` left)."""

    def __init__(self, left_s: float = 30.0) -> None:
        self.left_s = left_s

    def time_remaining(self) -> float:
        return self.left_s


def assigned(response) -> set[str]:
    assert response.status.code == Code.OK, response.status
    (a,) = response.assignments
    return {f"{x.host}:{x.port}" for x in a.message_queue.broker.endpoints.addresses}


def test_an_assignment_names_a_member_that_joined_a_moment_ago_or_says_the_members_could_not_be_read(tmp_path):
    store = MessageStore(StoreConfig(root_dir=str(tmp_path / "store"), segment_size_bytes=1 << 20, index_slots=1000,
                                     index_entries=4000, auto_create_topics=True)).start()
    coordinator = MemoryCoordinatorService(SystemClock())

    async def nothing(*_a, **_k):
        pass
    host = SimpleNamespace(store=store, service=None, endpoint="127.0.0.1:1", activate=nothing, leader_port=nothing)

    async def main():
        node = ReplicationNode(host, ReplicationConfig(broker_group="g", broker_id="g-0", leader_port=2,
                                                       coordinator_session_timeout_ms=int(SESSION_S * 1000)),
                               coordination=coordinator.client("g-0", SESSION_S), coordinator_thread=False)
        await node.start()
        svc = None
        joined = coordinator.client("g-1", SESSION_S)
        try:
            for _ in range(int(PATIENCE_S / 0.01)):             # a group of one elects it
                if node.leading and node.coordinator.members_fresh():
                    break
                await asyncio.sleep(0.01)
            assert node.leading
            svc = MessagingService(store, BrokerConfig(host="127.0.0.1", port=1, metrics_port=0), group=node)
            ask = spb.QueryAssignmentRequest(topic=pb.Resource(name="T"), group=pb.Resource(name="G"))
            assert assigned(await svc.QueryAssignment(ask, Deadline())) == {"127.0.0.1:2"}
            joined.start()
            assert joined.create(f"{MEMBERS}/g-1", json.dumps(
                {"endpoint": "127.0.0.1:3", "leader_endpoint": "127.0.0.1:4", "log_end": 0, "round": -1}).encode(),
                ephemeral=True)
            # no await since it joined: the loop's read of the members has not run
            assert set(node.coordinator.members()) == {"g-0"} and not node.coordinator.members_fresh()
            assert assigned(await svc.QueryAssignment(ask, Deadline())) == {"127.0.0.1:2", "127.0.0.1:4"}
            # cut off from the coordinator with a change signalled (its watch): the members cannot be
            # read within the client's (short) deadline, and the answer says so instead of the last read
            coordinator.cut("g-0")
            node.coordinator.wake()
            r = await svc.QueryAssignment(ask, Deadline(0.5))
            assert r.status.code == INCOMPLETE and not r.assignments, r.status
        finally:
            joined.stop()
            if svc is not None:
                svc.close()
            await node.stop()
    try:
        asyncio.run(main())
    finally:
        store.shutdown()


def test_after_a_change_of_role_lite_subscriptions_ask_the_new_services_client_table(tmp_path):
    """The lite subscriptions outlive a change of role (``replaces``), and must ask whether a client is
    alive of the service in place, which hears the heartbeats and streams from then on (the old one's
    table hears nothing more: its clients would all count as gone once idle, their lite topics'
    messages passed over). The client table is told who holds subscriptions, so it never forgets them."""
    store = MessageStore(StoreConfig(root_dir=str(tmp_path / "store"), segment_size_bytes=1 << 20, index_slots=1000,
                                     index_entries=4000, auto_create_topics=True)).start()
    config = BrokerConfig(host="127.0.0.1", port=1, metrics_port=0)
    old = MessagingService(store, config)
    new = None
    try:
        assert old.lite.sync("g", "T", "c", pb.LiteSubscriptionAction.PARTIAL_ADD, ["x"]) == (Code.OK, "")
        new = MessagingService(store, config, replaces=old)
        assert new.lite is old.lite
        new.clients.terminated("c")                     # heard by the service in place: gone
        assert not new.lite.alive("c")
        new.clients.seen("c")
        assert new.lite.alive("c")
        assert new.clients._c["c"].held, "the new table knows who holds subscriptions"
    finally:
        for s in (new, old):
            if s is not None:
                s.close()
        store.shutdown()


def test_a_pull_groups_committed_offset_past_the_queues_end_comes_back_to_it_at_a_leaders_start(tmp_path):
    """A promoted follower under ASYNC replication opens its old leader's committed offsets, which may
    stand past what this log holds (the tail the failover took back). The messages sent to the new
    leader take offsets below them: a pull group (tidemq.client, Spark) resuming at its committed
    offset skipped them, for good. The leader's service brings the offset back to the queue's end."""
    from tidemq.broker.consume import group_offsets
    from tidemq.broker.state.layout import StateLayout, state_dir
    from tidemq.store import Message
    store = MessageStore(StoreConfig(root_dir=str(tmp_path / "store"), segment_size_bytes=1 << 20, index_slots=1000,
                                     index_entries=4000, auto_create_topics=True)).start()
    svc = None
    try:
        store.create_topic("T", 1)
        assert all(store.put(Message("T", b"a%d" % i)).ok for i in range(2))
        path = StateLayout(state_dir(store.config.root_dir)).consumer_offsets
        store.fio.makedirs(path.rsplit("/", 1)[0])
        group_offsets.write(store.fio, path, {("g", "T", 0): 5, ("h", "T", 0): 1, ("g", "Gone", 0): 7})
        svc = MessagingService(store, BrokerConfig(host="127.0.0.1", port=1, metrics_port=0))
        assert svc.group_offsets.get("g", "T", 0) == 2, "back to the queue's end"
        assert svc.group_offsets.get("h", "T", 0) == 1 and svc.group_offsets.get("g", "Gone", 0) == 7
        assert all(store.put(Message("T", b"n%d" % i)).ok for i in range(2, 6))
        got = store.get("g", "T", 0, svc.group_offsets.get("g", "T", 0)).messages
        assert [m.body for m in got] == [b"n2", b"n3", b"n4", b"n5"], "nothing sent to the new leader skipped"
    finally:
        if svc is not None:
            svc.close()
        store.shutdown()


def test_after_a_failure_of_the_log_every_consumers_state_past_the_cut_comes_back_to_it():
    """ASYNC_FLUSH: consumers are served records before their fsync. When it fails the queues are cut
    back (store/log_failure.py) and the broker's listener calls after_log_failure: pop cursors and
    pull groups' committed offsets past the cut come back to it (the messages sent next take those
    offsets), the timer and the transactions forget what they read past it (their own tests)."""
    import errno
    import pytest
    from tidemq.store import Message
    from tidemq.store.log_failure import LogFailed
    from tidemq.testing.faulty_io import FaultyFileIO
    from tidemq.io import ManualClock
    from ..support.store import memory_config
    fio = FaultyFileIO(seed=8)
    store = MessageStore(memory_config(segment_size_bytes=32 << 10, commitlog_dirs=("/r/a", "/r/b")), fio=fio,
                         clock=ManualClock()).start()
    svc = None
    try:
        store.create_topic("T", 1)
        svc = MessagingService(store, BrokerConfig(host="127.0.0.1", port=1, metrics_port=0))
        assert store.put(Message("T", b"a0")).ok
        store.commit_log.flush()
        assert all(store.put(Message("T", b"u%d" % i)).ok for i in range(3))     # never flushed
        assert len(svc.consumption.pop_batch("g", "T", 8, 60_000)) == 4
        svc.group_offsets.set("p", "T", 0, 4)                 # a pull group committed all four
        fio.fail("fsync", errno.EIO, "/r/a/")
        with pytest.raises(LogFailed):
            store.commit_log.flush()
        [f] = store.log_failures
        svc.after_log_failure(f)
        assert svc.group_offsets.get("p", "T", 0) == 1 and svc.consumption.pop.state("g", "T", 0).cursor == 1
        assert store.put(Message("T", b"n1")).ok
        assert [m.body for m in store.get("p", "T", 0, svc.group_offsets.get("p", "T", 0)).messages] == [b"n1"]
    finally:
        if svc is not None:
            svc.close()
        store.shutdown()


def test_a_kill_after_a_failure_of_the_log_before_its_listener_ran_skips_no_message_at_a_reused_offset():
    """A pull group committed (and a pop group received) past what a failure of the log then took; the next messages take those
    offsets again and are flushed; the process is killed before the broker's listener cut the group's
    offset back (after_log_failure never ran). The queue stands past the stale offset again: at the
    next start the group must be brought back to the cut, not left past messages it never consumed."""
    import errno
    import pytest
    from tidemq.store import Message
    from tidemq.store.log_failure import LogFailed
    from tidemq.testing.faulty_io import FaultyFileIO
    from tidemq.io import ManualClock
    from tidemq.broker.consume.filters import Subscription
    from ..support.store import memory_config
    fio, clock = FaultyFileIO(seed=9), ManualClock()
    cfg = memory_config(segment_size_bytes=32 << 10, commitlog_dirs=("/r/a", "/r/b"))
    store = MessageStore(cfg, fio=fio, clock=clock).start()
    store.create_topic("T", 1)
    svc = MessagingService(store, BrokerConfig(host="127.0.0.1", port=1, metrics_port=0))
    assert store.put(Message("T", b"a0", tags="x")).ok
    store.commit_log.flush()
    assert all(store.put(Message("T", b"u%d" % i)).ok for i in range(3))     # answered, never flushed
    svc.group_offsets.set("p", "T", 0, 4)                                     # a pull group consumed all four
    svc.group_offsets.flush()
    assert len(svc.consumption.pop_batch("g", "T", 8, 60_000)) == 4          # a pop group received them
    wants_x = Subscription(tags=["x"])                    # and one that takes tag x: a0, then passes the others
    assert len(svc.consumption.pop_batch("f", "T", 8, 60_000, wants_x)) == 1
    assert svc.consumption.pop.state("f", "T", 0).cursor == 4
    svc.pop.flush()
    fio.fail("fsync", errno.EIO, "/r/a/")
    with pytest.raises(LogFailed):
        store.commit_log.flush()
    [f] = store.log_failures
    assert f.queue_ends[("T", 0)] == 1
    assert all(store.put(Message("T", b"n%d" % i, tags="x")).ok for i in range(1, 6))  # offsets 1..5 again
    store.commit_log.flush()
    store.kill()                                     # before the listener (after_log_failure) ran
    store2 = MessageStore(cfg, fio=fio.after_crash(), clock=clock).start()
    svc2 = None
    try:
        assert store2.max_offset("T", 0) == 6
        svc2 = MessagingService(store2, BrokerConfig(host="127.0.0.1", port=1, metrics_port=0))
        off = svc2.group_offsets.get("p", "T", 0)
        assert off == 1, "the group stands past messages it never consumed"
        assert [m.body for m in store2.get("p", "T", 0, off).messages] == [b"n%d" % i for i in range(1, 6)]
        st = svc2.consumption.pop.state("g", "T", 0)
        assert st.cursor == 1 and sorted(st.inflight) == [0], "the pop group stands past messages never received"
        assert svc2.consumption.pop.state("f", "T", 0).cursor == 1, "the cursor a pass moved past them stands"
        clock.advance(61)
        got = svc2.consumption.pop_batch("f", "T", 8, 60_000, wants_x)
        assert sorted(m.body for m in got) == [b"a0"] + [b"n%d" % i for i in range(1, 6)]
        got = svc2.consumption.pop_batch("g", "T", 8, 60_000)
        assert sorted(m.body for m in got) == [b"a0"] + [b"n%d" % i for i in range(1, 6)]
        from tidemq.broker.consume.group_offsets import GroupOffsets
        on_disk = GroupOffsets(store2.fio, svc2.state_dir)
        on_disk.load()
        assert on_disk.get("p", "T", 0) == 1, "written at once"
    finally:
        if svc2 is not None:
            svc2.close()
        store2.shutdown()
