"""`tidemq group create|update|delete`: a consumer group's own settings on a running broker
(RocketMQ's mqadmin updateSubGroup / deleteSubGroup; broker/consume/groups.py).

    tidemq group create G [--retry-max N] [--retry-policy exponential:INITIAL_MS,MAX_MS,MULTIPLIER
                          | customized:1s,5s,...] [--orderly/--not-orderly]
                          [--consume-enable/--consume-disable]
    tidemq group update G (the same options: only those given change)
    tidemq group delete G  (back to the broker's defaults)

A message of G is delivered at most N + 1 times, then moved to %DLQ%G; consumers are told the
policy and max_attempts N + 1. `tidemq group status G` shows the settings.
"""

from __future__ import annotations

import click

from .common import config_option, endpoint_option, quiet_logs
from .output import emit_json, out


def _policy(ctx, param, value):
    if value is None:
        return None
    from ..protocol.group_settings import parse_policy
    try:
        parse_policy(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return value


def setting_options(fn):
    for deco in reversed((
            click.argument("name"),
            click.option("--retry-max", type=click.IntRange(0, 1000), default=None,
                         help="retries after the first delivery: N + 1 deliveries, then %DLQ%<group>"),
            click.option("--retry-policy", callback=_policy, default=None,
                         help="exponential:INITIAL_MS,MAX_MS,MULTIPLIER or customized:1s,5s,... (the backoff "
                              "consumers are told)"),
            click.option("--orderly/--not-orderly", default=None,
                         help="consume in order (RocketMQ's consumeMessageOrderly)"),
            click.option("--consume-enable/--consume-disable", "consume_enable", default=None,
                         help="whether the group may consume (disabled: receives and pulls are FORBIDDEN)"),
            endpoint_option, config_option, click.option("--json", "as_json", is_flag=True))):
        fn = deco(fn)
    return fn


def _request(name, retry_max, retry_policy, orderly, consume_enable) -> dict:
    req = {"group": name}
    for k, v in (("retry_max", retry_max), ("retry_policy", retry_policy), ("orderly", orderly),
                 ("consume_enable", consume_enable)):
        if v is not None:
            req[k] = v
    return req


def describe(settings: dict) -> str:
    from ..protocol.group_settings import GroupSettings
    s = GroupSettings.from_doc(settings)
    return (f"retry_max {s.retry_max} ({s.attempts_max} deliveries, then the dead-letter queue); "
            f"retry policy {s.retry_policy.text()}; {'orderly' if s.orderly else 'concurrently'}; "
            f"consumption {'enabled' if s.consume_enable else 'DISABLED'}")


def _show(r: dict, as_json: bool, verb: str) -> None:
    if as_json:
        emit_json(r)
        return
    out.print(f"group {r['group']} {verb}: {describe(r['settings'])}")


@click.command("create")
@setting_options
def create(name, retry_max, retry_policy, orderly, consume_enable, endpoint, config_file, as_json) -> None:
    """Give group NAME its own settings (fields not given: the broker's defaults); exit 1 when it has some."""
    from ..protocol import admin as api
    from .common import admin_call
    quiet_logs()
    r = admin_call(endpoint, api.CREATE_GROUP, _request(name, retry_max, retry_policy, orderly, consume_enable),
                   config_file)
    _show(r, as_json, "created")


@click.command("update")
@setting_options
def update(name, retry_max, retry_policy, orderly, consume_enable, endpoint, config_file, as_json) -> None:
    """Change the settings given of group NAME; exit 1 when it has none (group create)."""
    from ..protocol import admin as api
    from .common import admin_call
    quiet_logs()
    req = _request(name, retry_max, retry_policy, orderly, consume_enable)
    if len(req) == 1:
        raise click.UsageError("nothing to change: give --retry-max, --retry-policy, --orderly/--not-orderly or "
                               "--consume-enable/--consume-disable")
    _show(admin_call(endpoint, api.UPDATE_GROUP, req, config_file), as_json, "updated")


@click.command("delete")
@click.argument("name")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def delete(name, endpoint, config_file, as_json) -> None:
    """Drop group NAME's settings (it gets the broker's defaults again; offsets are kept)."""
    from ..protocol import admin as api
    from .common import admin_call
    quiet_logs()
    r = admin_call(endpoint, api.DELETE_GROUP, {"group": name}, config_file)
    if as_json:
        emit_json(r)
    else:
        out.print(f"group {name}: settings deleted (the broker's defaults apply)")
