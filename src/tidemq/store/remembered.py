"""The settings a store last ran with, kept in ``<root>/config/store.json``, so that commands
run on a stopped store (`tidemq disk`, `verify`, `topic list`, `archive`, Spark's file mode)
know its commit-log directories and limits from ``--root`` alone, without the broker's
``--config`` repeated. Written at start when they changed; read as the lowest layer under a
configuration file and TIDEMQ_* variables (StoreConfig.load's ``base``).

Directories are remembered as absolute paths: the commands may run from another directory.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

from ..config import StoreConfig
from ..io import FileIO, read_whole, write_atomic
from ..layout import config_dir

log = logging.getLogger("tidemq.store")

FILE = "store.json"
NOT_REMEMBERED = ("root_dir",)      # the root is where the file is: it may have moved


def path(root: str) -> str:
    return os.path.join(config_dir(root), FILE)


def settings_of(cfg: StoreConfig) -> dict:
    out = {}
    for f in dataclasses.fields(cfg):
        if f.name in NOT_REMEMBERED:
            continue
        v = getattr(cfg, f.name)
        if f.name.endswith("_dirs"):
            v = [os.path.abspath(d) for d in v]
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def remember(fio: FileIO, cfg: StoreConfig) -> None:
    """Write the settings when they differ from what the file holds (a start costs no fsync
    when nothing changed)."""
    doc = {"settings": settings_of(cfg)}
    p = path(cfg.root_dir)
    data = json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")
    try:
        if fio.exists(p):
            old = read_whole(fio, p)
            if old == data:
                return
            _say_moved_dirs(old, doc["settings"])
        write_atomic(fio, p, data)
    except OSError as e:        # a convenience for offline commands: never a reason not to start
        log.warning("cannot remember the store's settings in %s: %s", p, e)


def recall(root: str) -> dict:
    """The settings remembered under ``root`` (empty when none or unreadable), only those the
    running version knows."""
    try:
        with open(path(root), "rb") as fh:
            doc = json.loads(fh.read().decode("utf-8"))
        settings = doc["settings"]
        if not isinstance(settings, dict):
            return {}
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    known = {f.name for f in dataclasses.fields(StoreConfig)}
    return {k: v for k, v in settings.items() if k in known and k not in NOT_REMEMBERED}


def _say_moved_dirs(old: bytes, new: dict) -> None:
    """Starting without a commit-log directory the store last ran with leaves its segments unread:
    say so (a configuration file forgotten is the usual cause)."""
    try:
        before = json.loads(old.decode("utf-8"))["settings"]
    except (ValueError, KeyError, TypeError):
        return
    gone = [d for d in (before.get("commitlog_dirs") or []) + (before.get("readonly_commitlog_dirs") or [])
            if d not in (new.get("commitlog_dirs") or []) + (new.get("readonly_commitlog_dirs") or [])]
    if gone:
        log.warning("this store last ran with commit-log directories it is not given now: %s; segments "
                    "there are not read (was the configuration file left out?)", ", ".join(gone))
