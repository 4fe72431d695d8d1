"""A standalone broker's consumer groups after a failure of its commit log (broker/server.py
_after_log_failure): under ASYNC_FLUSH a group is served records before their fsync; when that fsync
fails (a real broker, the LD_PRELOAD shim of tests/store/test_log_failure_e2e.py failing one fdatasync
with EIO, held until the group has received), the log and its queues are cut back to the durable end
and the next messages take those queue offsets again. Before, every group that had consumed past the
cut skipped the messages acknowledged after the failure, for good, and an old delivery's receipt
handle stood for the new message at its offset. Skipped, with the reason, only where gcc is missing."""

from __future__ import annotations

import json

from tidemq.client import PopConsumer, Producer
from tidemq.protocol.stubs import Code

from ..store.test_log_failure_e2e import build_shim
from ..support.brokers import SMALL, make_topic
from ..support.cli import run
from ..support.wait import wait_until

TOPIC = "Cut"


def receive_n(c: PopConsumer, n: int, what: str) -> list:
    got: list = []

    def more():
        got.extend(c.receive(TOPIC, batch_size=32, invisible_s=600, wait_s=1))
        return len(got) >= n

    wait_until(more, what)
    return got


def test_groups_that_consumed_past_a_failed_logs_cut_are_served_what_is_sent_after_it(tmp_path, broker_factory):
    so = build_shim(tmp_path)
    root, a, b = tmp_path / "store", tmp_path / "a", tmp_path / "b"
    trigger, hold = tmp_path / "fail-the-next-fdatasync", tmp_path / "hold-it"
    make_topic(str(root), TOPIC, 1)
    env = {**SMALL, "TIDEMQ_COMMITLOG_DIRS": f"{a},{b}", "TIDEMQ_FLUSH_INTERVAL_MS": "20",
           "TIDEMQ_FLUSH_LEAST_PAGES": "0", "LD_PRELOAD": so, "FSYNC_SHIM_FAIL_FILE": str(trigger),
           "FSYNC_SHIM_HOLD_FILE": str(hold), "FSYNC_SHIM_MATCH": f"{a}/"}
    hold.touch()
    trigger.touch()                     # the next fdatasync in a/ waits while `hold` exists, then fails
    broker = broker_factory(root=str(root), env=env)
    with Producer(broker.endpoint) as p, PopConsumer(broker.endpoint, "acked") as g, \
            PopConsumer(broker.endpoint, "in-flight") as h:
        old = [b"old-%d" % i for i in range(5)]
        assert all(r.ok for r in p.send_batch(TOPIC, old))            # ASYNC_FLUSH: answered before the fsync
        got = receive_n(g, 5, "the group 'acked' served the records before their fsync")
        assert sorted(m.body for m in got) == old
        assert g.ack(TOPIC, got) == [Code.OK] * 5
        held = receive_n(h, 5, "the group 'in-flight' served them too (not acked)")
        hold.unlink()                   # the fsync fails now: the log is cut back to before old-0
        wait_until(lambda: not trigger.exists(), "the shim's failure used")
        wait_until(lambda: json.loads(run("disk", "--endpoint", broker.endpoint, "--json").output)["flags"]
                   ["log_failures"], "the failure in the broker's disk status")
        new = [b"new-%d" % i for i in range(3)]
        assert all(r.ok for r in p.send_batch(TOPIC, new)), "the log goes on in b/"
        for c, name in ((g, "acked"), (h, "in-flight")):
            got = receive_n(c, 3, f"the group '{name}' served the messages sent after the failure")
            assert sorted(m.body for m in got) == new, name
        assert Code.OK not in h.ack(TOPIC, held), "an old delivery's handle never acks the new message at its offset"
    assert broker.stop() == 0
