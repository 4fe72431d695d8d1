"""`tidemq user`: the users of a running broker (RocketMQ's mqadmin createUser / listUser /
deleteUser; broker/protection/acl.py). Super users only; the broker must have authentication on.

    tidemq user create NAME [--super] [--secret-key S]   a generated secret is printed once when none is given
    tidemq user list                                     names, SUPER or NORMAL (never a secret)
    tidemq user delete NAME                              its policies go with it
"""

from __future__ import annotations

import secrets

import click

from .common import config_option, connection_options, endpoint_option, quiet_logs
from .output import emit_json, out, table

SECRET_BYTES = 24            # a generated secret: 24 random bytes as 48 hex digits


@click.group()
def user() -> None:
    """Users of a running broker: create, list, delete (each a key pair; SUPER or NORMAL)."""


@user.command("create")
@click.argument("name")
@click.option("--super", "super_", is_flag=True, help="a SUPER user: may do everything (else NORMAL: only what "
                                                       "`tidemq acl grant` allows)")
@click.option("--secret-key", "new_secret", default=None,
              help="the new user's secret key (default: a random one, printed once); the caller's own keys come "
                   "from TIDEMQ_CLIENT_ACCESS_KEY / TIDEMQ_CLIENT_SECRET_KEY or the client file")
@click.option("--endpoint", default="127.0.0.1:8081", show_default=True, envvar="TIDEMQ_ENDPOINT",
              help="HOST:PORT of a running broker")
@connection_options(keys=False)
@config_option
@click.option("--json", "as_json", is_flag=True)
def create(name, super_, new_secret, endpoint, config_file, as_json) -> None:
    """Create user NAME (its access key) with a secret key; print the secret once when it was generated."""
    from ..protocol import admin as api
    from .common import admin_call
    quiet_logs()
    secret = new_secret or secrets.token_hex(SECRET_BYTES)
    r = admin_call(endpoint, api.CREATE_USER, {"name": name, "secret_key": secret, "super": super_}, config_file)
    shown = {"name": name, "super": r["user"]["super"], **({"secret_key": secret} if new_secret is None else {})}
    if as_json:
        emit_json(shown)
        return
    kind = "SUPER" if super_ else "NORMAL (nothing allowed yet: tidemq acl grant)"
    out.print(f"user {name}: {kind}")
    if new_secret is None:
        out.print(f"secret key (shown once, keep it): {secret}")


@user.command("list")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def list_(endpoint, config_file, as_json) -> None:
    """Every user: its name (access key) and SUPER or NORMAL."""
    from ..protocol import admin as api
    from .common import admin_call
    quiet_logs()
    users = admin_call(endpoint, api.LIST_USERS, {}, config_file)["users"]
    if as_json:
        emit_json(users)
        return
    table("users", ["name", "type", ""], [[u["name"], "SUPER" if u["super"] else "NORMAL",
                                           "the broker's own (access_key)" if u["builtin"] else ""] for u in users])


@user.command("delete")
@click.argument("name")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def delete(name, endpoint, config_file, as_json) -> None:
    """Delete user NAME and its policies: its next call is refused (UNAUTHORIZED)."""
    from ..protocol import admin as api
    from .common import admin_call
    quiet_logs()
    admin_call(endpoint, api.DELETE_USER, {"name": name}, config_file)
    if as_json:
        emit_json({"deleted": name})
    else:
        out.print(f"user {name} deleted")
