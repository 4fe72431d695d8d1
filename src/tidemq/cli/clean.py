"""`tidemq clean --force [--yes]`: the manual cleanup of a running broker (mqadmin
deleteExpiredCommitLog): the next cleanup rounds delete expired commit-log segments whatever
the hour (and, with space short, what the ratios allow). Asks first; reports what was freed."""

from __future__ import annotations

import time

import click

from .common import config_option, endpoint_option, quiet_logs
from .output import emit_json, fail, out


@click.command()
@click.option("--force", is_flag=True, required=True, help="required: this deletes data")
@click.option("--yes", is_flag=True, help="do not ask")
@click.option("--wait", "wait_s", type=click.FloatRange(0, 3600), default=120.0, show_default=True,
              help="seconds to wait for the round's report")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def clean(force, yes, wait_s, endpoint, config_file, as_json) -> None:
    """Run the broker's cleanup now and say what it freed."""
    from .topic import _admin
    quiet_logs()
    if not force:
        fail("give --force: cleanup deletes commit-log segments")
    if not yes:
        click.confirm(f"delete expired commit-log segments of the broker at {endpoint} now?", abort=True)
    before = _admin(endpoint, "DiskStatus", config_file=config_file)["status"]
    since = before["last_round"]["at_ms"]
    _admin(endpoint, "DeleteExpired", config_file=config_file)
    end = time.monotonic() + wait_s
    st = before
    while time.monotonic() < end:      # the cleanup service runs the round within its interval
        st = _admin(endpoint, "DiskStatus", config_file=config_file)["status"]
        if st["last_round"]["at_ms"] != since:
            break
        time.sleep(0.2)
    else:
        fail(f"no cleanup round ran within {wait_s:.0f} s (the broker's clean_resource_interval_ms)", code=2)
    rnd = st["last_round"]
    report = {"deleted_segments": len(rnd["deleted"]), "deleted_bytes": rnd["deleted_bytes"],
              "why_not": rnd["why_not"], "triggers": rnd["triggers"],
              "commitlog_min_offset": {"before": before["commitlog"]["min_offset"],
                                       "after": st["commitlog"]["min_offset"]}}
    if as_json:
        emit_json(report)
        return
    out.print(f"deleted {report['deleted_segments']} segment(s), {rnd['deleted_bytes'] / 2**20:.1f} MiB"
              + (f"; could not delete more: {rnd['why_not']}" if rnd["why_not"] else "")
              + f"; commit log now starts at {st['commitlog']['min_offset']}")
