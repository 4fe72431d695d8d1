"""A group's normal start on a real ZooKeeper says nothing alarming: members of a group whose
recorded in-sync set is one member start in any order (the others first), and none of them logs an
ERROR (nor a traceback) while the set's member is on its way; it leads once there."""

from ...support.group import Group
from ...support.zookeeper import zookeeper  # noqa: F401  (fixture)


def levels(path: str) -> list[str]:
    """The level of every log line of a member ("%(asctime)s %(levelname)s ...")."""
    out = []
    for line in open(path):
        parts = line.split(" ", 3)
        if len(parts) >= 3 and parts[2] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            out.append(parts[2])
    return out


def test_members_starting_before_the_in_sync_one_log_no_error(tmp_path, zookeeper):  # noqa: F811
    g = Group(str(tmp_path), 3, coordinator=zookeeper, mode="ASYNC")
    try:
        g.start(0)                          # alone: it leads, the recorded set is [g-0]
        assert g.wait_leader() == 0
        g.procs[0].stop()
        g.start(1)                          # then the group starts again, the set's member last
        g.start(2)
        g.start(0)
        assert g.wait_leader() == 0
        for i in range(3):
            text = open(g.procs[i].log_path).read()
            assert "ERROR" not in levels(g.procs[i].log_path) and "Traceback" not in text, text[-3000:]
    finally:
        g.kill_all()
