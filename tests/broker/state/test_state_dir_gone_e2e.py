"""The broker's state directory (``<root>/broker``) removed while the broker runs: the state written
after it (committed offsets, the pop journal's acks) is written again -- the directory made anew,
the journal reopened in it -- instead of failing every second (offsets) or going on into a file
no name reaches (the journal: every ack since lost at the next start, the messages delivered
again). Real broker processes, stopped and started again."""

import os
import shutil

from tidemq.client import PopConsumer, Producer, PullConsumer
from tidemq.protocol.stubs import Code

from ...support.brokers import make_topic
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
