"""broker/replication/follower.py: the follower's session against a real leader server (leader.py)
over real stores on loopback. It copies the leader's log byte for byte and its epoch entries,
confirms what it wrote, follows new appends; it refuses to follow a member that does not lead,
leads another group, or leads an epoch older than one it knows (and says why in its status).

The nodes are stand-ins (tests/support/replication.py) holding what the two sides read."""

import asyncio
import os

import pytest

from tidemq.broker.replication.follower import ReplicationClient
from tidemq.store import Message, MessageStore, StoreConfig

from ...support.replication import FollowerNode, LeaderNode, leader_server
from ...support.wait import wait_until

EPOCH = 4


def open_store(root):
    return MessageStore(StoreConfig(root_dir=str(root), segment_size_bytes=1 << 20, index_slots=100,
                                    index_entries=400)).start()


@pytest.fixture
def stores(tmp_path):
    leader = open_store(tmp_path / "leader")
    leader.lead(EPOCH)
    leader.create_topic("T", 2)
    assert leader.put_batch([Message("T", os.urandom(200)) for _ in range(50)]).all_ok()
    follower = open_store(tmp_path / "follower")
    follower.follow("this broker follows the leader")
    yield leader, follower
    follower.shutdown()
    leader.shutdown()


def segment(store):
    with open(os.path.join(store.config.root_dir, "commitlog", "0" * 20), "rb") as f:
        return f.read(store.replica.end)


def follow(lnode, fnode, check, message_bytes_max=None):
    async def main():
        async with leader_server(lnode, message_bytes_max) as ep:
            client = ReplicationClient(fnode, ep)
            client.start()
            try:
                await asyncio.to_thread(check, client)
            finally:
                await client.stop()
    asyncio.run(main())


def test_the_follower_copies_the_log_and_epochs_confirms_and_follows_appends(stores):
    leader, follower = stores
    lnode, fnode = LeaderNode(leader, EPOCH), FollowerNode(follower)

    def check(client):
        wait_until(lambda: follower.replica.end == leader.replica.end, "the follower has the leader's log")
        assert segment(follower) == segment(leader)
        assert follower.epochs.snapshot() == leader.epochs.snapshot() == [(EPOCH, 0)]
        assert fnode.known_epoch == EPOCH and fnode.views[-1] == {"group": "g"}
        wait_until(lambda: lnode.acks.followers["g-1"].confirmed == leader.replica.end, "its confirmation")
        assert lnode.seen == ["g-1"] and client.sessions == 1

        assert leader.put_batch([Message("T", b"later %d" % i) for i in range(5)]).all_ok()
        lnode.acks.appended(leader.replica.end)
        wait_until(lambda: follower.replica.end == leader.replica.end, "the new appends")
        assert segment(follower) == segment(leader)
        wait_until(lambda: client.status()["connected"] and client.status()["lag_bytes"] == 0, "no lag")
        assert client.status()["last_error"] is None
    follow(lnode, fnode, check)
    msgs = follower.get("g", "T", 0, 0, 100).messages + follower.get("g", "T", 1, 0, 100).messages
    assert len(msgs) == 55, "dispatched into the follower's own queues"


@pytest.mark.parametrize("case, says", [
    ("not leading", "is not the leader"),
    ("other group", "leads group 'g', not 'h'"),
    ("older epoch", f"leads epoch {EPOCH}, older than {EPOCH + 1}"),
])
def test_the_follower_refuses_a_member_it_must_not_follow(stores, case, says):
    leader, follower = stores
    lnode = LeaderNode(leader, EPOCH)
    lnode.leading = case != "not leading"
    fnode = FollowerNode(follower, group="h" if case == "other group" else "g",
                         known_epoch=EPOCH + 1 if case == "older epoch" else 0)

    def check(client):
        wait_until(lambda: client.status()["last_error"] and says in client.status()["last_error"], says)
        assert follower.replica.end == 0 and client.sessions == 0 and lnode.seen == []
    follow(lnode, fnode, check)


