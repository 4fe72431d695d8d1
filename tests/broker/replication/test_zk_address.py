"""The coordinator setting: hosts, chroot and digest credentials parsed, a password in the setting
refused (it shows on command lines and pages), a bad host or chroot named; against a real
ZooKeeper: the group's nodes under the chroot carry the creator-only ACL, a client without the
credentials is refused (NoAuth), and the granted session timeout is read from the connect answer."""

import pytest

from tidemq.broker.replication import zk_address
from tidemq.broker.replication.zk_address import AddressError, GrantedTimeout, ZkAddress, parse
from tidemq.config import ConfigError, ReplicationConfig

from tests.support.zookeeper import TICK_MS, zookeeper  # noqa: F401  (fixture)


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


def test_kazoo_options_set_the_credentials_and_the_creator_acl():
    assert zk_address.kazoo_options(parse("zk1:2181"), "") == {}
    opts = zk_address.kazoo_options(parse("digest:u@zk1:2181"), "pw")
    assert opts["auth_data"] == [("digest", "u:pw")]
    assert [a.id.scheme for a in opts["default_acl"]] == ["auth"]


def test_granted_timeout_logged_once_per_change(caplog):
    g = GrantedTimeout(1500, "g1")
    with caplog.at_level("INFO", logger="tidemq.broker"):
        g.seen(4000)
        g.seen(4000)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and warnings[0].args[1:3] == (4000, 1500)
    assert g.status() == {"session_timeout_ms_asked": 1500, "session_timeout_ms_granted": 4000}
    assert g.sessions == 2


def test_on_a_real_zookeeper_credentials_acl_chroot_and_granted_timeout(zookeeper):  # noqa: F811
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError
    addr = parse(f"digest:tidemq@{zookeeper}/secured")
    asked_ms = 1000 * TICK_MS                  # above the server's maxSessionTimeout (60 s here): bounded
    granted = GrantedTimeout(asked_ms, "g1")
    zk = KazooClient(hosts=addr.hosts, timeout=asked_ms / 1000, **zk_address.kazoo_options(addr, "pw"))
    zk_address.watch_granted_timeout(zk, granted.seen)
    other = KazooClient(hosts=addr.hosts, timeout=10)
    zk.start(timeout=60)
    other.start(timeout=60)
    try:
        assert granted.granted_ms == 60_000 != asked_ms
        zk.ensure_path(f"{addr.chroot}/groups/g1")
        zk.create(f"{addr.chroot}/groups/g1/epoch", b"7")
        assert zk.get(f"{addr.chroot}/groups/g1/epoch")[0] == b"7"
        acl, _ = zk.get_acls(f"{addr.chroot}/groups/g1/epoch")
        assert [a.id.scheme for a in acl] == ["digest"] and acl[0].id.id.startswith("tidemq:")
        with pytest.raises(NoAuthError):
            other.get(f"{addr.chroot}/groups/g1/epoch")
        with pytest.raises(NoAuthError):
            other.set(f"{addr.chroot}/groups/g1/epoch", b"8")
    finally:
        for c in (zk, other):
            c.stop()
            c.close()
