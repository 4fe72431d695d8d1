"""The coordinator's ZooKeeper client: the credentials and creator-only ACL kazoo is given, and the
granted session timeout read from the connect answer; against a real ZooKeeper: the group's nodes
under the chroot carry the creator-only ACL and a client without the credentials is refused
(NoAuth). The setting's address itself: tests/config/test_coordinator.py."""

import pytest

from tidemq.broker.replication import zk_address
from tidemq.broker.replication.zk_address import GrantedTimeout
from tidemq.config.coordinator import parse

from tests.support.zookeeper import TICK_MS, zookeeper  # noqa: F401  (fixture)


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
