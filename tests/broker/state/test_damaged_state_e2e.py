"""A real broker on a store whose broker-state files a disk has damaged: it starts, every
message stays readable, sends are accepted, and a group's committed offset is never read from
damaged bytes (it falls back to the previous version, or to none)."""

import os
import shutil

import pytest

from tidemq.broker.state.layout import StateLayout, state_dir

from ...support.brokers import SMALL

FILES = {"consumer offsets": lambda lay: lay.consumer_offsets,
         "pop snapshot": lambda lay: os.path.join(lay.pop_dir, "snapshot.json"),
         "transactions snapshot": lambda lay: os.path.join(lay.transactions_dir, "snapshot.json"),
         "timer progress": lambda lay: lay.timer_checkpoint}
N = 40


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A stopped broker's store: N messages in topic T, group g committed at 25 on queue 0
    (twice, so a previous version exists)."""
    from tidemq.client import Producer, PullConsumer
    from ...support.brokers import BrokerProcess
    root = str(tmp_path_factory.mktemp("damaged-state") / "store")
    b = BrokerProcess(root, env={**SMALL, "TIDEMQ_AUTO_CREATE_TOPICS": "true", "TIDEMQ_DEFAULT_QUEUE_COUNT": "1"})
    try:
        with Producer(b.endpoint) as p:
            p.send_batch("T", [b"m%d" % i for i in range(N)])
        with PullConsumer(b.endpoint, "g") as c:
            c.commit("T", 0, 20)
        b.stop()                                        # offsets written at shutdown
        b = BrokerProcess(root, env=SMALL)
        with PullConsumer(b.endpoint, "g") as c:
            c.commit("T", 0, 25)
    finally:
        b.stop()
    lay = StateLayout(state_dir(root))
    assert all(os.path.exists(f(lay)) for f in FILES.values())
    return root


@pytest.mark.parametrize("damage", ["random", "empty"])
@pytest.mark.parametrize("which", sorted(FILES))
def test_a_broker_starts_on_damaged_state_and_loses_no_message(written, tmp_path, broker_factory, which, damage):
    from tidemq.client import Producer, PullConsumer
    root = str(tmp_path / "copy")
    shutil.copytree(written, root)
    path = FILES[which](StateLayout(state_dir(root)))
    with open(path, "wb") as f:
        f.write(os.urandom(48) if damage == "random" else b"")
    b = broker_factory(root, env=SMALL)
    with PullConsumer(b.endpoint, "g") as c:
        got, offset = [], 0
        while len(got) < N:
            r = c.pull("T", 0, offset)
            assert r.messages, f"nothing at offset {offset}"
            got += [m.body for m in r.messages]
            offset = r.next_offset
        committed = c.committed("T", 0)
    assert got == [b"m%d" % i for i in range(N)], "every message readable"
    # the damaged offsets fall back to the version before (20), never to bytes read as a number
    assert committed == (20 if which == "consumer offsets" else 25)
    with Producer(b.endpoint) as p:
        assert all(r.ok for r in p.send_batch("T", [b"after"]))
    assert b.stop() == 0
    assert os.path.exists(path + ".damaged"), "the damaged file is kept for a post-mortem"
