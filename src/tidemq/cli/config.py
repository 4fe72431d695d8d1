"""`tidemq config show|set`: the settings of a running broker.

`show` prints every store and broker setting in effect (secrets masked), each marked "live" (changes
at run time) or "restart". `set` changes a live one (broker/live_settings.py: cleanup times and
ratios, alarm limits, flow-control bounds, long polling, the log level), checked by the code a start
runs: an unknown name gets "did you mean", a wrong type or a value out of bounds is refused with the
bounds, exactly as `serve` would refuse it. Such a change lasts until the broker restarts; to keep it,
put it in the broker's TOML file or TIDEMQ_* variables — `set` says so."""

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
    """Every setting in effect, and whether it changes at run time."""
    from .common import admin_call
    quiet_logs()
    r = admin_call(endpoint, "Config", config_file=config_file)
    live = set(r.get("live", ()))
    doc = {"store": r["store"], "broker": r["broker"], "changeable_at_run_time": sorted(live)}
    if as_json:
        emit_json(doc)
        return
    table("settings", ["section", "setting", "value", "at run time"],
          [[sec, k, v, "live (config set)" if k in live else "restart"]
           for sec in ("store", "broker") for k, v in doc[sec].items()])
    out.print(f"live: `tidemq config set KEY VALUE` changes them until the broker restarts ({len(live)}); "
              f"the others: the TOML file or TIDEMQ_* variables, then a restart")


@config.command("set")
@click.argument("key")
@click.argument("value")
@endpoint_option
@config_option
def set_(key, value, endpoint, config_file) -> None:
    """Change KEY to VALUE on the running broker (until it restarts), checked as `serve` checks it."""
    from ..protocol import admin as api
    from .common import admin_call
    quiet_logs()
    r = admin_call(endpoint, api.SET_CONFIG, {"name": key, "value": value}, config_file)
    out.print(until_restart(r["name"], r["value"], endpoint, r["before"], r["section"]), markup=False)


def until_restart(key: str, value, endpoint: str, before=None, section: str = "broker") -> str:
    """What a run-time change lasts, and how to keep it (`config set`, `alarms --set-*`)."""
    was = f" (was {before})" if before is not None else ""
    return (f"{key} = {value}{was} on {endpoint} until it restarts; to keep it, set it in [{section}] of the TOML "
            f"file or TIDEMQ_{key.upper()}")
