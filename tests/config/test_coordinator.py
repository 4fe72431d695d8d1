"""tidemq.config.coordinator: the coordinator setting's hosts, chroot and digest credentials parsed,
a password in the setting refused (it shows on command lines and pages), a bad host or chroot named;
ReplicationConfig refuses a bad one when it is loaded, as a ConfigError."""

import pytest

from tidemq.config import ConfigError, ReplicationConfig
from tidemq.config.coordinator import AddressError, ZkAddress, parse

from ..store.test_package import loaded_after


def test_hosts_chroot_and_credentials():
    assert parse("127.0.0.1:2181") == ZkAddress("127.0.0.1:2181", "/tidemq")
    assert parse("a:1, b:2,c:3/prod/mq/") == ZkAddress("a:1,b:2,c:3", "/prod/mq")
    assert parse("digest:tidemq@zk1:2181,zk2:2181/prod") == ZkAddress("zk1:2181,zk2:2181", "/prod", "digest", "tidemq")
    assert parse("[::1]:2181/x").hosts == "[::1]:2181"


@pytest.mark.parametrize("bad", ["", "zk1", "zk1:2181,", "digest:u:secret@zk1:2181", "sasl:u@zk1:2181",
                                 "digest:@zk1:2181", "zk1:2181/zookeeper", "zk1:2181/a/../b"])
def test_a_bad_setting_is_refused_with_its_reason(bad):
    with pytest.raises(AddressError):
        parse(bad)


def test_the_config_refuses_a_user_without_password_and_a_password_in_the_setting():
    with pytest.raises(ConfigError, match="coordinator_password"):
        ReplicationConfig(broker_group="g", coordinator="digest:u@zk1:2181")
    with pytest.raises(ConfigError, match="no password in the setting"):
        ReplicationConfig(broker_group="g", coordinator="digest:u:pw@zk1:2181", coordinator_password="pw")
    c = ReplicationConfig(broker_group="g", coordinator="digest:u@zk1:2181/c", coordinator_password="pw")
    assert "pw" not in repr(c)


def test_a_bad_setting_is_a_config_error_when_the_config_is_made():
    with pytest.raises(ConfigError, match="coordinator hosts are"):
        ReplicationConfig(broker_group="g", coordinator="zk1")


def test_checking_the_setting_loads_no_part_of_the_broker():
    mods = loaded_after("from tidemq.config import ReplicationConfig; "
                        "ReplicationConfig(broker_group='g', coordinator='digest:u@zk1:2181/c', coordinator_password='p')")
    assert "tidemq.config.coordinator" in mods
    assert not [m for m in mods if m.startswith("tidemq.broker")]
