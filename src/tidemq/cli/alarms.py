"""`tidemq alarms --endpoint`: the memory and disk alarms and the send flow control of a running
broker; with a --set-* option, change a limit until the broker restarts (RabbitMQ's
set_vm_memory_high_watermark / set_disk_free_limit), and say so and how to keep it."""

from __future__ import annotations

import click

from .common import config_option, connection_options, quiet_logs
from .output import emit_json, out, table


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


@click.command()
@click.option("--endpoint", required=True, envvar="TIDEMQ_ENDPOINT", help="HOST:PORT of a running broker")
@connection_options
@config_option
@click.option("--set-memory-high-watermark-bytes", "mem_bytes", type=int, default=None,
              help="memory alarm limit in bytes (0: use the ratio), until the broker restarts")
@click.option("--set-memory-high-watermark-ratio", "mem_ratio", type=float, default=None,
              help="memory alarm limit as a fraction of RAM, until the broker restarts")
@click.option("--set-disk-free-limit-bytes", "disk_bytes", type=int, default=None,
              help="disk alarm when free space falls under this, until the broker restarts")
@click.option("--json", "as_json", is_flag=True, help="print the status as JSON")
def alarms(endpoint, config_file, mem_bytes, mem_ratio, disk_bytes, as_json) -> None:
    """Are sends held or refused, and why; exit 1 while they are (rabbitmq-diagnostics check_local_alarms)."""
    from ..protocol import admin as api
    from .status import print_verdict
    from .common import admin_call
    quiet_logs()
    changes = {k: v for k, v in zip(api.ALARM_LIMITS, (mem_bytes, mem_ratio, disk_bytes)) if v is not None}
    st = admin_call(endpoint, api.SET_ALARM_LIMITS if changes else api.ALARMS, changes or None, config_file)["alarms"]
    blocked = st["verdict"]["writes"] != "accepted"
    from .config import until_restart
    said = [until_restart(k, v, endpoint) for k, v in changes.items()]
    if as_json:
        emit_json({**st, "changed": said} if said else st)
        raise SystemExit(1 if blocked and not changes else 0)
    m, d, f = st["memory"], st["disk"], st["flow"]
    table("alarms", ["alarm", "state", "reading", "limit", "raised (times)"], [
        ["memory", "RAISED" if m["raised"] else "clear", _mib(m["reading_bytes"]) + " resident",
         _mib(m["limit_bytes"]), m["raised_count"]],
        ["disk", "RAISED" if d["raised"] else "clear", f"{_mib(d['reading_bytes'])} free under {d['where']}",
         _mib(d["limit_bytes"]), d["raised_count"]]])
    print_verdict(st["verdict"])
    out.print(f"flush backlog {_mib(f['flush_backlog_bytes'])} (high {_mib(f['flush_backlog_high_bytes'])}); "
              f"in flight: {f['inflight_requests']} send(s), {_mib(f['inflight_bytes'])} on "
              f"{f['connections_sending']} connection(s); held {f['held_total']}, refused {f['refused_total']} "
              f"since start; authentication {'on' if st['auth'] else 'off'}, TLS {'on' if st['tls'] else 'off'}")
    for line in said:
        out.print(line, markup=False)
    if blocked and not changes:
        raise SystemExit(1)
