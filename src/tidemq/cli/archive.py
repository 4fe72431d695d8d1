"""`tidemq archive`: copy sealed commit-log segments to Parquet with Spark (tidemq.spark.archive)."""

from __future__ import annotations

import contextlib
import os

import click

from .output import emit_json, err, out


@contextlib.contextmanager
def _stderr_to(path: str):
    """File descriptor 2 goes to ``path`` while the body runs (Spark's JVM, started in it, keeps
    writing there: its start-up banner and warnings stay out of the terminal); then it comes back."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    saved = os.dup(2)
    try:
        with open(path, "ab") as f:
            os.dup2(f.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@click.command()
@click.option("--root", default="./data", show_default=True, help="store root (its archive/manifest.json is updated)")
@click.option("--dest", default=None, help="where the Parquet goes [default: <root>/../archive]")
@click.option("--commitlog-dirs", default="", help="commit-log directories (a,b); default: those the store remembers from its last start, else <root>/commitlog")
@click.option("--master", default="local[*]", show_default=True, help="Spark master")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
def archive(root, dest, commitlog_dirs, master, as_json) -> None:
    """Write every sealed, not yet archived segment to Parquet partitioned by topic and day,
    then record it in the manifest (what archive_before_delete lets the cleaner delete).
    Runs next to the store (it reads the segment files); a running broker is fine."""
    from ..layout import root_problem
    root = os.path.abspath(root)
    problem = root_problem(root)
    if problem is not None:
        raise click.ClickException(f"{problem} (--root)")
    try:
        from ..spark import archive as job
        from ..spark import session
    except ImportError as e:
        raise click.ClickException(f"the archive job needs the spark extra ({e}): "
                                   f"pip install -e '.[spark]' (./tidemq archive installs it)") from e
    dest = os.path.abspath(dest or os.path.join(os.path.dirname(root), "archive"))
    dirs = tuple(d for d in commitlog_dirs.replace(":", ",").split(",") if d)
    log_path = os.path.join(root, "archive", "spark.log")
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
    with Progress(SpinnerColumn("line"), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=err, transient=True, disable=as_json) as bar:
        task = bar.add_task(f"starting Spark (its log: {log_path})", total=None)
        with _stderr_to(log_path):           # the JVM and its Python workers inherit this stderr
            spark = session(master, "tidemq-archive")
        spark.sparkContext.setLogLevel("ERROR")
        bar.update(task, description="finding sealed segments")

        def progress(done: int, total: int) -> None:
            bar.update(task, description="archiving segments", completed=done, total=total)
        try:
            report = job.run(spark, root, dest, dirs, progress)
        except job.ArchiveError as e:
            raise click.ClickException(str(e)) from e
        finally:
            spark.stop()
    if as_json:
        emit_json(report)
    elif report["archived"]:
        out.print(f"archived {len(report['archived'])} segment(s), {report['rows']} message(s) to {dest} "
                  f"(run {report['run']}, {report['seconds']} s)")
    else:
        out.print("nothing to archive: every sealed segment is in the manifest")
