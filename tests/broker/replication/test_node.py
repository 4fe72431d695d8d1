"""broker/replication/node.py: a broker group member's role in an in-process broker (a static
leader, no coordinator): what it refuses and why while it leads, is fenced or follows; a manual
promotion to a new epoch, and the calls that come while it installs the leader's service (with
proxy.py); the status it reports."""

import asyncio
import threading
from types import SimpleNamespace

import grpc
import pytest

from tidemq.broker import server
from tidemq.broker.replication.node import ReplicationNode
from tidemq.config import BrokerConfig, ReplicationConfig, StoreConfig
from tidemq.protocol import replication as rp
from tidemq.protocol.stubs import Code, pb, sgrpc, spb
from tidemq.store import Message, MessageStore, PutReason

from ...support.wait import PATIENCE_S


def with_member(tmp_path, check, **replication):
    """check(node, store) on the loop of a started broker that leads group g (static; ``replication``:
    more ReplicationConfig fields)."""
    store = StoreConfig(root_dir=str(tmp_path / "store"), segment_size_bytes=1 << 20, index_slots=1000,
                        index_entries=4000, auto_create_topics=True)
    b = server.Broker(store, BrokerConfig(host="127.0.0.1", port=0, metrics_port=0), lambda line: None,
                      replication=ReplicationConfig(broker_group="g", broker_id="g-0", broker_role="leader",
                                                    **replication))

    async def main():
        await b.start()
        try:
            await check(b.replication, b.store)
        finally:
            await b.stop()
    asyncio.run(main())


def put(store):
    return store.put(Message("T", b"x"))


def test_a_static_leader_leads_epoch_1_and_serves_its_group_only(tmp_path):
    async def check(node, store):
        assert node.role == "leader" and node.epoch == 1 and node.write_refusal() is None
        assert put(store).ok
        assert node.serving_refusal("g", 1) is None
        assert node.serving_refusal("h", 1) == "this is broker group 'g', not 'h'"
        assert "newer than mine (1)" in node.serving_refusal("g", 2)
        st = node.status()
        assert (st["group"], st["member"], st["role"], st["epoch"], st["followers"]) == ("g", "g-0", "leader", 1, [])
    with_member(tmp_path, check)


def test_a_fenced_leader_refuses_writes_until_unfenced(tmp_path):
    async def check(node, store):
        await node.fence("coordinator session suspended")
        assert node.role == "leader (fenced)"
        assert node.write_refusal() == "fenced: coordinator session suspended"
        assert node.serving_refusal("g", 1) == node.write_refusal()
        r = put(store)
        assert not r.ok and r.reason is PutReason.NOT_LEADER
        await node.unfence()
        assert node.role == "leader" and node.write_refusal() is None and put(store).ok
    with_member(tmp_path, check)


def test_a_follower_names_its_leader_and_a_promotion_leads_a_new_epoch(tmp_path):
    async def check(node, store):
        assert put(store).ok
        await node.follow("127.0.0.1:1")               # nobody answers there: it keeps trying
        assert node.role == "follower" and node.client is not None
        why = node.write_refusal()
        assert why == "not the leader of broker group 'g' (g-0 follows); the leader is 127.0.0.1:1"
        r = put(store)
        assert not r.ok and r.reason is PutReason.NOT_LEADER and why in r.error
        end = store.replica.end
        epoch = await node.promote()
        assert epoch == 2 and node.epoch == 2 and node.role == "leader" and node.client is None
        assert store.epochs.snapshot()[-1] == (2, end), "the new epoch begins where the log ended"
        assert put(store).ok and node.status()["role_changes"] == 3
    with_member(tmp_path, check)


