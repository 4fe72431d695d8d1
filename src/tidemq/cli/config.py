"""`tidemq config show|set`: the settings of a running broker.

`show` prints every store and broker setting in effect (secrets masked). `set` changes the
settings that can change at run time: today the alarm limits (memory_high_watermark_bytes,
memory_high_watermark_ratio, disk_free_limit_bytes). Such a change lasts until the broker
restarts; to keep it, put it in the broker's TOML file or TIDEMQ_* variables — `set` says so."""

from __future__ import annotations

import click

from .common import config_option, endpoint_option, quiet_logs
from .output import emit_json, fail, out, table


@click.group()
def config() -> None:
    """Settings of a running broker: show them, change the ones that change at run time."""


@config.command("show")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def show(endpoint, config_file, as_json) -> None:
    """Every setting in effect."""
    from .common import admin_call
    quiet_logs()
    r = admin_call(endpoint, "Config", config_file=config_file)
    from ..protocol import admin as api
    doc = {"store": r["store"], "broker": r["broker"], "changeable_at_run_time": list(api.ALARM_LIMITS)}
    if as_json:
        emit_json(doc)
        return
    table("settings", ["section", "setting", "value", "at run time"],
          [[sec, k, v, "config set (until restart)" if k in api.ALARM_LIMITS else "-"]
           for sec in ("store", "broker") for k, v in doc[sec].items()])
    out.print(f"changeable at run time, until the broker restarts: {', '.join(api.ALARM_LIMITS)} "
              f"(`tidemq config set KEY VALUE`); the others: the TOML file or TIDEMQ_* variables, then a restart")


@config.command("set")
@click.argument("key")
@click.argument("value")
@endpoint_option
@config_option
def set_(key, value, endpoint, config_file) -> None:
    """Change KEY to VALUE on the running broker (until it restarts)."""
    from ..protocol import admin as api
    from .common import admin_call
    quiet_logs()
    if key not in api.ALARM_LIMITS:
        fail(f"{key} cannot change at run time; those that can: {', '.join(api.ALARM_LIMITS)} "
             f"(the others: the TOML file or TIDEMQ_* variables, then a restart)")
    try:
        v = float(value) if key.endswith("ratio") else int(value)
    except ValueError:
        fail(f"{key}: {value!r} is not a number")
    admin_call(endpoint, api.SET_ALARM_LIMITS, {key: v}, config_file)
    out.print(until_restart(key, v, endpoint), markup=False)


def until_restart(key: str, value, endpoint: str) -> str:
    """What a run-time change lasts, and how to keep it (`config set`, `alarms --set-*`)."""
    return (f"{key} = {value} on {endpoint} until it restarts; to keep it, set it in [broker] of the TOML file "
            f"or TIDEMQ_{key.upper()}")
