"""The broker's state directory (``<root>/broker``) removed while the broker runs: the state written
after it (committed offsets, the pop journal's acks) is written again -- the directory made anew,
the journal reopened in it -- instead of failing every second (offsets) or going on into a file
no name reaches (the journal: every ack since lost at the next start, the messages delivered
again). Real broker processes, stopped and started again."""

import os
import shutil

from tidemq import checked
from tidemq.client import PopConsumer, Producer, PullConsumer
from tidemq.io import OsFileIO
from tidemq.protocol.stubs import Code

from ...support.brokers import make_topic
from ...support.group import Group
from ...support.wait import wait_until


def test_state_written_after_the_state_directory_vanished_survives_a_restart(broker_factory, tmp_path):
    root = str(tmp_path / "store")
    make_topic(root, "T", 1)
    b = broker_factory(root)
    with Producer(b.endpoint) as p:
        assert all(r.ok for r in p.send_batch("T", [b"m%d" % i for i in range(6)]))
    with PullConsumer(b.endpoint, "offsets") as c:
        c.commit("T", 0, 1)
    state = os.path.join(root, "broker")
    assert os.path.isdir(state)
    shutil.rmtree(state)                                  # an operator's mistake, a cleanup script
    with PullConsumer(b.endpoint, "offsets") as c:
        c.commit("T", 0, 4)
    with PopConsumer(b.endpoint, "pops") as c:
        got = c.receive("T", 2, invisible_s=60)
        assert len(got) == 2 and c.ack("T", got) == [Code.OK, Code.OK]
        acked = {m.body for m in got}
    wait_until(lambda: os.path.exists(os.path.join(state, "consumer_offsets.json")), "the offsets written again")
    assert b.stop() == 0
    b = broker_factory(root)
    with PullConsumer(b.endpoint, "offsets") as c:
        assert c.committed("T", 0) == 4
    with PopConsumer(b.endpoint, "pops") as c:
        rest = c.receive("T", 10, invisible_s=60, wait_s=1)
    assert {m.body for m in rest} == {b"m%d" % i for i in range(6)} - acked, "an acked message delivered again"


def test_a_followers_state_directory_removed_is_written_again_whole(tmp_path):
    """A follower's ``<root>/broker`` removed while it runs: its next copies of the leader's state write
    every part again -- those equal to what it holds in memory too (consumer offsets, consumer-group
    settings, users and ACLs, quotas: before, only written when they changed, so a follower promoted
    later opened none of them: offsets, retry policies and users lost). Real processes."""
    g = Group(str(tmp_path), 2, mode="ASYNC", env={"TIDEMQ_REPLICATION_STATE_INTERVAL_MS": "100"})
    try:
        g.start(0, role="leader")
        g.start(1, leader=0)
        g.wait_in_sync(0, [1])
        assert g.admin(0, "CreateGroup", {"group": "g1", "retry_max": 3})["ok"]
        with Producer(g.endpoint(0)) as p:
            assert all(r.ok for r in p.send_batch("T", [b"m"]))
        with PullConsumer(g.endpoint(0), "offsets") as c:
            c.commit("T", 0, 1)
        state = os.path.join(g.root(1), "broker")
        parts = [os.path.join(state, "consumer_offsets.json"), os.path.join(state, "groups.json")]
        wait_until(lambda: all(os.path.exists(p) for p in parts), "the follower's copy written")
        copies = g.status(1)["replica"]["state_copies"]
        os.rename(state, state + ".gone")                 # (gone at once: rm -rf races the copy's writes)
        shutil.rmtree(state + ".gone")
        wait_until(lambda: g.status(1)["replica"]["state_copies"] >= copies + 2, "two copies since")
        assert [p for p in parts if not os.path.exists(p)] == [], "written again"
        assert checked.load(OsFileIO(), parts[1], "groups").doc["groups"]["g1"]["retry_max"] == 3
        assert os.path.exists(os.path.join(state, "pop", "snapshot.json"))
    finally:
        g.kill_all()
