"""Every method of every service the broker serves has its rule: a new RPC cannot be served without
one being written (a method without a rule is for super users only: the guard fails closed)."""

from tidemq.broker.protection import access
from tidemq.protocol import admin as api
from tidemq.protocol import data
from tidemq.protocol import replication as rp


def test_every_method_has_a_rule():
    assert access.messaging_rule_names() == set(access.MESSAGING_RULES)
    assert set(access.ADMIN_RULES) == set(api.METHODS)
    assert set(access.DATA_RULES) == {data.SEND_RECORDS, data.SEND_RECORDS_STREAM, data.PULL_RECORDS,
                                      data.PULL_RECORDS_STREAM}
    for m in (rp.STREAM, rp.EPOCHS, rp.STATE):
        assert access.RULES[f"/{rp.SERVICE}/{m}"] is access.SUPER


def test_user_and_acl_methods_and_replication_are_for_super_users():
    for m in (api.CREATE_USER, api.DELETE_USER, api.LIST_USERS, api.GRANT, api.REVOKE, api.LIST_ACL):
        assert access.ADMIN_RULES[m] is access.SUPER


class _Acl:
    """Only 'root' is super; 'u' may sub on topic t (anything else: refused)."""
    def is_super(self, user):
        return user == "root"

    def allowed_any(self, user, kind, name, actions, ip=None):
        if user == "u" and kind == "topic" and name == "t" and "sub" in actions:
            return True, ""
        return False, f"forbidden: {user} {kind} {name}"


def test_a_method_without_a_rule_or_a_request_that_cannot_be_read_fails_closed():
    g = access.Guard([], None, _Acl(), None)
    assert g.check("/unknown.Service/Do", None, "u", "") is not None
    assert g.check("/unknown.Service/Do", None, "root", "") is None
    assert g.check(access.MESSAGING + "QueryRoute", object(), "u", "").startswith("forbidden: cannot tell")
    assert g.check(f"/{rp.SERVICE}/{rp.STREAM}", None, "u", "") is not None
    pull = f"/{data.SERVICE}/{data.PULL_RECORDS}"
    assert g.check(pull, b'{"topic": "t", "queue_id": 0, "offset": 0}', "u", "") is None
    assert g.check(pull, b'{"topic": "x", "queue_id": 0, "offset": 0}', "u", "") == "forbidden: u topic x"
    assert g.check(pull, b"not a frame", "u", "") is None, "its handler answers BAD_REQUEST, reading nothing"