def test_the_copy_goes_on_past_a_damaged_stretch_of_the_leaders_log(stores):
    """A record whose header went bad on the leader's disk goes as a RAW frame: written as it is,
    counted, and the records after it are copied and served."""
    leader, follower = stores
    victim = leader.get("g", "T", 0, 3, 1).messages[0].commitlog_offset
    leader.segments.segments[0].mapping[victim + 4:victim + 8] = b"\x00" * 4
    lnode, fnode = LeaderNode(leader, EPOCH), FollowerNode(follower)

    def check(client):
        wait_until(lambda: follower.replica.end == leader.replica.end, "the follower has the leader's log")
        assert segment(follower) == segment(leader)
        st = client.status()
        assert st["raw_regions"] == 1 and st["raw_bytes"] > 0 and st["last_error"] is None
    follow(lnode, fnode, check)
    got = follower.get("g", "T", 0, 0, 100).messages + follower.get("g", "T", 1, 0, 100).messages
    assert len(got) == 49, "every record but the damaged one, as on the leader"


def test_the_broker_state_is_copied_in_chunks_whatever_its_size(stores, monkeypatch):
    """A state document larger than a gRPC message the leader may send (grpc_message_bytes_max) is
    copied whole, in frames of replication_frame_bytes_max."""
    from tidemq.broker.replication import follower as follower_module
    from tidemq.broker.replication import leader as leader_module
    leader, follower = stores
    big = {"pop": "x" * (6 << 20)}                  # 6 MiB, over the 4.5 MiB message limit below
    monkeypatch.setattr(leader_module.state, "snapshot", lambda store, service: big)
    applied = []
    monkeypatch.setattr(follower_module.state, "apply", lambda doc, store, service, state_dir: applied.append(doc))
    lnode, fnode = LeaderNode(leader, EPOCH), FollowerNode(follower)
    lnode.service = fnode.service = object()

    def check(client):
        wait_until(lambda: client.status()["state_copies"] >= 1, "a state copy")
        assert applied[0] == big and client.state_bytes > 6 << 20
    follow(lnode, fnode, check, message_bytes_max=int(4.5 * (1 << 20)))


def leader_frames(leader, frame_bytes):
    """The leader's log as the DATA frames a stream carries (read_span), up to its end."""
    from tidemq.protocol import replication as rp
    frames, offset = [], 0
    while True:
        off, data, raw, nxt = leader.replica.read_span(offset, frame_bytes)
        if not data:
            return frames
        assert not raw
        frames.append(rp.decode(rp.encode(rp.DATA, EPOCH, off, leader.replica.end, data, 0)))
        offset = nxt


def test_frames_written_in_one_pass_are_the_leaders_log_across_segments_and_confirmed_once(stores):
    from tidemq.broker.replication.follower import write_frames
    leader, follower = stores
    assert leader.put_batch([Message("T", os.urandom(4000), keys=(f"k{i}",)) for i in range(400)]).all_ok()
    frames = leader_frames(leader, 64 << 10)
    assert leader.replica.end > 1 << 20 and len(frames) > 20          # two segments, many frames
    seen = []
    write_frames(follower, frames, lambda: seen.append(follower.replica.confirmed()))
    assert seen == [leader.replica.end], "one confirmation, after everything was written"
    assert follower.replica.end == leader.replica.end
    # the segments the log has (not the next one each store's allocator may have made ahead, on its own time)
    for name in sorted(n for n in os.listdir(os.path.join(leader.config.root_dir, "commitlog"))
                       if n.isdigit() and int(n) < leader.replica.end):
        with open(os.path.join(leader.config.root_dir, "commitlog", name), "rb") as a, \
                open(os.path.join(follower.config.root_dir, "commitlog", name), "rb") as b:
            assert a.read() == b.read(), name
    follower.drain_dispatch()
    assert [follower.max_offset("T", q) for q in range(2)] == [leader.max_offset("T", q) for q in range(2)]
    assert sum(follower.max_offset("T", q) for q in range(2)) == 450, "every record in the follower's own queues"
    last = follower.get("g", "T", 1, follower.max_offset("T", 1) - 1, 1).messages
    assert last and last[0].body == leader.get("g", "T", 1, leader.max_offset("T", 1) - 1, 1).messages[0].body


