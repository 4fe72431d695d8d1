"""Users and policies (ACL 2.0's model): deny by default, deny wins, literal / prefix / * patterns,
source addresses, super users; changes written as a checked document and read back; a damaged
document falls back to its previous version; a decision made from a state a change replaced never
outlives the change."""

import ipaddress
import os
import stat

import pytest

from tidemq import checked
from tidemq.broker.protection.acl import Acl, AclError, AclState, Resource, User, peer_ip
from tidemq.io import OsFileIO


@pytest.fixture
def acl(tmp_path):
    return Acl(OsFileIO(), str(tmp_path / "broker"), User("root-ak", "root-secret-key", True)).load()


def allowed(acl, user, kind, name, action, ip=None):
    return acl.allowed(user, kind, name, action, ipaddress.ip_address(ip) if ip else None)[0]


def test_resources_and_patterns():
    assert Resource.parse("topic:orders").matches("topic", "orders")
    assert not Resource.parse("topic:orders").matches("topic", "orders2")
    assert Resource.parse("topic:orders*").matches("topic", "orders-eu")
    assert not Resource.parse("topic:orders*").matches("group", "orders-eu")
    assert Resource.parse("group:*").matches("group", "anything")
    assert Resource.parse("cluster").matches("cluster", "")
    for bad in ("topic:", "queue:x", "topic:a*b", "topic:*x", "orders", "topic:a b", 5):
        with pytest.raises(AclError):
            Resource.parse(bad)


def test_a_normal_user_starts_with_nothing_and_deny_wins(acl):
    acl.create_user("app-a", "secret-of-a")
    assert not allowed(acl, "app-a", "topic", "orders", "pub"), "deny by default"
    acl.grant("app-a", "topic:orders*", ["pub", "sub"])
    assert allowed(acl, "app-a", "topic", "orders", "pub") and allowed(acl, "app-a", "topic", "orders-eu", "sub")
    assert not allowed(acl, "app-a", "topic", "orders", "delete") and not allowed(acl, "app-a", "topic", "other", "pub")
    acl.grant("app-a", "topic:orders-secret", ["sub"], "deny")
    assert not allowed(acl, "app-a", "topic", "orders-secret", "sub"), "deny wins over the prefix's allow"
    assert allowed(acl, "app-a", "topic", "orders-secret", "pub")
    ok, why = acl.allowed("app-a", "topic", "orders-secret", "sub")
    assert "'app-a'" in why and "sub" in why and "orders-secret" in why and "denied" in why
    acl.grant("app-a", "topic:*", ["all"])
    assert allowed(acl, "app-a", "topic", "x", "delete") and not allowed(acl, "app-a", "topic", "orders-secret", "sub")
    assert not allowed(acl, "app-a", "group", "x", "sub"), "topic:* is not a group"


def test_super_users_may_do_everything(acl):
    acl.create_user("admin2", "secret-admin", super_=True)
    for user in ("root-ak", "admin2"):
        assert allowed(acl, user, "cluster", "", "update") and allowed(acl, user, "topic", "t", "delete")
    assert acl.secret_of("root-ak") == "root-secret-key" and acl.secret_of("admin2") == "secret-admin"
    assert acl.secret_of("nobody") is None
    with pytest.raises(AclError):
        acl.delete_user("root-ak")
    with pytest.raises(AclError):
        acl.create_user("root-ak", "whatever-secret")


def test_source_addresses(acl):
    acl.create_user("app-a", "secret-of-a")
    acl.grant("app-a", "topic:t", ["pub"], source_ips=["10.1.0.0/16", "::1/128"])
    assert allowed(acl, "app-a", "topic", "t", "pub", "10.1.2.3") and allowed(acl, "app-a", "topic", "t", "pub", "::1")
    assert not allowed(acl, "app-a", "topic", "t", "pub", "10.2.0.1") and not allowed(acl, "app-a", "topic", "t", "pub")
    assert peer_ip("ipv4:10.1.2.3:5555") == ipaddress.ip_address("10.1.2.3")
    assert peer_ip("ipv6:[::1]:5555") == ipaddress.ip_address("::1")
    assert peer_ip("unix:/tmp/x") is None and peer_ip("") is None
    with pytest.raises(AclError):
        acl.grant("app-a", "topic:t", ["pub"], source_ips=["10.0.0.300/8"])


