"""The group's records in ZooKeeper are signed with the cluster's key (replication/coord_signed.py):
a real ZooKeeper without ACLs (anyone may write it), two broker processes with authentication on,
and an outsider's kazoo client writing the group's nodes. A leader record it forges (naming an
endpoint of its own, a newer epoch) is followed by nobody: the leader whose record it overwrote gives
it up and the group elects one of its own again; a member entry it adds is not a member. Each refusal
is counted on the members' status and logged. Before, every member followed the forged leader: the
group had no leader while the record stood, and a member followed any endpoint the outsider named."""

import json

import pytest
from kazoo.exceptions import NoNodeError

from tidemq.client import Producer

from ...support.auth import AUTH
from ...support.brokers import free_port
from ...support.group import Group
from ...support.wait import wait_until
from ...support.zookeeper import zookeeper  # noqa: F401  (fixture)

AK, SK = AUTH["TIDEMQ_ACCESS_KEY"], AUTH["TIDEMQ_SECRET_KEY"]


@pytest.fixture
def outsider(zookeeper):  # noqa: F811
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=zookeeper, timeout=10)
    zk.start(timeout=60)
    yield zk
    zk.stop()
    zk.close()


def test_a_forged_leader_record_is_followed_by_nobody(tmp_path, zookeeper, outsider):  # noqa: F811
    g = Group(str(tmp_path), 2, coordinator=zookeeper, mode="ASYNC", env={**AUTH},
              client={"access_key": AK, "secret_key": SK})
    try:
        g.start_all()
        first = g.wait_leader()
        other = 1 - first
        wait_until(lambda: (g.status(other) or {}).get("leader") == g.endpoint(first) or None,
                   "the other member follows the leader")
        path = "/tidemq/groups/g/leader"
        raw, _ = outsider.get(path)
        assert b"tidemq-sig1:" in raw, "a member's record is signed"
        evil = f"127.0.0.1:{free_port()}"
        forged = json.dumps({"member": "g-9", "endpoint": evil, "leader_endpoint": evil, "epoch": 99}).encode()
        outsider.set(path, forged)                    # the lease node stays the leader's session's
        outsider.create("/tidemq/groups/g/members/g-9", json.dumps(
            {"endpoint": evil, "leader_endpoint": evil, "log_end": 1 << 40, "round": 0}).encode(), ephemeral=True)

        def refused_and_led_again():
            """(leader, statuses) once both members refused the forged records and the lease is a
            member's again: its record signed, the member it names leading, both following it."""
            st = [g.status(i) for i in (0, 1)]
            if any(s is None or not s.get("coordinator_records_refused", {}).get("unsigned") for s in st):
                return None
            try:
                raw, _ = outsider.get(path)
            except NoNodeError:
                return None
            if b"tidemq-sig1:" not in raw:
                return None
            named = json.loads(raw[:raw.index(b"\x00tidemq-sig1:")])
            leader = int(named["member"].rsplit("-", 1)[1])
            if st[leader]["role"] != "leader" or any(s["leader"] != g.endpoint(leader) for s in st):
                return None
            return leader, st

        leader, st = wait_until(refused_and_led_again, "the forged record refused and a member of the group leading")
        assert all(s["leader"] != evil for s in st)
        with Producer(g.endpoint(leader), access_key=AK, secret_key=SK, timeout_s=60) as p:
            assert p.send_batch("T", [b"after"])[0].ok
        members = g.admin(leader, "Replication")["replication"]
        assert "g-9" not in json.dumps(members.get("console", {})), "the forged entry is no member"
        logs = "".join(open(g.procs[i].log_path).read() for i in (0, 1))
        assert "/tidemq/groups/g/leader is unsigned" in logs
    finally:
        g.kill_all()
