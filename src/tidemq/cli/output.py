"""One terminal wrapper for every subcommand: tables and progress to stdout, errors to stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

# into a pipe or a file, rich would cut tables to 80 columns ("./dat…"): there, lines are as long
# as they need to be
WIDE = 1 << 16
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else WIDE)
err = Console(stderr=True, highlight=False, soft_wrap=True, width=None if sys.stderr.isatty() else WIDE)


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    t = Table(title=title)
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    out.print(t)


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def fail(message: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise SystemExit(code)