def test_a_damaged_frame_in_a_pass_writes_nothing_of_its_run_and_confirms_only_what_was_written(stores):
    from tidemq.broker.replication.follower import write_frames
    from tidemq.store.replica import ReplicaError
    leader, follower = stores
    assert leader.put_batch([Message("T", os.urandom(4000)) for i in range(400)]).all_ok()
    frames = leader_frames(leader, 64 << 10)
    seg = leader.config.segment_size_bytes
    bad = next(i for i, f in enumerate(frames) if f.offset >= seg) + 2      # in the second segment's run
    payload = bytearray(frames[bad].payload)
    payload[4:8] = b"\0\0\0\0"                                              # its first record's magic
    frames[bad] = frames[bad]._replace(payload=bytes(payload))
    seen = []
    with pytest.raises(ReplicaError):
        write_frames(follower, frames, lambda: seen.append(follower.replica.confirmed()))
    assert follower.replica.end == seg, "the first segment's run written, nothing of the damaged run"
    assert seen == [seg]
    with open(os.path.join(leader.config.root_dir, "commitlog", "0" * 20), "rb") as a, \
            open(os.path.join(follower.config.root_dir, "commitlog", "0" * 20), "rb") as b:
        assert a.read() == b.read()


def test_a_heartbeat_right_after_an_ack_that_moved_the_offset_is_not_answered_an_idle_one_is():
    """The confirmer (follower._Confirmer): one ACK per write; the HEARTBEAT a leader sends after an
    ACK moved its high watermark goes unanswered (the next ACK confirms it); of HEARTBEATs with
    nothing written between (idle), every one is answered, so the leader hears it is caught up."""
    from tidemq.broker.replication.follower import _Confirmer
    from tidemq.protocol import replication as rp

    sent = []

    class Stream:
        async def write(self, frame):
            sent.append(rp.decode(frame).offset)

    class Replica:
        end = 0

        def confirmed(self):
            return self.end

    class Client:
        acks_sent = 0

    async def main():
        replica, client = Replica(), Client()
        c = _Confirmer(Stream(), EPOCH, replica, client)
        task = asyncio.create_task(c.run())

        async def settle():                       # the confirmer takes the wake-up (no timing)
            for _ in range(5):
                await asyncio.sleep(0)
        replica.end = 100
        c.wake()                                  # written: ACK 100
        await settle()
        c.wake(heartbeat=True)                    # the HEARTBEAT that ACK caused: not answered
        await settle()
        c.wake(heartbeat=True)                    # idle: answered
        await settle()
        c.wake(heartbeat=True)                    # idle: answered
        await settle()
        replica.end = 250
        c.wake()
        c.wake(heartbeat=True)                    # a write and a HEARTBEAT in one pass: one ACK
        await settle()
        task.cancel()
        return client.acks_sent
    assert asyncio.run(main()) == 4
    assert sent == [100, 100, 100, 250]


def test_a_state_copy_that_keeps_failing_is_said_once_while_it_lasts(stores, monkeypatch, caplog):
    """A follower with authentication on whose leader sends its secrets in clear refuses every copy
    (state.apply: sealed.Unsealed), one every replication_state_interval_ms: that is one WARNING while
    it lasts (said.py), counted on the status, and one line when a copy works again; before, a line
    every interval (every second by default) for as long as it lasted."""
    import logging
    from types import SimpleNamespace
    from tidemq.broker.replication import follower as follower_module
    from tidemq.broker.replication import leader as leader_module
    leader, follower = stores
    monkeypatch.setattr(leader_module.state, "snapshot", lambda store, service: {"pop": {"secret": "in clear"}})
    lnode, fnode = LeaderNode(leader, EPOCH), FollowerNode(follower)
    lnode.service = object()
    fnode.service = SimpleNamespace(config=SimpleNamespace(auth_enabled=True, secret_key="the group's key"))
    fnode.config.replication_state_interval_ms = 10
    applied = []

    def copied(doc, store, service, state_dir):
        applied.append(doc)
    caplog.set_level(logging.WARNING, logger="tidemq.broker")

    def check(client):
        wait_until(lambda: client.status()["state_copies_failed"] >= 5, "copies refused again and again")
        said = [r for r in caplog.records if "copying the leader's state" in r.getMessage()]
        assert len(said) == 1 and "in clear" in said[0].getMessage(), [r.getMessage() for r in said]
        assert client.status()["state_copies"] == 0
        monkeypatch.setattr(follower_module.state, "apply", copied)     # the keys agree again
        wait_until(lambda: client.status()["state_copies"] >= 1, "a copy applied")
        said = [r.getMessage() for r in caplog.records if "copying the leader's state" in r.getMessage()]
        assert len(said) == 2 and "works again" in said[1], said
    follow(lnode, fnode, check)
    assert applied
