"""Consumers drain a full disk: a receive and an ack whose pop-journal write the disk refuses are
answered as usual (the change kept in memory, written with the next snapshot once there is room),
never an OSError out of the handler (gRPC UNKNOWN: the official clients cannot drain the backlog of
a broker whose disk filled up, which the resource protection promises they can). A real broker on a
real 16 MiB tmpfs, filled to the last page; then room again, a restart, and the acked messages are
not delivered again."""

import os

from tidemq.client import PopConsumer, Producer
from tidemq.protocol.stubs import Code

from ...support.brokers import make_topic
from ...support.tmpfs import fill_to_last_page as fill
from ...support.wait import wait_until

ENV = {"TIDEMQ_SEGMENT_SIZE_BYTES": str(1 << 20), "TIDEMQ_PREALLOCATE_NEXT_SEGMENT": "false",
       "TIDEMQ_INDEX_SLOTS": "1000", "TIDEMQ_INDEX_ENTRIES": "4000"}


def test_receive_and_ack_on_a_full_disk_and_the_state_written_once_there_is_room(env, broker_factory):
    root = env.tmpfs("root", 16)
    make_topic(root, "T", 1)
    b = broker_factory(root, env=ENV)
    with Producer(b.endpoint) as p:
        assert all(r.ok for r in p.send_batch("T", [b"m%d" % i for i in range(6)]))
    ballast = fill(root)
    with PopConsumer(b.endpoint, "pops") as c:
        got = c.receive("T", 3, invisible_s=60)
        assert len(got) == 3
        assert c.ack("T", got) == [Code.OK] * 3
    acked = {m.body for m in got}
    os.unlink(ballast)
    snapshot = os.path.join(root, "broker", "pop", "snapshot.json")
    wait_until(lambda: os.path.exists(snapshot) and b"pops" in open(snapshot, "rb").read(),
               "the pop state written once there is room")
    b.stop(9)                                             # kill -9: what is on disk is all there is
    b = broker_factory(root, env=ENV)
    with PopConsumer(b.endpoint, "pops") as c:
        rest = c.receive("T", 10, invisible_s=60, wait_s=1)
    assert {m.body for m in rest} == {b"m%d" % i for i in range(6)} - acked
