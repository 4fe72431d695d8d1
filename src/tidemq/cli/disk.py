"""`tidemq disk`: per-directory usage and state, flags, last cleanup, and the forecast."""

from __future__ import annotations

import time

import click

from .common import config_option, connection_options, open_store, quiet_logs, root_option
from ..words import cleanup_summary, human_bytes, until
from .output import emit_json, out, table


def _offline_status(root, config_file) -> dict:
    store = open_store(root, config_file, " (or ask the broker: --endpoint)")
    try:
        return store.disk_status()
    finally:
        store.shutdown()


@click.command()
@root_option
@config_option
@click.option("--endpoint", default=None, envvar="TIDEMQ_ENDPOINT", help="HOST:PORT of a running broker")
@connection_options
@click.option("--json", "as_json", is_flag=True, help="print the status as JSON")
@click.option("-v", "--verbose", is_flag=True)
def disk(root, config_file, endpoint, as_json, verbose) -> None:
    """Disk status of a store: is there room, what was cleaned, when must disk be added; exit 1 while
    writes are refused (or, through --endpoint, held by an alarm)."""
    quiet_logs(verbose)
    if endpoint:
        from .common import admin_call
        answer = admin_call(endpoint, "DiskStatus", config_file=config_file)
        st, verdict = answer["status"], answer.get("verdict")
    else:
        st = _offline_status(root, config_file)
        verdict = None
    refusal = st["flags"]["write_refusal"]
    blocked = refusal is not None or (verdict is not None and verdict["writes"] != "accepted")
    if as_json:
        emit_json(st if verdict is None else {**st, "verdict": verdict})
        raise SystemExit(1 if blocked else 0)
    rows = [[d["path"], d["role"], d["state"], human_bytes(d["capacity_bytes"]), human_bytes(d["used_bytes"]),
             f"{d['used_ratio_percent']:.1f}%", human_bytes(d["free_bytes"]),
             "/".join(str(v) for v in d["thresholds_percent"].values()), d["segments"],
             _dir_eta(d)]
            for d in st["directories"]]
    table("directories", ["path", "role", "state", "capacity", "used", "ratio", "free", "75/85/90", "segments",
                          "next ratio"], rows)
    for d in st["directories"]:
        if d.get("offline_reason"):
            out.print(f"[red]{d['path']} is {d['state']}[/]: {d['offline_reason']}")
    for f in st["flags"].get("log_failures") or ():
        resume = (f"goes on at offset {f['resume_offset']}" if f["resume_offset"] is not None
                  else "cannot go on until a restart")
        out.print(f"[red]commit log failed[/] in {f['directory']} ({f['error']}): durable up to offset "
                  f"{f['durable_end']}, what was written after it is out of the log; the log {resume}")
    if verdict is not None:
        from .status import print_verdict
        print_verdict(verdict)
    else:
        out.print(f"writes: {'[red]refused: ' + refusal + '[/]' if refusal else '[green]accepted[/]'}")
    now_s = time.time()
    out.print("last cleanup: " + cleanup_summary(st["last_cleanup"], now_s))
    last = st.get("last_round") or {}
    if last.get("why_not"):
        out.print(f"last round could not free space: {last['why_not']}")
    f = st["forecast"]
    eta = f["seconds_until_percent"]
    out.print(f"the disks fill at {human_bytes(f.get('fill_bytes_per_s', 0))}/s (the log: ingest "
              f"{human_bytes(f['ingest_bytes_per_s'])}/s, cleanup {human_bytes(f['cleanup_bytes_per_s'])}/s; "
              f"last {f.get('window_s', 60):g} s); all commit-log disks: "
              + ", ".join(f"{k}% {until(v)}" for k, v in eta.items()))
    out.print(f"forecast: {f['advice']}")
    if blocked:
        raise SystemExit(1)


def _dir_eta(d: dict) -> str:
    """The next of the directory's ratios it will reach, and when, at the pace its file system filled
    over the last minute (the same measure as the forecast of all the commit-log disks)."""
    eta = d.get("seconds_until_percent") or {}
    for ratio, s in eta.items():
        if s != 0:
            return f"{ratio}% {until(s)}"
    return f"{list(eta)[-1]}% now" if eta else "-"