def test_a_static_leader_whose_commit_log_fails_leads_a_new_epoch_from_the_cut(tmp_path):
    """No coordinator to step down through: the leader whose commit-log fsync failed (store/
    log_failure.py: cut back to its durable end, going on in its other directory) leads a new epoch
    beginning at the cut, so that a follower holding records after it finds them diverged."""
    import errno
    import threading
    from types import SimpleNamespace

    from tidemq.broker.replication.node import ReplicationNode
    from tidemq.store import MessageStore, PutStatus
    from tidemq.testing.faulty_io import FaultyFileIO

    from ...support.store import memory_config
    from ...support.wait import PATIENCE_S

    fio = FaultyFileIO(seed=2)
    store = MessageStore(memory_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=600_000,
                                       commitlog_dirs=("/l/a", "/l/b")), fio=fio).start()

    async def nothing(*_a, **_k):
        pass
    host = SimpleNamespace(store=store, service=None, endpoint="127.0.0.1:1", activate=nothing, leader_port=nothing)

    # the new epoch's recording held (it runs on a thread): meanwhile no Epochs answer may name this
    # member the leader (a follower asking then would compare against epochs without the cut)
    begin, recording, go_on = store.epochs.begin, threading.Event(), threading.Event()

    def held_begin(*a):
        recording.set()
        assert go_on.wait(PATIENCE_S)
        return begin(*a)

    async def main():
        node = ReplicationNode(host, ReplicationConfig(broker_group="g", broker_id="g-0", broker_role="leader"))
        await node.start()
        store.epochs.begin = held_begin           # (epoch 1 begun)
        try:
            assert node.epoch == 1
            ok = [put(store) for _ in range(5)]
            assert all(r.ok for r in ok)
            fio.fail("fsync", errno.EIO, "/l/a/")
            assert put(store).status is PutStatus.FLUSH_DISK_FAILED
            while not recording.is_set():
                await asyncio.sleep(0.01)
            during = rp.loads(await node.server.epochs())
            assert not during["leader"] and not node.leading, during
            go_on.set()
            for _ in range(int(PATIENCE_S / 0.01)):
                if node.epoch == 2 and node.leading:
                    break
                await asyncio.sleep(0.01)
            cut = ok[-1].commitlog_offset + ok[-1].size
            assert node.epoch == 2 and node.leading
            assert store.epochs.snapshot()[-1] == (2, cut), "the new epoch begins at the cut"
            assert put(store).ok
        finally:
            await node.stop()
    try:
        asyncio.run(main())
    finally:
        store.shutdown()


def with_sync_leader(tmp_path, check):
    """with_member, SYNC, with a lag time long enough that no follower in these tests falls out on its own."""
    with_member(tmp_path, check, replication_mode="SYNC", replica_lag_time_max_ms=60_000)


def test_a_send_while_the_set_is_short_waits_for_a_member_coming_back_not_refused_at_once(tmp_path):
    """HA_NOT_AVAILABLE right after a failover or a restart, while a follower reconnects: a send
    waits (bounded) for the set to reach in_sync_replicas_min when a member is on its way back, and is
    put then; with nobody on the way it goes on at once (and is refused, issue 27)."""
    async def check(node, store):
        assert node.in_sync_short() and put(store).reason is PutReason.REPLICAS_NOT_ENOUGH
        await asyncio.wait_for(node.until_in_sync(600), 60)      # nobody coming: no wait
        conn = node.acks.connect("g-1", "127.0.0.1:1", store.replica.end).conn    # a follower back, caught up
        await asyncio.wait_for(node.until_in_sync(600), 60)      # until the set took it in
        assert not node.in_sync_short() and node.acks.isr == {"g-1"}
        assert node.acks.refusal() is None
        node.acks.disconnect("g-1", conn)                        # gone again
        node.acks.update_isr(exclude=["g-1"])
        await asyncio.wait_for(node.until_in_sync(600), 60)      # nobody coming: no wait, refused as before
        assert put(store).reason is PutReason.REPLICAS_NOT_ENOUGH
    with_sync_leader(tmp_path, check)


class _GatedEpochs:
    """A leader reached through the Transport seam whose Epochs answer waits for ``gate``; counts the calls."""

    def __init__(self, answer: dict) -> None:
        self.answer, self.calls, self.gate = answer, 0, asyncio.Event()

    def connect(self, endpoint):
        outer = self

        class Channel:
            async def __aenter__(self):
                return self

            async def __aexit__(self, *exc):
                return None

            async def epochs(self, timeout_s):
                outer.calls += 1
                await outer.gate.wait()
                return rp.dumps(outer.answer)
        return Channel()


