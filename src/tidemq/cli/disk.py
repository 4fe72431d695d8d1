"""`tidemq disk`: per-directory usage and state, flags, last cleanup, and the forecast."""

from __future__ import annotations

import click

from .common import config_option, open_store, quiet_logs, root_option
from .output import emit_json, out, table


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def _offline_status(root, config_file) -> dict:
    store = open_store(root, config_file, " (or ask the broker: --endpoint)")
    try:
        return store.disk_status()
    finally:
        store.shutdown()


def _eta(s) -> str:
    if s is None:
        return "-"
    if s == 0:
        return "now"
    return f"{s / 3600:.1f} h"


@click.command()
@root_option
@config_option
@click.option("--endpoint", default=None, envvar="TIDEMQ_ENDPOINT", help="HOST:PORT of a running broker")
@click.option("--json", "as_json", is_flag=True, help="print the status as JSON")
@click.option("-v", "--verbose", is_flag=True)
def disk(root, config_file, endpoint, as_json, verbose) -> None:
    """Disk status of a store: is there room, what was cleaned, when must disk be added; exit 1 while
    writes are refused (or, through --endpoint, held by an alarm)."""
    quiet_logs(verbose)
    if endpoint:
        from .topic import _admin
        answer = _admin(endpoint, "DiskStatus", config_file=config_file)
        st, verdict = answer["status"], answer.get("verdict")
    else:
        st = _offline_status(root, config_file)
        verdict = None
    refusal = st["flags"]["write_refusal"]
    blocked = refusal is not None or (verdict is not None and verdict["writes"] != "accepted")
    if as_json:
        emit_json(st if verdict is None else {**st, "verdict": verdict})
        raise SystemExit(1 if blocked else 0)
    rows = [[d["path"], d["role"], d["state"], _gib(d["capacity_bytes"]), _gib(d["used_bytes"]),
             f"{d['used_ratio_percent']:.1f}%", _gib(d["free_bytes"]),
             "/".join(str(v) for v in d["thresholds_percent"].values()), d["segments"]]
            for d in st["directories"]]
    table("directories", ["path", "role", "state", "capacity", "used", "ratio", "free", "75/85/90", "segments"], rows)
    if verdict is not None:
        from .status import print_verdict
        print_verdict(verdict)
    else:
        out.print(f"writes: {'[red]refused: ' + refusal + '[/]' if refusal else '[green]accepted[/]'}")
    lc = st["last_cleanup"]
    if lc["deleted"] or lc["why_not"]:
        out.print(f"last cleanup: deleted {len(lc['deleted'])} segment(s) ({'+'.join(lc['triggers'])})"
                  + (f"; could not delete more: {lc['why_not']}" if lc["why_not"] else ""))
    f = st["forecast"]
    eta = f["seconds_until_percent"]
    out.print(f"ingest {f['ingest_bytes_per_s'] / 1e6:.2f} MB/s, cleanup {f['cleanup_bytes_per_s'] / 1e6:.2f} MB/s; "
              + ", ".join(f"{k}% {_eta(v)}" for k, v in eta.items()))
    out.print(f"forecast: {f['advice']}")
    if blocked:
        raise SystemExit(1)
