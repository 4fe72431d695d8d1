"""docs/configuration.md, generated from tidemq/config/: every setting of every section.

The settings are documented where they are defined (tidemq/config/: a frozen dataclass per
component, each field with its default, bounds and doc string through ``_f``); this module
turns that into the operator's reference, so the two cannot drift apart. For each setting:
its name, TOML section, ``TIDEMQ_*`` variable, unit (from the name's suffix: units live in
names, qualifier last), default (as TOML), bounds or choices, whether it changes at run time
(``tidemq.protocol.admin.ALARM_LIMITS``: what ``tidemq config set`` and ``tidemq alarms
--set-*`` may change), its doc string, and the names it had before (``RENAMED``, ``MOVED_IN``);
then the settings that do nothing any more (``RETIRED``).
Sections come from ``config.SECTIONS``: a new component class appears here by itself.

    scripts/config-docs                      # regenerate docs/configuration.md (what CI checks)
    python -m tidemq.config_docs --check     # exit 1 when it is stale (tests/test_config_docs.py)

Pure text out: ``render()`` reads nothing but the config classes; ``main`` writes or compares
one file.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import sys
from typing import Any

from . import config
from .protocol import admin

REGENERATE = "scripts/config-docs"
DOC_PATH = os.path.join("docs", "configuration.md")

# Trailing words of a name that qualify it rather than name its unit (qualifier last:
# `send_hold_ms_max`, `topic_queues_default`, `recovery_scan_segments_normal`).
QUALIFIERS = ("max", "min", "default", "normal")
# A name's last word -> its unit.
UNIT_WORDS = {
    "bytes": "bytes", "mib": "MiB", "us": "µs", "ms": "ms", "s": "seconds", "hours": "hours",
    "percent": "percent", "ratio": "fraction (0-1)", "port": "TCP port",
}
SIZE_UNITS = (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def unit(f: dataclasses.Field) -> str:
    """The unit of a setting, read from its name (the words after the last unit word are
    qualifiers) and its type: `send_hold_ms_max` -> ms, `inflight_bytes_per_connection_max` ->
    bytes per connection, `index_slots` -> slots; a number whose name holds no unit is a count."""
    t = _type(f)
    if t == "bool":
        return "true / false"
    if t == "list":
        return "list of text"
    if t == "str":
        return "one of" if f.metadata.get("choices") else "text"
    words = f.name.split("_")
    while len(words) > 1 and words[-1] in QUALIFIERS:
        words.pop()
    per = ""
    if "per" in words[1:-1]:
        i = words.index("per", 1)
        words, per = words[:i], " per " + " ".join(words[i + 1:])
    last = words[-1]
    if last in UNIT_WORDS:
        return UNIT_WORDS[last] + per
    if last.endswith("s") and len(last) > 2:        # a plural: what is counted (slots, entries, rounds)
        return last + per
    return "count" + per


def _type(f: dataclasses.Field) -> str:
    t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    return "list" if t.startswith("tuple") else t


def toml_value(v: Any) -> str:
    """A value as it is written in the TOML file."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def readable(v: Any, u: str) -> str:
    """A number as a person reads it, when that says more than the digits: 1073741824 bytes ->
    1 GiB, 10800 seconds -> 3 h, 120000 ms -> 2 min; '' when it would add nothing."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        return ""
    if u.startswith("bytes"):
        for name, size in SIZE_UNITS:
            if v >= size and (v * 100) % size == 0:          # 4.5 MiB, not 4608 KiB
                return f"{v / size:g} {name}"
        return ""
    seconds = {"ms": v / 1000, "seconds": v, "hours": v * 3600}.get(u.split(" per ")[0])
    if seconds is None or (u == "seconds" and v < 60) or (u == "ms" and v < 1000) or (u == "hours" and v < 48):
        return ""
    for name, size in (("d", 86_400), ("h", 3600), ("min", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size:g} {name}"
    return ""


def _number(v: Any, u: str) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        text = f"{v:.1f}"
    else:
        text = toml_value(v)
    extra = readable(v, u)
    return f"`{text}`" + (f" ({extra})" if extra else "")


def default_text(f: dataclasses.Field, u: str) -> str:
    v = f.default
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return _number(v, u)
    if v in ("", ()):
        return f"`{toml_value(v)}` (none)"
    return f"`{toml_value(v)}`"


def bounds_text(f: dataclasses.Field, u: str) -> str:
    meta = f.metadata
    if meta.get("choices"):
        return ", ".join(f"`{c}`" for c in meta["choices"])
    lo, hi = meta.get("min"), meta.get("max")
    if lo is None and hi is None:
        return ""
    return f"{_number(lo, u) if lo is not None else '-inf'} to {_number(hi, u) if hi is not None else 'inf'}"


def run_time(name: str) -> str:
    """Whether a setting changes on a running broker: the alarm limits, through the admin
    method SetAlarmLimits (tidemq.protocol.admin.ALARM_LIMITS, read at each render)."""
    if name in admin.ALARM_LIMITS:
        return "yes: `tidemq config set` (until restart)"
    return "no: restart"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _text(doc: str) -> str:
    """A doc string as table text: <root> shown, not taken for an HTML tag (code spans, between
    backticks, show it as it is)."""
    parts = doc.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def env_name(name: str, cls: type = config.StoreConfig) -> str:
    return cls.env_var(name)


def _intro(cls: type) -> str:
    doc = cls.__doc__ or ""
    if doc.startswith(cls.__name__ + "("):        # the signature dataclasses writes when there is no doc
        return ""
    return _markdown(doc)


def _markdown(doc: str) -> str:
    """A docstring as markdown: its paragraphs (literal ``x`` as `x`), indented examples kept."""
    lines = doc.strip("\n").splitlines()
    indent = min((len(s) - len(s.lstrip()) for s in lines[1:] if s.strip()), default=0)
    lines = [lines[0].strip()] + [s[indent:] for s in lines[1:]]
    return "\n".join(s.rstrip() for s in lines).replace("``", "`")


def section_table(cls: type) -> list[str]:
    renamed_to: dict[str, list[str]] = {}
    for old, new in cls.RENAMED.items():
        renamed_to.setdefault(new, []).append(old)
    for old, (sect, new) in cls.MOVED_IN.items():
        renamed_to.setdefault(new, []).append(f"[{sect}] {old}")
    out = ["| setting | unit | default | bounds | at run time | what it does |",
           "|---|---|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        u = unit(f)
        name = (f'<a id="{cls.ENV_INFIX.lower()}{f.name}"></a>`{f.name}`<br>`{env_name(f.name, cls)}`')
        doc = _text(f.metadata["doc"])
        if not f.repr:
            doc += " (secret: shown masked by `tidemq config show`)"
        if f.name in renamed_to:
            doc += " (formerly " + ", ".join(f"`{o}`" for o in renamed_to[f.name]) + ")"
        out.append("| " + " | ".join(_cell(c) for c in (
            name, u, default_text(f, u), bounds_text(f, u),
            "read by each command" if cls is config.ClientConfig else run_time(f.name), doc)) + " |")
    return out


def render() -> str:
    """The whole of docs/configuration.md."""
    sections = list(config.SECTIONS.items())
    names = ", ".join(f"[`[{s}]`](#{s})" for s, _c in sections)
    out = [
        "<!-- Generated from src/tidemq/config/ by src/tidemq/config_docs.py: do not edit by hand.",
        f"     Regenerate with `{REGENERATE}`; tests/test_config_docs.py fails while this file is stale. -->",
        "",
        "# Configuration reference",
        "",
        f"Every setting of tidemq, by section ({names}), generated from `src/tidemq/config/`, where each is",
        "defined with its default, bounds and doc string. After adding or changing a setting there, run",
        f"`{REGENERATE}`.",
        "",
        "## How settings are read",
        "",
        _markdown(config.__doc__ or ""),
        "",
        "In practice:",
        "",
        "- **A file**: `tidemq serve --config FILE` (or `TIDEMQ_CONFIG=FILE`; every command that talks to a "
        "broker or opens a store takes `--config`), TOML with one table per section: "
        + ", ".join(f"`[{s}]`" for s, _c in sections) + ".",
        f"- **The environment**: `{config.ENV_PREFIX}<SETTING>`, the setting's name in capitals "
        "(`TIDEMQ_FLUSH_DISK_TYPE=SYNC_FLUSH`); it wins over the file. True / false are `1`, `true`, `yes`, "
        "`on` / `0`, `false`, `no`, `off`; a list is `a,b` (or `a:b`, RocketMQ's way); "
        "`per_dir_thresholds` separates its entries with `;`. Any other `TIDEMQ_*` variable is an error, "
        "except " + ", ".join(f"`{n}`" for n in sorted(config.ENV_NOT_SETTINGS)) + " (options of commands, "
        "the benchmarks and the tests).",
        "- **Flags** of `tidemq serve` (`--root`, `--port`, `--group`, ...: `./tidemq serve --help`) win "
        "over both.",
        "- **A stopped store** remembers the `[store]` settings it last ran with "
        "(`<root>/config/store.json`, read under the file and the environment), so `tidemq disk`, "
        "`verify`, `topic`, `archive` and Spark's file mode need only `--root`.",
        "- **Units** are in the names, the qualifier last (`send_hold_ms_max`: milliseconds, a maximum); "
        "`*_percent` settings are whole percents (`85`, not `0.85`), `*_ratio` settings fractions.",
        "- **At run time** only " + ", ".join(f"`{n}`" for n in admin.ALARM_LIMITS) + " change, on a "
        "running broker, until it restarts: `tidemq config set NAME VALUE` or `tidemq alarms --set-...` "
        "(both say how to keep the change). Everything else: the file or the environment, then a "
        "restart. `tidemq config show` prints what a running broker uses.",
        "",
    ]
    for sect, cls in sections:
        out += [f'<a id="{sect}"></a>', "", f"## [{sect}]", ""]
        intro = _intro(cls)
        if intro:
            out += [intro, ""]
        out += section_table(cls) + [""]
    renamed = [(cls.SECTION, old, new) for _s, cls in sections for old, new in cls.RENAMED.items()]
    moved = [(sect, old, cls.SECTION, new) for _s, cls in sections for old, (sect, new) in cls.MOVED_IN.items()]
    if renamed or moved:
        out += ["## Renamed and moved settings", "",
                "Names of earlier versions are still read, in the file and as `TIDEMQ_*` variables, with a "
                "warning naming the new one (a `*_ratio` name that became `*_percent` may still hold a "
                "fraction: `0.85` is read as 85). The old names will stop working in a later release.", "",
                "| old name | section | now |", "|---|---|---|"]
        out += [f"| `{old}` (`{env_name(old)}`) | `[{sect}]` | [`{new}`](#{new}) |" for sect, old, new in renamed]
        out += [f"| `{old}` | `[{old_sect}]` | [`[{sect}]` `{new}`](#{new}) |" for old_sect, old, sect, new in moved]
        out.append("")
    retired = [(cls.SECTION, name, why) for _s, cls in sections for name, why in cls.RETIRED.items()]
    if retired:
        out += ["## Retired settings", "",
                "These do nothing any more: in the file or as `TIDEMQ_*` variables they are ignored, with a "
                "warning saying why. Remove them from your configuration.", "",
                "| setting | section | why |", "|---|---|---|"]
        out += [f"| `{name}` (`{env_name(name)}`) | `[{sect}]` | {_cell(_text(why))} |" for sect, name, why in retired]
        out.append("")
    return "\n".join(out)


def repo_path() -> str:
    """docs/configuration.md of the checkout this module runs from (src/tidemq/ -> the root)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(root, DOC_PATH)


def stale(path: str) -> str | None:
    """None when ``path`` holds what render() gives; else what differs (a short unified diff)."""
    want = render()
    try:
        with open(path, encoding="utf-8") as fh:
            have = fh.read()
    except FileNotFoundError:
        return f"{path} does not exist"
    if have == want:
        return None
    diff = difflib.unified_diff(have.splitlines(), want.splitlines(), path, "generated", n=0, lineterm="")
    lines = list(diff)
    return "\n".join(lines[:40] + ([f"... ({len(lines) - 40} more lines)"] if len(lines) > 40 else []))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tidemq.config_docs",
                                description="Write docs/configuration.md from tidemq/config/.")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when the file is stale")
    p.add_argument("--output", default=None, help=f"the file (default: {DOC_PATH} of this checkout)")
    args = p.parse_args(argv)
    path = args.output or repo_path()
    if args.check:
        why = stale(path)
        if why is not None:
            print(f"{path} is stale: run {REGENERATE}\n{why}", file=sys.stderr)
            return 1
        print(f"{path} is current")
        return 0
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
