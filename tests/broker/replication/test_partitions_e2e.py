"""A broker group of three on a real ZooKeeper (tickTime 100 ms, 1.5 s sessions) under partitions made
by TCP proxies (tests/support/partition.py): the leader cut from ZooKeeper only, from its followers
only, from both, and stopped past its session, while the official Python client produces through
the leader ports. SYNC replication: nothing acknowledged is lost or stored twice, every member ends
with the same log, and after each fault a write is accepted again (the figures -- time to the first
accepted write, longest gap -- are printed; scripts/partitions.py runs the same with ASYNC and
longer holds).

A feature across modules, kept whole: coordinator.py (fencing, leases, the recorded in-sync set,
elections), node.py, acks.py, forward.py (a fenced member's closed leader port, capped forwards),
leader.py and follower.py over real networks that stop carrying bytes."""

from ...support import partition
from ...support.zookeeper import zookeeper  # noqa: F401  (fixture)


def test_sync_group_under_partitions_and_a_stopped_leader_loses_and_doubles_nothing(tmp_path, zookeeper):  # noqa: F811
    report = partition.run(str(tmp_path), zookeeper, "SYNC", hold_s=4.5)
    print(report)
    assert [r["scenario"] for r in report["scenarios"]] == list(partition.SCENARIOS)
    for r in report["scenarios"]:
        assert r["acked"] > 20 and r["to_first_write_s"] is not None, r
        assert r["lost"] == 0 and r["twice"] == 0, r
    assert report["lost"] == 0 and report["twice"] == 0
    assert report["logs_equal"]
