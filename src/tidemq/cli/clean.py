"""`tidemq clean --force [--yes]`: the manual cleanup of a running broker (mqadmin
deleteExpiredCommitLog): the next cleanup rounds delete expired commit-log segments whatever
the hour (and, with space short, what the ratios allow). Asks first; reports what was freed,
over the rounds it took (a segment a reader held is deleted by the next one)."""

from __future__ import annotations

import time

import click

from .common import config_option, endpoint_option, quiet_logs
from .output import emit_json, fail, out


@click.command()
@click.option("--force", is_flag=True, required=True, help="required: this deletes data")
@click.option("--yes", is_flag=True, help="do not ask")
@click.option("--wait", "wait_s", type=click.FloatRange(0, 3600), default=120.0, show_default=True,
              help="seconds to wait for the rounds' reports")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def clean(force, yes, wait_s, endpoint, config_file, as_json) -> None:
    """Run the broker's cleanup now and say what it freed."""
    from .common import admin_call
    quiet_logs()
    if not force:
        fail("give --force: cleanup deletes commit-log segments")
    if not yes:
        click.confirm(f"delete expired commit-log segments of the broker at {endpoint} now?", abort=True)
    before = admin_call(endpoint, "DiskStatus", config_file=config_file)["status"]
    since = before["last_round"]["at_ms"]
    admin_call(endpoint, "DeleteExpired", config_file=config_file)
    end = time.monotonic() + wait_s
    rounds = 0
    st = before
    while True:        # the cleanup service runs the forced rounds within its interval
        got = _next_round(endpoint, config_file, since, end)
        if got is None:
            if rounds:
                break                   # what the rounds so far freed, and why not more
            fail(f"no cleanup round ran within {wait_s:.0f} s (the broker's clean_resource_interval_ms)", code=2)
        st = got
        rnd = st["last_round"]
        since = rnd["at_ms"]
        if "manual" not in rnd["triggers"]:
            continue                    # a round that began before the request: the forced ones follow
        rounds += 1
        # a segment a reader held (or a failed unlink) is retried by the next forced round: wait for it
        if rnd["why_not_code"] not in RETRIED or st["manual_rounds_left"] == 0:
            break
    last = st["last_round"]
    # what was freed, from the cleaner's totals: a later round (forced or not) may have replaced
    # the one that deleted as "last_round" before this looked (a busy machine polls late)
    (segs0, bytes0), (segs1, bytes1) = _totals(before["commitlog"]), _totals(st["commitlog"])
    report = {"deleted_segments": segs1 - segs0, "deleted_bytes": bytes1 - bytes0, "rounds": rounds,
              "why_not": last["why_not"], "triggers": last["triggers"],
              "commitlog_min_offset": {"before": before["commitlog"]["min_offset"],
                                       "after": st["commitlog"]["min_offset"]}}
    if as_json:
        emit_json(report)
        return
    out.print(f"deleted {report['deleted_segments']} segment(s), {report['deleted_bytes'] / 2**20:.1f} MiB"
              + (f"; could not delete more: {last['why_not']}" if last["why_not"] else "")
              + f"; commit log now starts at {st['commitlog']['min_offset']}", markup=False)


RETRIED = ("held-by-reader", "delete-failed")       # store/cleaner.NotFreed: the next round tries again


def _totals(commitlog: dict) -> tuple[int, int]:
    """(segments, bytes) the cleaner deleted since the broker started."""
    return sum(commitlog["deleted_segments_by_reason"].values()), commitlog["deleted_bytes_total"]


def _next_round(endpoint, config_file, since_ms: int, end: float) -> dict | None:
    """The disk status once a cleanup round after ``since_ms`` has run; None at ``end``."""
    from .common import admin_call
    while time.monotonic() < end:
        st = admin_call(endpoint, "DiskStatus", config_file=config_file)["status"]
        if st["last_round"]["at_ms"] != since_ms:
            return st
        time.sleep(0.2)
    return None