def test_a_static_followers_routes_arriving_together_share_one_epochs_call_to_its_leader(tmp_path):
    """A burst of routes asked of a static group's follower (node.fresh_view) makes one Epochs call to its
    leader, not one each; every route then names the member the leader's view added."""
    store = MessageStore(StoreConfig(root_dir=str(tmp_path / "store"), segment_size_bytes=1 << 20,
                                     index_slots=1000, index_entries=4000))
    store.start()
    joined = {"endpoint": "127.0.0.1:9", "leader_endpoint": "", "role": "follower"}
    leader = _GatedEpochs({"leader": True, "group": "g", "view": {"members": {"g-2": joined}}})
    node = ReplicationNode(SimpleNamespace(store=store, endpoint="127.0.0.1:8"),
                           ReplicationConfig(broker_group="g", broker_id="g-1", broker_role="follower",
                                             leader_endpoint="127.0.0.1:7"), transport=leader)
    node.leader_endpoint = "127.0.0.1:7"

    async def main():
        routes = [asyncio.ensure_future(node.fresh_view(600.0)) for _ in range(5)]
        while leader.calls == 0:                 # the first route's call reached the leader
            await asyncio.sleep(0)
        for _ in range(10):                      # the other routes had their turns meanwhile
            await asyncio.sleep(0)
        leader.gate.set()
        views = await asyncio.gather(*routes)
        await node.stop()
        return views
    try:
        views = asyncio.run(main())
    finally:
        store.shutdown()
    assert leader.calls == 1
    assert all(v["members"].get("g-2") == joined for v in views)


# the promotion window: elected (the store takes puts), the leader's service not in place yet ---------

def gate_leading_service(monkeypatch, leading_gated: bool = True):
    """(gate, building): the leader's service (``leading_gated``; else the follower's) -- server.activate
    builds it in a thread -- is built only once ``gate`` is set; ``building`` is set when a change of
    role reaches it."""
    gate, building = threading.Event(), threading.Event()
    real = server.MessagingService

    def build(*args, **kwargs):
        leading = args[3] if len(args) > 3 else kwargs.get("leading", True)
        if leading == leading_gated:
            building.set()
            gate.wait(PATIENCE_S)
        return real(*args, **kwargs)
    monkeypatch.setattr(server, "MessagingService", build)
    return gate, building


def with_follower(tmp_path, check):
    """check(broker) on the loop of a started static follower (its leader at an address nobody serves)."""
    store = StoreConfig(root_dir=str(tmp_path / "store"), segment_size_bytes=1 << 20, index_slots=1000,
                        index_entries=4000, auto_create_topics=True)
    b = server.Broker(store, BrokerConfig(host="127.0.0.1", port=0, metrics_port=0), lambda line: None,
                      replication=ReplicationConfig(broker_group="g", broker_id="g-1", broker_role="follower",
                                                    leader_endpoint="127.0.0.1:9"))

    async def main():
        await b.start()
        try:
            await check(b)
        finally:
            await b.stop()
    asyncio.run(main())


async def until(cond, what: str) -> None:
    for _ in range(int(PATIENCE_S / 0.01)):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not within {PATIENCE_S} s: {what}")


def send_request(topic: str):
    return spb.SendMessageRequest(messages=[pb.Message(
        topic=pb.Resource(name=topic), body=b"x",
        system_properties=pb.SystemProperties(message_id="01PROMOTED", message_type=pb.MessageType.NORMAL))])


def test_a_call_in_the_promotion_window_waits_for_the_leaders_service_and_is_served_by_it(tmp_path, monkeypatch):
    """A route for a topic the leader creates, and a send to it, arriving while a promoted member's
    leader's service is being built, are answered by that service once it is in place (OK), never by
    the follower's it replaces (TOPIC_NOT_FOUND: an official producer's start fails on it); the member
    says "leader" only then."""
    gate, building = gate_leading_service(monkeypatch)

    async def check(b):
        node = b.replication
        promote = asyncio.ensure_future(node.promote())
        await until(building.is_set, "the promotion building the leader's service")
        assert node.store.following is False                  # the store takes puts: the window
        assert node.role == "leader (starting)" and node.status()["role"] == "leader (starting)"
        async with grpc.aio.insecure_channel(f"127.0.0.1:{b.port}") as ch:
            stub = sgrpc.MessagingServiceStub(ch)
            route = asyncio.ensure_future(stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Fresh")),
                                                          timeout=PATIENCE_S))
            sent = asyncio.ensure_future(stub.SendMessage(send_request("Fresh"), timeout=PATIENCE_S))
            await until(lambda: (route.done() and sent.done()) or node.install_waits >= 2,
                        "both calls waiting for the leader's service")
            assert not route.done() and not sent.done()
            gate.set()
            r, s = await route, await sent
        assert r.status.code == Code.OK, (r.status.code, r.status.message)
        assert {q.permission for q in r.message_queues} == {pb.Permission.READ_WRITE}
        assert s.status.code == Code.OK and s.entries[0].status.code == Code.OK, s
        assert await promote == 1 and node.role == "leader" and node.status()["install_waits"] == 2
    with_follower(tmp_path, check)


