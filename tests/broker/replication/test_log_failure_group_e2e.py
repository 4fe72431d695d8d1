"""A leader whose commit-log fdatasync fails steps down, with real processes (issue 27.1's "a leader
with followers steps down instead", node.py's on_log_failed): three brokers on a real ZooKeeper,
SYNC replication and SYNC_FLUSH, the official client producing through the leader ports and a
consumer on every member; the leader's next fdatasync of its commit log fails once with EIO (the
LD_PRELOAD shim of tests/store/test_log_failure_e2e.py, armed by a trigger file). A member of the
recorded in-sync set leads; nothing acknowledged is lost or stored twice, no consumer was served a
record the failure cut, and every member holds one log (no follower copied its leader's bytes as
damage: one that held records where the new leader held the failed leader's BLANK did). Skipped, with
the reason, only where gcc is missing."""

from __future__ import annotations

import time

from ...store.test_log_failure_e2e import build_shim
from ...support import partition
from ...support.failover import TOPIC
from ...support.group import Group
from ...support.wait import wait_until
from ...support.zookeeper import zookeeper  # noqa: F401  (fixture)
from .test_partitions_e2e import _producing, _read_back


class _Pg:
    """What _producing / _read_back need of a partitioned group, for a plain one."""

    def __init__(self, g: Group) -> None:
        self.g = g

    def wait_settled(self) -> int:
        def settled():
            lead = self.g.leader()
            if lead is None or not all(self.g.in_sync(lead, i) for i in range(3) if i != lead):
                return None
            return (lead,)
        return wait_until(settled, "a settled group")[0]


def test_a_leader_whose_commit_log_fsync_fails_steps_down_and_nothing_acknowledged_is_lost(tmp_path, zookeeper):  # noqa: F811
    so = build_shim(tmp_path)
    g = Group(str(tmp_path), 3, coordinator=zookeeper, mode="SYNC", env={"TIDEMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH"})
    triggers = [tmp_path / f"fail-{i}" for i in range(3)]
    pg = _Pg(g)
    try:
        for i in range(3):
            g.start(i, env={"LD_PRELOAD": so, "FSYNC_SHIM_FAIL_FILE": str(triggers[i]),
                            "FSYNC_SHIM_MATCH": f"{g.root(i)}/commitlog/"})
        leader = pg.wait_settled()
        sends, t, producer = _producing(pg, [leader] + [i for i in range(3) if i != leader])
        readers = partition.Readers(g, TOPIC)
        readers.start()
        wait_until(lambda: len(sends.acked) >= 30, "acknowledged sends")
        failed_at = time.monotonic()
        triggers[leader].write_bytes(b"")                  # its next commit-log fdatasync fails
        wait_until(lambda: not triggers[leader].exists(), "the leader's fdatasync failed")
        new = g.wait_leader(exclude={leader})
        wait_until(lambda: len(sends.acked_since(failed_at)) >= 20, "writes acknowledged by the new leader")
        first = sends.acked_since(failed_at)
        old = g.status(leader) or {}
        g.kill(leader)                                     # its only directory failed: writes wait for a restart
        g.start(leader)
        lost, twice, cut = _read_back(pg, sends, t, producer, readers)
        # one log: no follower copied a stretch of its leader's log as "damaged" bytes (there is no damage
        # here; a follower holding records where the new leader holds the failed leader's BLANK did)
        raw = {i: ((g.status(i) or {}).get("replica") or {}).get("raw_bytes", 0) for i in range(3)}
        print({"failed_at": round(failed_at, 3), "leader": leader, "new": new, "acked": len(sends.acked),
               "lost": lost, "twice": twice, "served": len(readers.served), "served_then_cut": cut, "raw_bytes": raw, "failure_to_first_write_s": round(first[0] - failed_at, 3)})
        assert new != leader and old.get("role") == "follower", old.get("role")
        assert lost == 0 and twice == 0 and cut == 0 and not any(raw.values())
    finally:
        g.kill_all()
