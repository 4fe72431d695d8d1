"""broker/replication/coordinator.py: the coordinator setting read as hosts and a chroot (default
/tidemq). Election, leases, epochs, fencing and the topology run on a real ZooKeeper with real
brokers in tests/broker/replication/test_failover_e2e.py and test_cluster_e2e.py."""

import pytest

from tidemq.broker.replication.coordinator import parse


@pytest.mark.parametrize("setting, hosts, chroot", [
    ("127.0.0.1:2181", "127.0.0.1:2181", "/tidemq"),
    ("127.0.0.1:2181/", "127.0.0.1:2181", "/tidemq"),
    ("a:1,b:2,c:3/mq", "a:1,b:2,c:3", "/mq"),
    ("a:1/prod/mq/", "a:1", "/prod/mq"),
    ("a:1//", "a:1", "/tidemq"),
])
def test_hosts_and_chroot(setting, hosts, chroot):
    assert parse(setting) == (hosts, chroot)