def test_a_call_that_cannot_wait_out_the_promotion_is_answered_unavailable(tmp_path, monkeypatch):
    """A route whose deadline ends before the leader's service is in place: UNAVAILABLE (gRPC's "try
    again", which the clients retry), not the follower's TOPIC_NOT_FOUND."""
    gate, building = gate_leading_service(monkeypatch)

    async def check(b):
        node = b.replication
        promote = asyncio.ensure_future(node.promote())
        await until(building.is_set, "the promotion building the leader's service")
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{b.port}") as ch:
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await sgrpc.MessagingServiceStub(ch).QueryRoute(
                        spb.QueryRouteRequest(topic=pb.Resource(name="Fresh")), timeout=2)
            # (ours, or the client's own deadline on a machine too busy to answer in the margin: both retried)
            assert e.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        finally:
            gate.set()
        await promote
        assert node.role == "leader"
    with_follower(tmp_path, check)


def test_a_call_while_a_leader_steps_down_waits_for_the_followers_service(tmp_path, monkeypatch):
    """A leader stepping down (node.follow) installs its follower's service: a route arriving meanwhile
    waits for it and is answered by it (a follower creates no topic: TOPIC_NOT_FOUND), never by the
    leader's service going, which created the topic in a store that follows now."""
    gate, building = gate_leading_service(monkeypatch, leading_gated=False)

    async def check(node, store):
        b = node.host
        stepping = asyncio.ensure_future(node.follow("127.0.0.1:9"))
        await until(building.is_set, "the step-down building the follower's service")
        async with grpc.aio.insecure_channel(f"127.0.0.1:{b.port}") as ch:
            route = asyncio.ensure_future(sgrpc.MessagingServiceStub(ch).QueryRoute(
                spb.QueryRouteRequest(topic=pb.Resource(name="Fresh")), timeout=PATIENCE_S))
            # (waiting; before the fix, answered at once by the leader's service going)
            await until(lambda: route.done() or node.install_waits >= 1, "the route waiting for the follower's service")
            gate.set()
            r = await route
        await stepping
        assert r.status.code == Code.TOPIC_NOT_FOUND and node.role == "follower"
        assert store.queue_count("Fresh") == 0, "no topic made in a store that follows"
    with_member(tmp_path, check)