def test_revoke_and_bad_requests(acl):
    acl.create_user("app-a", "secret-of-a")
    acl.grant("app-a", "topic:t", ["all"])
    acl.revoke("app-a", "topic:t", ["delete"])
    assert allowed(acl, "app-a", "topic", "t", "pub") and not allowed(acl, "app-a", "topic", "t", "delete")
    acl.revoke("app-a", "topic:t", ["all"])
    assert acl.policies("app-a") == {"app-a": []}
    with pytest.raises(AclError):
        acl.grant("app-a", "topic:t", ["publish"])
    with pytest.raises(KeyError):
        acl.grant("nobody", "topic:t", ["pub"])
    with pytest.raises(AclError):
        acl.create_user("bad name", "secret-of-a")
    with pytest.raises(AclError):
        acl.create_user("short", "x")


def test_changes_are_written_and_read_back_and_a_damaged_file_falls_back(tmp_path, acl):
    acl.create_user("app-a", "secret-of-a")
    acl.grant("app-a", "topic:orders*", ["pub"])
    d = str(tmp_path / "broker" / "acl")
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, "it holds the secret keys"
    again = Acl(OsFileIO(), str(tmp_path / "broker"), User("root-ak", "root-secret-key", True)).load()
    assert again.document() == acl.document() and allowed(again, "app-a", "topic", "orders1", "pub")
    path = os.path.join(d, "acl.json")
    raw = bytearray(open(path, "rb").read())
    raw[-5] ^= 0x55                                     # a flipped byte: the CRC fails
    open(path, "wb").write(bytes(raw))
    back = Acl(OsFileIO(), str(tmp_path / "broker"), User("root-ak", "root-secret-key", True)).load()
    assert back.secret_of("app-a") == "secret-of-a" and allowed(back, "app-a", "topic", "orders1", "pub"), \
        "the version in effect (its mirror, the .bak)"
    assert os.path.exists(path + ".damaged")


@pytest.mark.parametrize("change", ["revoke", "delete user"])
def test_damage_never_brings_back_a_revoked_right_or_a_deleted_user(tmp_path, acl, change):
    """The .bak was the version before the last change: a revoke (or a user deleted) followed by a
    damaged acl.json allowed again what had just been taken away. It mirrors the version in effect."""
    acl.create_user("app-a", "secret-of-a")
    acl.grant("app-a", "topic:orders*", ["pub"])
    if change == "revoke":
        acl.revoke("app-a", "topic:orders*", ["pub"])
    else:
        acl.delete_user("app-a")
    path = os.path.join(str(tmp_path / "broker"), "acl", "acl.json")
    open(path, "wb").write(b"\x00" * 64)                 # damaged
    back = Acl(OsFileIO(), str(tmp_path / "broker"), User("root-ak", "root-secret-key", True)).load()
    assert not allowed(back, "app-a", "topic", "orders1", "pub")
    assert (back.secret_of("app-a") is None) == (change == "delete user")


def test_a_document_that_is_not_one_is_refused_whole():
    for bad in ([], {"users": {"a b": {"secret_key": "12345678"}}}, {"users": {"a": {"secret_key": 5}}},
                {"users": {}, "policies": {"ghost": []}}, {"version": -1},
                {"users": {"a": {"secret_key": "12345678"}}, "policies": {"a": [{"resource": "x", "actions": []}]}}):
        with pytest.raises(AclError):
            AclState.from_doc(bad)
    doc = AclState.from_doc({"users": {"a": {"secret_key": "12345678"}}}).to_doc()
    assert checked.decode(checked.encode(doc)) == doc


def test_a_decision_made_before_a_change_never_outlives_it(acl):
    """The state and the decisions cached from it are replaced together: a check that read the old
    state and finishes after a change caches into the old state's cache, never the new one's."""
    acl.create_user("app-a", "secret-of-a")
    acl.grant("app-a", "topic:t", ["pub"])
    state, cache = acl._now
    acl.revoke("app-a", "topic:t", ["pub"])
    cache[("app-a", "topic", "t", "pub", None)] = (True, "")     # a late write of the old decision
    assert not allowed(acl, "app-a", "topic", "t", "pub")
