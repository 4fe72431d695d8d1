"""`tidemq verify`: walk a store and report what is wrong; non-zero exit if anything is."""

from __future__ import annotations

import click

from .common import config_option, open_store, quiet_logs, root_option
from .output import emit_json, err, out


@click.command()
@root_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option("-v", "--verbose", is_flag=True)
def verify(root, config_file, as_json, verbose) -> None:
    """Check every segment (magic, lengths, CRC), consume queue and index file of a store.

    The store is opened (and recovered, like any start) by this process: stop the
    broker that holds it first.
    """
    from rich.progress import BarColumn, Progress, TextColumn

    quiet_logs(verbose)
    store = open_store(root, config_file, ": stop the broker first")
    try:
        with Progress(TextColumn("verifying"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                      console=err, transient=True, disable=as_json) as progress:
            task = progress.add_task("verify", total=1)

            def on_progress(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            rep = store.check(on_progress)
        doc = {"ok": rep.ok, "segments": rep.segments, "records": rep.records, "bytes": rep.bytes,
               "queues": rep.queues, "units": rep.units, "index_files": rep.index_files,
               "damaged_regions": rep.damaged_regions,
               "problems": rep.problems,
               "corrected": list(store.recovery.queues_rebuilt) if store.recovery else [],
               "recovery": store.recovery.summary() if store.recovery else None}
    finally:
        store.shutdown()
    if as_json:
        emit_json(doc)
    else:
        out.print(f"recovery: {doc['recovery']}")
        out.print(f"{rep.segments} segment(s), {rep.records} record(s), {rep.bytes} bytes; "
                  f"{rep.queues} queue(s), {rep.units} unit(s); {rep.index_files} index file(s)")
        if rep.damaged_regions:
            out.print(f"[red]{rep.damaged_regions} damaged region(s)[/] in the commit log: their records are "
                      f"never served (readers skip them); every other record is")
        if doc["corrected"]:
            out.print(f"[yellow]corrected at start[/]: consume queues rebuilt from the log: "
                      f"{', '.join(doc['corrected'])}")
        if rep.ok and not doc["corrected"]:
            out.print("[green]OK[/]: no problem found")
        elif rep.ok:
            out.print("[yellow]OK now[/]: the store had to be corrected (exit 1, as fsck after a correction)")
        else:
            out.print(f"[red]{len(rep.problems)} problem(s)[/]:")
            for p in rep.problems:
                out.print(f"  - {p}")
    raise SystemExit(0 if rep.ok and not doc["corrected"] else 1)
