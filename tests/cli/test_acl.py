"""tidemq.cli.acl: `tidemq acl grant|revoke|list` change what a user may do on a running broker, at
once (its next call is checked against the change)."""

import json

from ..support.auth import AUTH
from ..support.cli import run

ROOT = {"TIDEMQ_CLIENT_ACCESS_KEY": "tidemq-ak", "TIDEMQ_CLIENT_SECRET_KEY": "s3cret-sk"}


def test_grant_revoke_list(broker_factory):
    b = broker_factory(env={**AUTH, "TIDEMQ_AUTO_CREATE_TOPICS": "true"})
    ep = ["--endpoint", b.endpoint]
    assert run("user", "create", "app-a", "--secret-key", "secret-of-app-a", *ep, env=ROOT).exit_code == 0
    app = {"TIDEMQ_CLIENT_ACCESS_KEY": "app-a", "TIDEMQ_CLIENT_SECRET_KEY": "secret-of-app-a"}
    assert run("send", "orders-1", "x", *ep, env=app).exit_code == 1
    r = run("acl", "grant", "app-a", "--topic", "orders*", "--actions", "pub,sub", *ep, "--json", env=ROOT)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == [{"resource": "topic:orders*", "actions": ["pub", "sub"], "decision": "allow",
                                     "source_ips": []}]
    r = run("send", "orders-1", "x", *ep, env=app)
    assert r.exit_code == 0, r.output
    r = run("acl", "grant", "app-a", "--topic", "orders-1", "--actions", "pub", "--deny", *ep, env=ROOT)
    assert r.exit_code == 0 and "deny" in r.output
    assert run("send", "orders-1", "x", *ep, env=app).exit_code == 1, "deny wins"
    assert run("send", "orders-2", "x", *ep, env=app).exit_code == 0
    r = run("acl", "revoke", "app-a", "--topic", "orders-1", "--actions", "pub", "--deny", *ep, env=ROOT)
    assert r.exit_code == 0
    assert run("send", "orders-1", "x", *ep, env=app).exit_code == 0, "the deny revoked"
    run("acl", "grant", "app-a", "--cluster", "--actions", "list", "--source-ip", "10.0.0.0/8", *ep, env=ROOT)
    r = run("acl", "list", "app-a", *ep, "--json", env=ROOT)
    assert json.loads(r.output)["app-a"][-1] == {"resource": "cluster", "actions": ["list"], "decision": "allow",
                                                 "source_ips": ["10.0.0.0/8"]}
    r = run("topic", "list", *ep, env=app)
    assert r.exit_code == 1 and "FORBIDDEN" in r.output, "not from 127.0.0.1"
    r = run("acl", "grant", "app-a", "--topic", "x", "--group", "y", "--actions", "pub", *ep, env=ROOT)
    assert r.exit_code == 2 and "give one of" in r.output
    r = run("acl", "grant", "app-a", "--topic", "x", "--actions", "publish", *ep, env=ROOT)
    assert r.exit_code == 1 and "not one of" in r.output
    r = run("acl", "grant", "nobody", "--topic", "x", "--actions", "pub", *ep, env=ROOT)
    assert r.exit_code == 1 and "no user 'nobody'" in r.output