def test_a_leader_whose_commit_log_failed_sends_nothing_more_in_its_epoch_and_its_high_watermark_stays(tmp_path):
    """SYNC + SYNC_FLUSH, followers a and b in the set. Record P0 is made durable (D: its end) and
    copied by b; a's stream is slow (its send of P0 still under way). Record P1 is appended and b
    copies it; the fsync covering P1 fails: the log is cut at D (log_failure.py), sealed there with a
    BLANK, and goes on in a new segment (its flushed offset there). Until the step down (held here:
    with ZooKeeper it is a round trip away) the leader sends nothing more in that epoch (the BLANK at D
    to a, P1 on b: two logs in one epoch, and a RAW copy of "damaged" bytes to fix whichever led:
    test_log_failure_group_e2e.py's served-then-cut), refuses a new stream, and its high watermark
    never passes D whatever a follower confirms (b served P1, which a new leader without it took back)."""
    import errno

    from tidemq.testing.faulty_io import FaultyFileIO

    from ...support.store import memory_config

    fio = FaultyFileIO(seed=2)
    store = MessageStore(memory_config(flush_disk_type="SYNC_FLUSH", commitlog_dirs=("/l/a", "/l/b")), fio=fio,
                         stepped_flush=True).start()

    async def nothing(*_a, **_k):
        pass
    host = SimpleNamespace(store=store, service=None, endpoint="127.0.0.1:1", activate=nothing, leader_port=nothing)

    async def main():
        node = ReplicationNode(host, ReplicationConfig(broker_group="g", broker_id="g-0", broker_role="leader",
                                                       replication_mode="SYNC", replica_lag_time_max_ms=600_000))
        await node.start()
        node._log_failed = nothing                 # its step down (a new epoch here) has not happened yet
        frames = {"a": [], "b": []}
        gate = {"a": asyncio.Event(), "b": asyncio.Event()}
        gate["b"].set()
        acks: dict[str, asyncio.Queue] = {"a": asyncio.Queue(), "b": asyncio.Queue()}

        def stream(member):
            async def requests():
                yield rp.hello("g", member, "e-" + member, 1, 0)
                while (x := await acks[member].get()) is not None:
                    yield x

            async def send(raw):
                await gate[member].wait()
                frames[member].append(rp.decode(raw))
            return asyncio.create_task(node.server.serve_stream(requests(), send))

        def has(member, end):
            return any(f.kind == rp.DATA and f.offset + len(f.payload) >= end for f in frames[member])

        async def until(cond):
            for _ in range(int(PATIENCE_S / 0.01)):
                if cond():
                    return
                await asyncio.sleep(0.01)
            raise AssertionError("not in time")

        tasks = [stream("a"), stream("b")]
        await until(lambda: set(node.acks.followers) == {"a", "b"})
        node.acks.set_isr(["a", "b"])
        try:
            assert store.put_batch([Message("T", b"P0")], wait=False).all_ok()
            d = store.commit_log.flush()
            await until(lambda: has("b", d))
            x = store.put_batch([Message("T", b"P1")], wait=False)[0]
            end = x.commitlog_offset + x.size
            await until(lambda: has("b", end))
            for m, off in (("a", d), ("b", end)):     # a's P0 frame is still on its way: it confirms it anyway
                acks[m].put_nowait(rp.encode(rp.ACK, 1, off))
            await until(lambda: node.acks.followers["b"].confirmed == end)
            fio.fail("fsync", errno.EIO, "/l/a/")
            with pytest.raises(OSError):
                store.commit_log.flush()
            [failure] = store.log_failures
            assert failure.durable_end == d and store.replica.confirmed() > end, "cut at D, flushed on after it"
            assert node.log_failed_in_epoch()
            gate["a"].set()                          # a's stream goes on: from D, where the BLANK is now

            def after():
                return [f for f in frames["a"] if f.kind != rp.DATA or f.offset >= d]
            await until(lambda: len(after()) > 1 or tasks[0].done())
            assert [(f.kind, f.offset) for f in after()] == [(rp.REFUSE, 0)], "nothing after D in this epoch: no BLANK"
            after = after()
            assert "commit log failed" in after[0].payload.decode()
            acks["a"].put_nowait(None), acks["b"].put_nowait(None)
            node.acks.confirm("a", node.acks.followers["a"].conn, failure.resume_offset)   # (had it copied a BLANK)
            assert node.acks.hw <= d, "the high watermark never passes the cut in this epoch"
            refused = []

            async def again():
                yield rp.hello("g", "a", "e-a", 1, d)

            async def keep(raw):
                refused.append(rp.decode(raw))
            await node.server.serve_stream(again(), keep)
            assert [f.kind for f in refused] == [rp.REFUSE], "a new stream in that epoch is refused"
        finally:
            for t in tasks:
                t.cancel()
            await node.stop()
    try:
        asyncio.run(main())
    finally:
        store.shutdown()


def test_a_member_that_knows_no_leader_answers_unavailable_not_topic_not_found(tmp_path):
    """A member following no one -- with a coordinator, an election under way, and the moment after the
    election is recorded (routes name the winner) before its lead() installs the leader's service --
    answers a route, an assignment and a send for a topic it does not have UNAVAILABLE (retried by the
    clients, as the "leader (starting)" wait's), not its follower's TOPIC_NOT_FOUND (an official
    producer's start fails on it). Knowing its leader, a follower answers TOPIC_NOT_FOUND as before."""
    async def check(node, store):
        b = node.host
        await node.follow("")                   # (node.start with a coordinator: until the election says)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{b.port}") as ch:
            stub = sgrpc.MessagingServiceStub(ch)
            fresh = pb.Resource(name="Fresh")
            calls = [lambda: stub.QueryRoute(spb.QueryRouteRequest(topic=fresh), timeout=PATIENCE_S),
                     lambda: stub.QueryAssignment(spb.QueryAssignmentRequest(topic=fresh, group=pb.Resource(name="G")),
                                                  timeout=PATIENCE_S),
                     lambda: stub.SendMessage(send_request("Fresh"), timeout=PATIENCE_S)]
            for call in calls:
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await call()
                assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
            await node.follow("127.0.0.1:9")
            r = await calls[0]()
            assert r.status.code == Code.TOPIC_NOT_FOUND, r.status
        assert store.queue_count("Fresh") == 0
    with_member(tmp_path, check)
