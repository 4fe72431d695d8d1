"""`tidemq acl`: what the users of a running broker may do (RocketMQ 5's ACL 2.0: mqadmin createAcl /
deleteAcl / listAcl; broker/protection/acl.py). Super users only.

    tidemq acl grant NAME (--topic PATTERN | --group PATTERN | --cluster) --actions pub,sub,...
                     [--deny] [--source-ip CIDR ...]
    tidemq acl revoke NAME (--topic PATTERN | --group PATTERN | --cluster) --actions ... [--deny | --allow]
    tidemq acl list [NAME]

PATTERN: a name (orders), a prefix (orders*) or *. Actions: pub, sub, create, update, delete, get,
list, all. Deny wins over allow; a NORMAL user may do only what a policy allows.
"""

from __future__ import annotations

import click

from .common import config_option, endpoint_option, quiet_logs
from .output import emit_json, fail, out, table


def _resource(topic, group, cluster) -> str:
    given = [x for x in (topic and f"topic:{topic}", group and f"group:{group}", cluster and "cluster") if x]
    if len(given) != 1:
        fail("give one of --topic PATTERN, --group PATTERN, --cluster", code=2)
    return given[0]


def _actions(text: str) -> list[str]:
    return [a.strip() for a in text.split(",") if a.strip()]


def resource_options(f):
    for opt in reversed([
        click.option("--topic", default=None, help="topics: a name, a prefix (orders*) or *"),
        click.option("--group", default=None, help="consumer groups: a name, a prefix (billing*) or *"),
        click.option("--cluster", is_flag=True, help="the broker itself (alarms, config set, clean, promote, "
                                                      "list topics, status)"),
        click.option("--actions", required=True, help="pub,sub,create,update,delete,get,list,all"),
    ]):
        f = opt(f)
    return f


def _print_policies(user: str, policies: list[dict]) -> None:
    table(f"policies of {user}", ["resource", "decision", "actions", "source ips"],
          [[p["resource"], p["decision"], ",".join(p["actions"]), ",".join(p["source_ips"]) or "any"]
           for p in policies])


@click.group()
def acl() -> None:
    """Permissions of users on topics, groups and the cluster: grant, revoke, list."""


@acl.command("grant")
@click.argument("name")
@resource_options
@click.option("--deny", is_flag=True, help="deny these actions (deny wins over any allow)")
@click.option("--source-ip", "source_ips", multiple=True, help="only from this CIDR (repeat for more; default: any)")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def grant(name, topic, group, cluster, actions, deny, source_ips, endpoint, config_file, as_json) -> None:
    """Allow (or --deny) user NAME ACTIONS on a resource; in effect at once."""
    from ..protocol import admin as api
    from .common import admin_call
    quiet_logs()
    req = {"user": name, "resource": _resource(topic, group, cluster), "actions": _actions(actions),
           "decision": "deny" if deny else "allow"}
    if source_ips:
        req["source_ips"] = list(source_ips)
    r = admin_call(endpoint, api.GRANT, req, config_file)
    if as_json:
        emit_json(r["policies"])
    else:
        _print_policies(name, r["policies"])


@acl.command("revoke")
@click.argument("name")
@resource_options
@click.option("--deny", "only", flag_value="deny", default=None, help="only from its deny policies")
@click.option("--allow", "only", flag_value="allow", help="only from its allow policies")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def revoke(name, topic, group, cluster, actions, only, endpoint, config_file, as_json) -> None:
    """Take ACTIONS off user NAME's policies on exactly that resource; in effect at once."""
    from ..protocol import admin as api
    from .common import admin_call
    quiet_logs()
    req = {"user": name, "resource": _resource(topic, group, cluster), "actions": _actions(actions),
           "decision": only}
    r = admin_call(endpoint, api.REVOKE, req, config_file)
    if as_json:
        emit_json(r["policies"])
    else:
        _print_policies(name, r["policies"])


@acl.command("list")
@click.argument("name", required=False)
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def list_(name, endpoint, config_file, as_json) -> None:
    """The policies of user NAME (or of every user)."""
    from ..protocol import admin as api
    from .common import admin_call
    quiet_logs()
    r = admin_call(endpoint, api.LIST_ACL, {"user": name} if name else {}, config_file)["policies"]
    if as_json:
        emit_json(r)
        return
    if not r:
        out.print("no policies" + (f" for {name}" if name else ""))
    for user, ps in r.items():
        _print_policies(user, ps)
