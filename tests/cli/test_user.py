"""tidemq.cli.user: `tidemq user create|list|delete` against a broker with authentication on, signed
with the client's own settings: the flags, TIDEMQ_CLIENT_* or the user's client file; the broker's
keys only as the fallback of the broker's host; a generated secret printed once; what a NORMAL user
the CLI signs as may do."""

import json
import os

from ..support.auth import AUTH
from ..support.cli import run

ROOT = {"TIDEMQ_CLIENT_ACCESS_KEY": "tidemq-ak", "TIDEMQ_CLIENT_SECRET_KEY": "s3cret-sk"}


def test_users_made_listed_and_deleted_signed_by_the_client_settings(tmp_path, broker_factory):
    b = broker_factory(env={**AUTH, "TIDEMQ_AUTO_CREATE_TOPICS": "true"})
    ep = ["--endpoint", b.endpoint]
    r = run("user", "create", "app-a", *ep, "--json", env=ROOT)
    assert r.exit_code == 0, r.output
    made = json.loads(r.output)
    assert made["name"] == "app-a" and made["super"] is False and len(made["secret_key"]) == 48, "generated, shown once"
    r = run("user", "create", "admin2", "--super", "--secret-key", "given-secret-2", *ep, env=ROOT)
    assert r.exit_code == 0 and "SUPER" in r.output and "given-secret-2" not in r.output
    r = run("user", "create", "app-a", *ep, env=ROOT)
    assert r.exit_code == 1 and "exists" in r.output
    # the new super user signs with flags; the listing never shows a secret
    r = run("user", "list", *ep, "--json", "--access-key", "admin2", "--secret-key", "given-secret-2")
    assert r.exit_code == 0, r.output
    assert {u["name"]: u["super"] for u in json.loads(r.output)} == {"tidemq-ak": True, "app-a": False,
                                                                     "admin2": True}
    assert made["secret_key"] not in r.output
    # a NORMAL user, from a client file: signed, authenticated, and refused what it may not do
    cfg = tmp_path / "xdg" / "tidemq"
    cfg.mkdir(parents=True)
    (cfg / "client.toml").write_text(f'[client]\naccess_key = "app-a"\nsecret_key = "{made["secret_key"]}"\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    r = run("topic", "list", *ep, env=env)
    assert r.exit_code == 1 and "FORBIDDEN" in r.output and "'app-a' may not list on cluster" in r.output
    r = run("send", "orders", "x", *ep, env=env)
    assert r.exit_code == 1 and "FORBIDDEN" in r.output
    r = run("user", "list", *ep, env=env)
    assert r.exit_code == 1 and "for super users" in r.output
    # the broker's own keys (TIDEMQ_ACCESS_KEY / TIDEMQ_SECRET_KEY, as on its host) when the client has none
    r = run("user", "delete", "app-a", *ep,
            env={"TIDEMQ_ACCESS_KEY": AUTH["TIDEMQ_ACCESS_KEY"], "TIDEMQ_SECRET_KEY": AUTH["TIDEMQ_SECRET_KEY"]})
    assert r.exit_code == 0 and "deleted" in r.output
    r = run("topic", "list", *ep, env=env)
    assert r.exit_code == 2 and "UNAUTHORIZED" in r.output, "a deleted user is unknown at once"
    r = run("user", "list", *ep)                   # no keys at all
    assert r.exit_code == 2 and "UNAUTHORIZED" in r.output and "no authorization header" in r.output
    assert not os.path.exists(os.path.join(os.environ["HOME"], ".config", "tidemq", "client.toml"))


def test_users_need_authentication_on(broker_factory):
    b = broker_factory()
    r = run("user", "create", "app-a", "--endpoint", b.endpoint)
    assert r.exit_code == 1 and "authentication is off" in r.output
