"""One typed, frozen configuration per component, checked in one place.

Every field carries its unit in its name (qualifier last: ``segment_size_bytes``,
``send_hold_ms_max``), its default, its bounds and a doc string (in the field
metadata). Sources, weakest first: defaults, a TOML file (one ``[section]`` per
component: ``[store]``, ``[broker]``, ``[replication]``), ``TIDEMQ_*`` environment variables,
explicit keyword overrides (a command's flags); nothing else in the code base reads the
environment. docs/configuration.md is generated from these classes (scripts/config-docs).

Mistakes are errors (ConfigError, one line, with "did you mean" where a name is
close to a known one), never silently ignored or bent: an unknown section, setting
or ``TIDEMQ_*`` variable; a value of the wrong type (``0.85`` for a whole number is
refused, never truncated; a ``*_percent`` setting says "85 means 85 %"); a value
outside its bounds (Kafka's ConfigDef does the same). Settings renamed since are
still read under their old names, with a deprecation warning (``RENAMED``).

    cfg = StoreConfig.load(toml_path="tidemq.toml", section="store", root_dir="/var/lib/tidemq")
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import tomllib
import warnings
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Mapping

from . import layout      # the store root's names, spelled once (StoreConfig's derived locations)

log = logging.getLogger("tidemq.config")

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

ENV_PREFIX = "TIDEMQ_"
# TIDEMQ_* variables that are not settings of a config class (command options' twins, benchmarks)
ENV_NOT_SETTINGS = frozenset({"TIDEMQ_CONFIG", "TIDEMQ_ENDPOINT", "TIDEMQ_BENCH_SRC", "TIDEMQ_BENCH_RESULTS",
                              "TIDEMQ_ACCEL", "TIDEMQ_TEST_WORKERS"})
SECTIONS: dict[str, type] = {}       # TOML section -> config class (filled by the classes below)


def accel_wanted(env: Mapping[str, str] | None = None) -> bool:
    """TIDEMQ_ACCEL: "0" runs the pure-Python record loops even where the compiled ones
    (tidemq._accel) are built (tidemq/accel.py; CI runs the suite both ways); anything else, or
    unset, uses the compiled ones when they are there. Read once, at import of tidemq.accel."""
    v = (os.environ if env is None else env).get("TIDEMQ_ACCEL", "1").strip().lower()
    return v not in ("0", "false", "no", "off")


def _f(default: Any, doc: str, lo: float | None = None, hi: float | None = None,
       choices: tuple[str, ...] | None = None, secret: bool = False) -> Any:
    meta = {"doc": doc, "min": lo, "max": hi, "choices": choices}
    if isinstance(default, (list, tuple)):
        return field(default=tuple(default), metadata=meta)
    return field(default=default, metadata=meta, repr=not secret)


def is_loopback(host: str) -> bool:
    """Whether an address (or "localhost") is this machine's loopback."""
    import ipaddress
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ConfigError(ValueError):
    """A configuration that cannot be used (unknown name, wrong type or choice, out of bounds)."""


def did_you_mean(name: str, known) -> str:
    """' (did you mean X?)' for the closest known name, or ''."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _whole(name: str, value: Any) -> int:
    """An int from an int, an integral float or a string of one; never truncated."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        value = value.strip().replace("_", "")
        try:
            return int(value)
        except ValueError:
            value = float(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    hint = ""
    if name.endswith("_percent") and isinstance(value, float) and 0 < value < 1:
        hint = f": this setting is a percent (85 means 85 %): did you mean {value * 100:g}?"
    raise ConfigError(f"{name}: {value!r} is not a whole number{hint}")


def _coerce(name: str, typ: Any, value: Any) -> Any:
    """Turn a TOML or environment value into the field's type."""
    t = typ if isinstance(typ, str) else getattr(typ, "__name__", str(typ))
    try:
        if t.startswith("tuple"):
            if isinstance(value, str):
                # RocketMQ users write "a:b:c"; others "a,b,c".
                sep = "," if "," in value else ":"
                return tuple(p.strip() for p in value.split(sep) if p.strip())
            if not isinstance(value, (list, tuple)):
                raise ValueError(value)
            return tuple(str(v) for v in value)
        if t == "bool":
            if isinstance(value, str):
                v = value.strip().lower()
                if v in ("1", "true", "yes", "on"):
                    return True
                if v in ("0", "false", "no", "off"):
                    return False
                raise ValueError(value)
            if not isinstance(value, (bool, int)):
                raise ValueError(value)
            return bool(value)
        if t == "int":
            return _whole(name, value)
        if t == "float":
            if isinstance(value, bool):
                raise ValueError(value)
            return float(value)
        if t == "str":
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ValueError(value)
            return str(value)
    except (TypeError, ValueError, OverflowError) as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"{name}: cannot use {value!r} as {t}") from e
    return value


def _old_ratio(old: str, new: str, value: Any) -> Any:
    """A deprecated ``*_ratio`` name holding a percent: a fraction (0.85) is understood as 85 %."""
    if old.endswith("_ratio") and new.endswith("_percent") and not isinstance(value, bool):
        try:
            f = float(value)
        except (TypeError, ValueError):
            return value
        if 0 < f <= 1:
            return f * 100
    return value


class _Loadable:
    """Shared loading and checking for the config dataclasses."""

    SECTION: ClassVar[str] = ""
    RENAMED: ClassVar[Mapping[str, str]] = {}       # old name -> new name, read with a deprecation warning
    RETIRED: ClassVar[Mapping[str, str]] = {}       # name -> why it does nothing any more: ignored, with a warning
    MOVED_IN: ClassVar[Mapping[str, tuple[str, str]]] = {}   # old key -> (its old section, new name here)
    MOVED_OUT: ClassVar[frozenset[str]] = frozenset()       # keys of this section now read by another
    ENV_INFIX: ClassVar[str] = ""       # between TIDEMQ_ and the name in capitals (ClientConfig: CLIENT_)

    @classmethod
    def env_var(cls, name: str) -> str:
        """The environment variable of a setting (``TIDEMQ_FLUSH_DISK_TYPE``, ``TIDEMQ_CLIENT_SECRET_KEY``)."""
        return ENV_PREFIX + cls.ENV_INFIX + name.upper()

    def _check(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            meta = f.metadata
            v = getattr(self, f.name)
            choices = meta.get("choices")
            if choices and v not in choices:
                raise ConfigError(f"{f.name}: {v!r} is not one of {', '.join(choices)}")
            lo, hi = meta.get("min"), meta.get("max")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                if f.type in ("int", int) and isinstance(v, float):
                    object.__setattr__(self, f.name, v := _whole(f.name, v))
                if v != v or (lo is not None and v < lo) or (hi is not None and v > hi):
                    raise ConfigError(f"{f.name}: {v!r} is outside [{_num(lo)}, {_num(hi)}]")

    @classmethod
    def _renamed(cls, name: str, where: str) -> str:
        new = cls.RENAMED.get(name)
        if new is None:
            return name
        msg = f"{where}: setting {name!r} is now {new!r}; the old name will stop working in a later release"
        log.warning("%s", msg)
        warnings.warn(msg, DeprecationWarning, stacklevel=3)
        return new

    @classmethod
    def _retired(cls, name: str, where: str) -> bool:
        why = cls.RETIRED.get(name)
        if why is not None:
            log.warning("%s: setting %r does nothing any more (%s): ignored", where, name, why)
        return why is not None

    @classmethod
    def load(cls, toml_path: str | None = None, env: Mapping[str, str] | None = None,
             section: str | None = None, base: Mapping[str, Any] | None = None, **overrides: Any):
        """Defaults < base (e.g. the settings a store remembers) < TOML file (optionally one
        [section]) < TIDEMQ_* env < overrides."""
        known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
        values: dict[str, Any] = {k: _coerce(k, known[k].type, v) for k, v in (base or {}).items() if k in known}
        if toml_path:
            settings = _toml_settings(toml_path, section)
            for k, (sect, new) in cls.MOVED_IN.items():      # e.g. [broker] auto_create_topics, now [store]'s
                v = _toml_settings(toml_path, sect, top_level=False).get(k)
                if v is not None and new not in settings:
                    log.warning("%s: [%s] %s is now [%s] %s: read from there", toml_path, sect, k, cls.SECTION, new)
                    settings[new] = v
            for k in cls.MOVED_OUT:
                if settings.pop(k, None) is not None:
                    log.warning("%s: %s is now a setting of [store]: read there", toml_path, k)
            for k, v in settings.items():
                if cls._retired(k, toml_path):
                    continue
                name = cls._renamed(k, toml_path)
                if name not in known:
                    raise ConfigError(f"{toml_path}: unknown setting {k!r}" + did_you_mean(k, known))
                values[name] = _coerce(name, known[name].type, _old_ratio(k, name, v))
        env = os.environ if env is None else env
        check_env(env)
        for old, new in cls.RENAMED.items():
            ev = env.get(cls.env_var(old))
            if ev is not None and cls.env_var(new) not in env:
                cls._renamed(old, cls.env_var(old))
                values[new] = _coerce(new, known[new].type, _old_ratio(old, new, ev))
        for k, f in known.items():
            ev = env.get(cls.env_var(k))
            if ev is not None:
                values[k] = _coerce(k, f.type, ev)
        for k in cls.RETIRED:
            if cls.env_var(k) in env:
                cls._retired(k, cls.env_var(k))
        for k, v in overrides.items():
            if cls._retired(k, "argument"):
                continue
            name = cls._renamed(k, "argument")
            if name not in known:
                raise ConfigError(f"unknown setting {k!r}" + did_you_mean(k, known))
            values[name] = v
        return cls(**values)

    def replace(self, **changes: Any):
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def with_setting(self, name: str, value: Any):
        """A copy with setting ``name`` (an old name is read as its new one) changed to ``value`` (a
        TOML / environment value: "0.5", 10, "04;16"), checked by the very code a start checks (type,
        bounds, choices, the settings that go together): ConfigError when it cannot be used.
        ``tidemq config set`` goes through it (broker/live_settings.py)."""
        known = {f.name: f for f in fields(self)}  # type: ignore[arg-type]
        name = self.RENAMED.get(name, name)
        if name not in known:
            raise ConfigError(f"unknown setting {name!r}" + did_you_mean(name, known))
        return dataclasses.replace(self, **{name: _coerce(name, known[name].type, value)})  # type: ignore[type-var]

    @classmethod
    def describe(cls) -> list[tuple[str, Any, str, Any, Any]]:
        """(name, default, doc, min, max) for every setting: for `--help` and docs."""
        return [(f.name, f.default, f.metadata["doc"], f.metadata["min"], f.metadata["max"])
                for f in fields(cls)]  # type: ignore[arg-type]


def _num(x: float | None) -> str:
    return "-inf" if x is None else f"{x:g}" if isinstance(x, float) else str(x)


def _toml_settings(path: str, section: str | None, top_level: bool = True) -> dict[str, Any]:
    """The settings a TOML file gives one section: its ``[section]`` table, or, in a file without
    it, its top-level keys (unless ``top_level`` is false). An unknown section is an error."""
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the configuration file: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    for k, v in doc.items():
        if isinstance(v, dict) and k not in SECTIONS:
            raise ConfigError(f"{path}: unknown section [{k}]" + did_you_mean(k, SECTIONS).replace(
                "mean ", "mean [").replace("?)", "]?)"))
    if section and isinstance(doc.get(section), dict):
        return dict(doc[section])
    return {k: v for k, v in doc.items() if not isinstance(v, dict)} if top_level else {}


def toml_settings(path: str, section: str | None, top_level: bool = True) -> dict[str, Any]:
    """The settings a TOML file gives one section (a client's own file and ``[client]``:
    client/settings.py); ConfigError when the file cannot be read or names an unknown section."""
    return _toml_settings(path, section, top_level)


def check_env(env: Mapping[str, str]) -> None:
    """Every TIDEMQ_* variable must name a setting of some component (or be one of
    ENV_NOT_SETTINGS): a misspelled one is an error, not silently ignored."""
    names = set(ENV_NOT_SETTINGS)
    for c in SECTIONS.values():
        names.update(c.env_var(f.name) for f in fields(c))
        names.update(c.env_var(old) for old in c.RENAMED)
        names.update(c.env_var(old) for old in c.RETIRED)
    for k in env:
        if k.startswith(ENV_PREFIX) and k not in names:
            raise ConfigError(f"environment variable {k} is not a tidemq setting" + did_you_mean(k, names))


@dataclass(frozen=True)
class StoreConfig(_Loadable):
    """The embedded store (tidemq/store/): where its files live, the disks' three ratios and
    cleanup, segment, queue and index sizes, flushing, reads. Commands on a stopped store read
    these too (and what the store remembers of them: ``<root>/config/store.json``)."""

    SECTION: ClassVar[str] = "store"
    RENAMED: ClassVar[Mapping[str, str]] = {
        "disk_max_used_space_ratio": "disk_used_space_percent_max",
        "disk_space_clean_forcibly_ratio": "disk_space_clean_forcibly_percent",
        "disk_space_warning_level_ratio": "disk_space_warning_level_percent",
        "max_message_size_bytes": "message_body_bytes_max",
        "default_queue_count": "topic_queues_default",
        "pull_max_count_in_memory": "pull_in_memory_count_max",
        "pull_max_bytes_in_memory": "pull_in_memory_bytes_max",
        "pull_max_count_from_disk": "pull_from_disk_count_max",
        "pull_max_bytes_from_disk": "pull_from_disk_bytes_max",
        "access_message_in_memory_ratio_max_percent": "access_message_in_memory_percent_max",
    }
    MOVED_IN: ClassVar[Mapping[str, tuple[str, str]]] = {
        "auto_create_topics": ("broker", "auto_create_topics"),
        "default_queue_count": ("broker", "topic_queues_default"),
    }

    root_dir: str = _f("./data", "store root: commitlog/, consumequeue/, index/, config/, checkpoint, abort")
    commitlog_dirs: tuple[str, ...] = _f((), "commit-log directories (empty: <root>/commitlog); 'a:b' or 'a,b' accepted")

    readonly_commitlog_dirs: tuple[str, ...] = _f((), "commit-log directories read but never written (old disks being drained)")
    per_dir_thresholds: tuple[str, ...] = _f((), "per-directory ratios 'DIR=max,forcibly,warning' (percent); "
                                                 "';' separates entries in an environment variable")

    # Disk space (RocketMQ's three ratios, in percent of each directory's file system)
    disk_used_space_percent_max: int = _f(75, "percent: above it, expired commit-log segments are deleted "
                                              "(RocketMQ diskMaxUsedSpaceRatio)", 10, 95)
    disk_space_clean_forcibly_percent: int = _f(85, "percent: a directory above it takes no new segments; above it "
                                                    "on every writable directory, unexpired segments are deleted "
                                                    "too (RocketMQ diskSpaceCleanForciblyRatio)", 30, 85)
    disk_space_warning_level_percent: int = _f(90, "percent: DISK_FULL, puts are refused (reads go on) "
                                                   "(RocketMQ diskSpaceWarningLevelRatio)", 35, 90)
    clean_resource_interval_ms: int = _f(10_000, "period of the cleanup services and disk checks", 10, 3_600_000)
    delete_when: str = _f("04", "hours (local time) when expired segments are deleted, e.g. '04;16'")
    file_reserved_time_hours: float = _f(72.0, "retention: a commit-log segment whose newest message is older than "
                                            "this is expired (RocketMQ fileReservedTime); expired segments are "
                                            "deleted at delete_when, or above disk_used_space_percent_max",
                                        0.0, 24 * 365 * 10)
    delete_file_batch_max: int = _f(10, "segments deleted per cleanup round at most", 1, 10_000)
    delete_commit_log_files_interval_ms: int = _f(100, "pause between two segment deletions", 0, 60_000)
    destroy_mapped_file_interval_forcibly_ms: int = _f(120_000, "a segment held by a reader is deleted anyway after this",
                                                        0, 3_600_000)
    manual_delete_rounds: int = _f(20, "rounds a manual 'delete expired commit log' forces", 1, 1_000)

    archive_before_delete: bool = _f(False, "delete only commit-log segments `tidemq archive` has copied out "
                                            "(<root>/archive/manifest.json)")
    on_unarchived_full: str = _f("refuse", "archive_before_delete at the disk's warning level: 'refuse' writes "
                                           "(nothing is lost) or 'delete' unarchived segments and record the gap "
                                           "in <root>/archive/gaps.json", choices=("refuse", "delete"))
    segment_size_bytes: int = _f(1 * GIB, "commit-log segment size (RocketMQ mappedFileSizeCommitLog)", 4 * KIB, 2 * GIB - 1)
    preallocate_next_segment: bool = _f(True, "create the next commit-log segment in the background before it is needed")
    commitlog_warm_enabled: bool = _f(False, "a background thread takes the page faults of the commit log's next "
                                             "commitlog_warm_ahead_mib ahead of the writer (madvise "
                                             "MADV_POPULATE_WRITE; RocketMQ warmMapedFileEnable). Off: batches and "
                                             "a follower's copies are pwritten, not written through the mapping, "
                                             "and warm pages only cost their zeroing (bench/README.md)")
    commitlog_warm_ahead_mib: int = _f(32, "MiB after the log's end kept warm, into the pre-made next segment at a "
                                           "segment's end (at most the segment size; warm pages are dirty: an "
                                           "fsync writes out those the writer has not reached yet)", 1, 1024)
    consume_queue_units_per_segment: int = _f(300_000, "20-byte units per consume-queue file", 16, 10_000_000)
    consume_queue_open_files_max: int = _f(1024, "open consume-queue file handles kept at most (LRU)", 8, 1_000_000)
    index_slots: int = _f(5_000_000, "hash slots per index file", 16, 50_000_000)
    index_entries: int = _f(20_000_000, "entries per index file", 16, 200_000_000)
    index_enabled: bool = _f(True, "build the key / unique-key hash index")

    message_body_bytes_max: int = _f(4 * MIB, "largest accepted message body", 1, 128 * MIB)
    topic_queues_default: int = _f(8, "queues of a topic created without a queue count (auto-creation, "
                                      "topic create without --queues)", 1, 1024)
    topic_queues_max: int = _f(1024, "queues a topic may have at most (CreateTopic asking for more is refused: a "
                                  "million queues cost gigabytes of memory at every start)", 1, 65_536)
    auto_create_topics: bool = _f(False, "a put, send or route query for an unknown topic creates it with "
                                         "topic_queues_default queues (off: TOPIC_NOT_FOUND); the demo `./tidemq` "
                                         "and `tidemq serve --auto-create-topics` turn it on")
    topic_tag_cache_max: int = _f(4_096, "distinct tags per topic whose record encoding is remembered by the "
                                         "write path", 0, 10_000_000)
    store_host: str = _f("127.0.0.1:10911", "ipv4:port written as STOREHOST and used in offset message ids")

    flush_disk_type: str = _f("ASYNC_FLUSH", "SYNC_FLUSH: put returns once durable; ASYNC_FLUSH: flushed in the background",
                              choices=("ASYNC_FLUSH", "SYNC_FLUSH"))
    flush_interval_ms: int = _f(500, "async flush period of the commit log", 1, 60_000)
    flush_least_pages: int = _f(4, "async flush waits for this many dirty 4 KiB pages", 0, 1_000_000)
    flush_thorough_interval_ms: int = _f(10_000, "async flush flushes everything at least this often", 1, 600_000)
    sync_flush_timeout_ms: int = _f(5_000, "a SYNC_FLUSH put not durable by then answers FLUSH_DISK_TIMEOUT", 1, 600_000)
    sync_flush_gather_us_max: int = _f(0, "SYNC_FLUSH group commit: before an fsync, wait at most this long (and at "
                                          "most half the last fsync) for the writers the last one released to "
                                          "append again, so one fsync covers them all (fewer fsyncs per message; "
                                          "on a disk busy with fsyncs no faster: off by default; 0: fsync at once)",
                                   0, 100_000)
    flush_consume_queue_interval_ms: int = _f(1_000, "flush period of consume queues and index", 1, 60_000)
    checkpoint_interval_ms: int = _f(1_000, "the checkpoint file is flushed at least this often", 10, 60_000)

    pull_in_memory_count_max: int = _f(32, "messages per get when the data is likely in the page cache", 1, 100_000)
    pull_in_memory_bytes_max: int = _f(256 * KIB, "bytes per get when the data is likely in the page cache", 1, 1 * GIB)
    pull_from_disk_count_max: int = _f(8, "messages per get when the data is likely on disk", 1, 100_000)
    pull_from_disk_bytes_max: int = _f(64 * KIB, "bytes per get when the data is likely on disk", 1, 1 * GIB)
    access_message_in_memory_percent_max: int = _f(40, "data within this % of RAM of the log's end counts as in memory", 1, 100)

    recovery_scan_segments_normal: int = _f(3, "segments checked at the log's end after a clean shutdown", 1, 1_000)
    dispatch_write_retries_max: int = _f(3, "retries of a failed consume-queue / index write before writes are refused", 0, 100)
    dispatch_deferred_max: int = _f(1024, "puts whose dispatch may wait for after their answer (store/put_lock.py); "
                                    "a put beyond it dispatches at once, with those before it", 1, 1_000_000)

    def __post_init__(self) -> None:
        for name in ("commitlog_dirs", "readonly_commitlog_dirs"):
            v = getattr(self, name)
            object.__setattr__(self, name, _coerce(name, "tuple", v) if isinstance(v, str) else tuple(v))
        if isinstance(self.per_dir_thresholds, str):
            object.__setattr__(self, "per_dir_thresholds",
                               tuple(p.strip() for p in self.per_dir_thresholds.split(";") if p.strip()))
        self._check()
        if self.topic_queues_default > self.topic_queues_max:
            raise ConfigError(f"topic_queues_default ({self.topic_queues_default}) is above topic_queues_max "
                              f"({self.topic_queues_max})")
        self.delete_hours()
        self.dir_thresholds()

    def delete_hours(self) -> frozenset[int]:
        """delete_when as a set of hours: '04', '04;16', '4,16'."""
        hours = set()
        for part in self.delete_when.replace(",", ";").split(";"):
            part = part.strip()
            if not part:
                continue
            if not part.isdigit() or not 0 <= int(part) <= 23:
                raise ConfigError(f"delete_when: {part!r} is not an hour 00-23")
            hours.add(int(part))
        return frozenset(hours)

    def thresholds(self) -> tuple[int, int, int]:
        """(max used, clean forcibly, warning) in percent, in a sane order (a lower warning level
        pulls the other two down with it)."""
        w = self.disk_space_warning_level_percent
        f = min(self.disk_space_clean_forcibly_percent, w)
        return min(self.disk_used_space_percent_max, f), f, w

    def dir_thresholds(self) -> dict[str, tuple[int, int, int]]:
        """Per-directory (max used, clean forcibly, warning) overrides, in the global ones' bounds and
        put in the same sane order."""
        out: dict[str, tuple[int, int, int]] = {}
        for entry in self.per_dir_thresholds:
            path, sep, vals = entry.rpartition("=")
            try:
                a, b, c = (int(x) for x in vals.split(","))
            except ValueError:
                raise ConfigError(f"per_dir_thresholds: {entry!r} is not DIR=max,forcibly,warning") from None
            if not sep or not path:
                raise ConfigError(f"per_dir_thresholds: {entry!r} is not DIR=max,forcibly,warning")
            for v, name in ((a, "disk_used_space_percent_max"), (b, "disk_space_clean_forcibly_percent"),
                            (c, "disk_space_warning_level_percent")):
                meta = _FIELDS_BY_NAME[name].metadata
                if not meta["min"] <= v <= meta["max"]:
                    raise ConfigError(f"per_dir_thresholds: {entry!r}: {v} is outside [{meta['min']}, "
                                      f"{meta['max']}], the bounds of {name}")
            b = min(b, c)
            out[os.path.normpath(path)] = (min(a, b), b, c)
        return out

    # Derived locations (the store root's layout: tidemq/layout.py) -----------
    @property
    def commitlog_paths(self) -> tuple[str, ...]:
        return self.commitlog_dirs or (layout.commitlog_dir(self.root_dir),)

    @property
    def consumequeue_path(self) -> str:
        return layout.consumequeue_dir(self.root_dir)

    @property
    def index_path(self) -> str:
        return layout.index_dir(self.root_dir)

    @property
    def config_path(self) -> str:
        return layout.config_dir(self.root_dir)

    @property
    def checkpoint_path(self) -> str:
        return layout.checkpoint_path(self.root_dir)

    @property
    def abort_path(self) -> str:
        return layout.abort_path(self.root_dir)

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == "SYNC_FLUSH"


@dataclass(frozen=True)
class BrokerConfig(_Loadable):
    """The broker (tidemq/broker/): its ports, consumers, delayed and transactional messages, the
    resource alarms and flow control (RabbitMQ's model), authentication and TLS, and a ``_max``
    on everything a client can make it hold or do per round."""

    SECTION: ClassVar[str] = "broker"
    RENAMED: ClassVar[Mapping[str, str]] = {
        "grpc_max_message_bytes": "grpc_message_bytes_max",
        "max_delivery_attempts": "delivery_attempts_max",
        "long_polling_max_s": "long_polling_s_max",
        "auto_renew_max_s": "auto_renew_s_max",
        "client_idle_max_s": "client_idle_s_max",
        "send_dedup_window": "send_dedup_window_entries",
        "timer_max_delay_s": "timer_delay_s_max",
        "send_hold_max_ms": "send_hold_ms_max",
        "alarm_check_interval_max_ms": "alarm_check_interval_ms_max",
        "alarm_check_interval_min_ms": "alarm_check_interval_ms_min",
    }
    RETIRED: ClassVar[Mapping[str, str]] = {
        "send_records_tag_cache_max": "SendRecords checks each message's tags in one pass; nothing is cached",
    }
    # auto-creation moved to [store] (one meaning, one default): read there, not here
    MOVED_OUT: ClassVar[frozenset[str]] = frozenset({"auto_create_topics", "default_queue_count"})

    host: str = _f("127.0.0.1", "address the gRPC server binds (loopback unless configured)")
    port: int = _f(8081, "gRPC port (0: any free port)", 0, 65535)
    metrics_port: int = _f(8082, "HTTP port of /metrics (Prometheus), /healthz, /readyz and the status page / "
                                 "(0: off)", 0, 65535)
    metrics_host: str = _f("127.0.0.1", "address the metrics port binds: loopback unless configured, whatever "
                                        "the gRPC host (the status page and /status.json show the store's paths "
                                        "and settings): off loopback it needs metrics_auth_token or "
                                        "metrics_auth_user, or metrics_allow_unauthenticated")
    metrics_auth_token: str = _f("", "bearer token /metrics, /status.json and the status page require "
                                     "(Authorization: Bearer TOKEN: Prometheus's `authorization` scrape option); "
                                     "/healthz and /readyz stay open", secret=True)
    metrics_auth_user: str = _f("", "user of HTTP basic authentication on the metrics port (with "
                                    "metrics_auth_password: Prometheus's `basic_auth`)")
    metrics_auth_password: str = _f("", "password of metrics_auth_user", secret=True)
    metrics_allow_unauthenticated: bool = _f(False, "serve the metrics port on a metrics_host off loopback without "
                                                    "a credential (refused at start otherwise)")
    metrics_rocketmq_aliases: bool = _f(True, "also serve RocketMQ 5's metric names for what tidemq counts the same "
                                              "way (rocketmq_messages_in_total, rocketmq_consumer_lag_messages, ...: "
                                              "docs/operating.md), so RocketMQ dashboards read a tidemq broker")
    metrics_connections_max: int = _f(64, "connections the metrics port keeps open at most (one more is closed at "
                                          "once)", 1, 100_000)
    metrics_idle_timeout_s: float = _f(30.0, "a metrics-port connection that sends nothing for this long is closed",
                                       0.1, 3_600.0)
    status_history_s: float = _f(6 * 3_600.0, "how far back the status page's disk chart reaches (one sample "
                                              "per status_sample_interval_s)", 60.0, 7 * 86_400.0)
    status_forecast_window_s: float = _f(1_800.0, "the status page's disk forecast is the trend of the samples of "
                                                "this window, with its uncertainty (the metric and the alerts use "
                                                "the store's one-minute pace)", 60.0, 7 * 86_400.0)
    status_sample_interval_s: float = _f(10.0, "how often disk usage and the rates are sampled for the status "
                                               "page and `tidemq status`", 0.1, 3_600.0)
    advertised_endpoint: str = _f("", "host:port given to clients in routes when they did not say how they reached us")
    broker_name: str = _f("tidemq", "broker name in routes")
    processes: int = _f(1, "broker processes `tidemq serve` runs on this machine (1: one, the default; N > 1: N "
                           "members, each its own store under <root>/p<i> and port port+i, one cluster to clients, "
                           "a topic's queues split among them: broker/multi/, bench/README.md 32.4)", 1, 64)
    grpc_message_bytes_max: int = _f(4 * MIB + 512 * KIB, "largest gRPC message accepted (max body + headroom)",
                                     64 * KIB, 256 * MIB)
    grpc_lookahead_bytes: int = _f(4 * MIB, "HTTP/2 flow-control window a stream may receive ahead "
                                   "(grpc.http2.lookahead_bytes): a large batch arrives without waiting for "
                                   "window updates (a do-nothing grpc.aio server: ~300 us less CPU per 256 KiB request)",
                                   64 * KIB, 256 * MIB)
    event_loop: str = _f("uvloop", "the event loop the broker runs on: uvloop (libuv's; the official client's "
                                   "one-message sends cost the broker ~40 us less CPU each, bench/README.md) or "
                                   "asyncio's own", choices=("uvloop", "asyncio"))
    send_executor_threads: int = _f(8, "threads that run the store puts that wait for followers (SYNC replication; "
                                    "SYNC_FLUSH puts await their fsync on the event loop)", 1, 256)
    malloc_keep_bytes: int = _f(128 * MIB, "freed memory glibc's malloc keeps for the next big buffer (a pull "
                                "answer and gRPC's copy of it: up to 16 MiB each) instead of mapping fresh "
                                "pages each time; it stays resident (0: glibc's defaults; broker/heap.py)",
                                0, 4096 * MIB)
    shutdown_grace_s: float = _f(5.0, "seconds in-flight RPCs get at shutdown", 0.0, 600.0)
    delivery_attempts_max: int = _f(16, "deliveries of a message before it goes to %DLQ%<group>, for a group "
                                        "without its own retry_max (`tidemq group create G --retry-max N`: N + 1); "
                                        "consumers are told max_attempts = this", 1, 1000)
    fifo_consumer_groups: tuple[str, ...] = _f((), "consumer groups that consume in order (RocketMQ's "
                                               "consumeMessageOrderly): a queue gives such a group its next "
                                               "message only once the ones handed out are acked or dead-lettered; "
                                               "the default for groups without their own setting (`tidemq group "
                                               "create G --orderly/--not-orderly` wins); 'a,b'")
    invisible_duration_default_s: float = _f(30.0, "invisible time of a pop that gives none", 1.0, 43_200.0)
    auto_renew_ahead_s: float = _f(10.0, "a message received with auto_renew (the push consumers) is renewed this "
                                         "long before its invisible time ends, while its client is alive (the "
                                         "RocketMQ proxy's renewAheadTimeMillis); kept under auto_renew_step_s",
                                   0.05, 3_600.0)
    auto_renew_step_s: float = _f(60.0, "invisible time one renewal gives, from now", 0.1, 43_200.0)
    auto_renew_s_max: float = _f(3 * 3_600.0, "renewal of a message stops this long after it was received; its "
                                              "invisible time then runs out and it is delivered again (the proxy's "
                                              "renewMaxTimeMillis)", 1.0, 7 * 86_400.0)
    auto_renew_check_interval_ms: int = _f(1_000, "how often auto-renewed messages are looked at (renewed, or "
                                                  "released when their client is gone)", 10, 60_000)
    client_idle_s_max: float = _f(30.0, "a client with no Telemetry stream open that sent no heartbeat or receive "
                                        "for this long is gone (the official clients heartbeat every 10 s)",
                                  1.0, 3_600.0)
    receive_batch_max: int = _f(256, "messages one ReceiveMessage returns at most", 1, 10_000)
    long_polling_s_max: float = _f(30.0, "longest a ReceiveMessage or PullMessage waits for messages", 0.0, 600.0)
    send_dedup_window_entries: int = _f(100_000, "recent (topic, message id) pairs a resent message is recognised by "
                                "(at least this many, at most twice; 0: off)",
                                0, 10_000_000)
    send_dedup_after_restart_s: float = _f(300.0, "for this long after a start, a message id the in-memory window "
                                                  "does not know is looked up in the store's index (sends stored "
                                                  "this long before the start count): a retry across a restart or "
                                                  "kill -9 is answered, not stored twice; 0: off", 0.0, 86_400.0)
    transaction_check_interval_s: float = _f(30.0, "a half message undecided this long (since stored or last checked) "
                                                   "is checked with a producer over Telemetry", 0.05, 86_400.0)
    transaction_check_max: int = _f(15, "orphan checks of a half message before it is discarded "
                                        "(RocketMQ transactionCheckMax)", 1, 1000)
    transaction_undecided_max: int = _f(100_000, "undecided half messages held at most; a TRANSACTION send beyond "
                                                 "is refused (TOO_MANY_REQUESTS)", 1, 10_000_000)
    timer_delay_s_max: float = _f(3 * 86_400.0, "furthest delivery time of a DELAY message from now (RocketMQ "
                                                "timerMaxDelaySec); keep it under the store's retention",
                                  1.0, 365 * 86_400.0)
    timer_pending_max: int = _f(1_000_000, "delayed messages waiting at most (~100 bytes of memory each); a DELAY "
                                           "send beyond is refused (TOO_MANY_REQUESTS)", 1, 100_000_000)
    transaction_recovery_s_max: float = _f(86_400.0, "longest orphaned_transaction_recovery_duration a TRANSACTION "
                                                     "message may ask for (its first orphan check); a longer one "
                                                     "waits this long", 1.0, 30 * 86_400.0)
    # Lite topics (RIP-83) and priority messages
    lite_topic_bytes_max: int = _f(64, "longest lite topic name (ILLEGAL_LITE_TOPIC beyond; Telemetry's "
                                       "max_lite_topic_size)", 1, 127)
    lite_subscriptions_per_client_max: int = _f(1000, "lite topics one lite consumer may subscribe "
                                                      "(LITE_SUBSCRIPTION_QUOTA_EXCEEDED beyond; Telemetry's "
                                                      "lite_subscription_quota)", 1, 100_000)
    priority_window_messages: int = _f(256, "new messages of a queue a receive looks at to hand out the higher "
                                            "priorities first (a topic with PRIORITY messages; FIFO groups "
                                            "excepted)", 1, 65_536)

    # Resource alarms (RabbitMQ's model): sends are held, then refused; receives, pulls, acks go on
    memory_high_watermark_ratio: float = _f(0.4, "memory alarm when the broker's resident memory (anonymous: mapped "
                                                 "commit-log pages excluded) passes this fraction of RAM (or of "
                                                 "the cgroup's limit)", 0.01, 0.95)
    memory_high_watermark_bytes: int = _f(0, "memory alarm limit in bytes of resident memory; > 0 replaces "
                                             "memory_high_watermark_ratio", 0, 1 << 50)
    disk_free_limit_bytes: int = _f(0, "disk alarm when free space under a store directory falls under this; 0: two "
                                       "commit-log segments (2 GiB with the default segment_size_bytes; RabbitMQ's "
                                       "50 MB would not hold the next segment)", 0, 1 << 50)
    alarm_check_interval_ms_max: int = _f(10_000, "longest time between two alarm checks, far from the limits "
                                                  "(nearer them the checks come more often, down to "
                                                  "alarm_check_interval_ms_min)",
                                          10, 600_000)
    alarm_check_interval_ms_min: int = _f(100, "shortest time between two alarm checks, at the limits",
                                          10, 600_000)
    quota_throttle_ms_max: int = _f(30_000, "longest a send or fetch over its quota (`tidemq quota set`) is delayed "
                                            "before its answer; one whose debt would take longer is refused "
                                            "TOO_MANY_REQUESTS (Kafka's quota throttling)", 0, 600_000)
    send_hold_ms_max: int = _f(2_000, "longest a send waits on an alarm or the flush backlog before it is refused "
                                      "with TOO_MANY_REQUESTS (never past its deadline minus 0.25 s)", 0, 60_000)
    log_level: str = _f("", "level of the broker's own log (tidemq.*): DEBUG, INFO, WARNING, ERROR; empty: as the "
                            "command says (WARNING, INFO with -v); changes at run time (`tidemq config set`)",
                        choices=("", "DEBUG", "INFO", "WARNING", "ERROR"))
    # Flow control
    flush_backlog_high_bytes: int = _f(256 * MIB, "sends are held while more commit-log bytes than this are written "
                                                  "but not yet flushed (ASYNC_FLUSH; dispatch is inline and cannot "
                                                  "lag)", 4 * KIB, 1 << 50)
    inflight_requests_per_connection_max: int = _f(256, "sends in flight on one connection; more: TOO_MANY_REQUESTS",
                                                   1, 1_000_000)
    inflight_bytes_per_connection_max: int = _f(64 * MIB, "message body bytes in flight on one connection; more: "
                                                          "TOO_MANY_REQUESTS", 1, 1 << 40)
    # Authentication and TLS
    access_key: str = _f("", "access key; with secret_key set, every call must carry a valid MQv2-HMAC-SHA1 "
                             "signature (else UNAUTHORIZED)")
    secret_key: str = _f("", "secret key the clients sign x-mq-date-time with (give it through TIDEMQ_SECRET_KEY "
                             "or a TOML file only the broker reads)", secret=True)
    signature_window_s: float = _f(900.0, "a signed request's x-mq-date-time must be this close to the broker's "
                                          "clock, read as UTC or as local time (the Python client's); older is "
                                          "refused as a replay", 1.0, 7 * 86_400.0)
    tls_cert_file: str = _f("", "PEM certificate (chain): with tls_key_file, the port speaks TLS only")
    tls_key_file: str = _f("", "PEM private key of tls_cert_file")
    tls_ca_file: str = _f("", "PEM of the CA(s) that signed the group's certificates: what a member trusts when it "
                              "connects to another (replication, the leader port's forwarding); empty: "
                              "tls_cert_file itself (one self-signed certificate for the whole group)")
    tls_client_ca_file: str = _f("", "PEM of the CA(s) whose client certificates the ports require: a client "
                                     "without one signed by them is refused at the TLS handshake (members show "
                                     "their tls_cert_file); empty: no client certificate asked for")

    # Bounds on what clients can make the broker remember or do per round
    clients_max: int = _f(10_000, "client ids whose liveness is remembered at most (oldest idle forgotten first)",
                          16, 10_000_000)
    telemetry_outbox_max: int = _f(1_024, "commands queued for one Telemetry stream at most", 16, 1_000_000)
    telemetry_known_clients_max: int = _f(10_000, "client ids whose Telemetry settings are remembered at most",
                                          16, 10_000_000)
    state_journal_compact_bytes: int = _f(16 * MIB, "a broker state journal (pop state, transactions) larger than "
                                                    "this is compacted into its snapshot", 64 * KIB, 1 << 40)
    timer_round_messages_max: int = _f(1_024, "DELAY messages read or moved per timer round at most", 1, 1_000_000)
    transaction_scan_max: int = _f(1_024, "half messages read per transaction-check round at most", 1, 1_000_000)
    transaction_checks_per_round_max: int = _f(256, "orphan checks sent per round at most", 1, 1_000_000)
    pull_message_bytes_max: int = _f(64 * MIB, "message bytes one PullMessage answers at most", 64 * KIB, 1 << 40)
    pull_records_bytes_max: int = _f(64 * MIB, "record bytes one PullRecords answers at most", 64 * KIB, 1 << 40)
    query_messages_max: int = _f(64, "messages one admin Query answers at most (asking for more: LIMIT_EXCEEDED)",
                                 1, 10_000)
    ack_entries_max: int = _f(1_024, "receipt handles one AckMessage may carry (the official clients send one); "
                                     "more: PAYLOAD_TOO_LARGE, nothing acked", 1, 1_000_000)
    invisible_duration_s_max: float = _f(43_200.0, "longest invisible time a ReceiveMessage or "
                                                   "ChangeInvisibleDuration may ask for (the RocketMQ proxy's 12 h); "
                                                   "more, or none > 0: ILLEGAL_INVISIBLE_TIME", 1.0, 7 * 86_400.0)

    def __post_init__(self) -> None:
        self._check()
        if self.auto_renew_ahead_s >= self.auto_renew_step_s:
            ahead = self.auto_renew_step_s / 2
            log.warning("config auto_renew_ahead_s=%r is not under auto_renew_step_s=%r (every check would renew); "
                        "using %r", self.auto_renew_ahead_s, self.auto_renew_step_s, ahead)
            object.__setattr__(self, "auto_renew_ahead_s", ahead)
        if bool(self.access_key) != bool(self.secret_key):
            raise ConfigError("access_key and secret_key go together: set both (authentication) or neither")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ConfigError("tls_cert_file and tls_key_file go together: set both (TLS) or neither")
        if (self.tls_ca_file or self.tls_client_ca_file) and not self.tls_cert_file:
            raise ConfigError("tls_ca_file / tls_client_ca_file need TLS on (tls_cert_file and tls_key_file)")
        if bool(self.metrics_auth_user) != bool(self.metrics_auth_password):
            raise ConfigError("metrics_auth_user and metrics_auth_password go together: set both or neither")
        if self.metrics_port and not is_loopback(self.metrics_host) and not self.metrics_auth_required \
                and not self.metrics_allow_unauthenticated:
            raise ConfigError(f"metrics_host {self.metrics_host!r} is not loopback and the metrics port has no "
                              f"credential: set metrics_auth_token (or metrics_auth_user / metrics_auth_password), "
                              f"or metrics_allow_unauthenticated = true to serve it open")

    @property
    def metrics_auth_required(self) -> bool:
        return bool(self.metrics_auth_token or self.metrics_auth_user)

    @property
    def auth_enabled(self) -> bool:
        return bool(self.access_key)

    @property
    def tls_enabled(self) -> bool:
        return bool(self.tls_cert_file)


@dataclass(frozen=True)
class ReplicationConfig(_Loadable):
    """A broker group: one leader and its followers, each a `tidemq serve` with its own store root
    (RocketMQ's HA model; tidemq/broker/replication/). The default (no ``broker_group``) is the
    embedded set-up: one broker, no replication, no coordinator."""

    SECTION: ClassVar[str] = "replication"
    RETIRED: ClassVar[Mapping[str, str]] = {
        "in_sync_lag_bytes_max": "a follower is in sync by time now (replica_lag_time_max_ms), not by bytes behind",
    }

    broker_group: str = _f("", "name of this broker's group (empty: no group, no replication: one broker)")
    broker_id: str = _f("", "this broker's name within its group (empty: its endpoint host:port)")
    broker_role: str = _f("leader", "static role without a coordinator: 'leader' or 'follower' (--role); with "
                                    "a coordinator the role is elected", choices=("leader", "follower"))
    leader_endpoint: str = _f("", "HOST:PORT of the leader a static follower replicates from (--leader)")
    replication_mode: str = _f("ASYNC", "SYNC: a put is acknowledged once every follower of the in-sync set has "
                                        "it (on disk where they run SYNC_FLUSH), and consumers are served only what "
                                        "they all have (the high watermark); ASYNC: after the local write, the lag "
                                        "reported (a failover may take back what the new leader had not copied, "
                                        "and a consumer may have read it)", choices=("ASYNC", "SYNC"))
    in_sync_replicas_min: int = _f(1, "SYNC: the in-sync set must hold at least this many followers: fewer, a put "
                                      "is refused before anything is written with HA_NOT_AVAILABLE (the store's "
                                      "SLAVE_NOT_AVAILABLE); a put that waited while the set shrank below it is "
                                      "answered as timed out (appended: its resend is not stored twice)", 1, 16)
    replication_timeout_ms: int = _f(3_000, "SYNC: a put the in-sync set has not confirmed by then answers "
                                            "SLAVE_PERSISTENCE_TIMEOUT (the store's FLUSH_SLAVE_TIMEOUT; it stays "
                                            "in the log, and its resend is not stored twice)", 1, 600_000)
    replica_lag_time_max_ms: int = _f(2_000, "a follower of the in-sync set that has not been caught up (had "
                                             "everything the leader had at some moment) for this long is dropped "
                                             "from the set (from the coordinator's record first, then SYNC puts go "
                                             "on without it); one caught up within it comes back (Kafka's "
                                             "replica.lag.time.max.ms). Keep it below replication_timeout_ms so a "
                                             "stopped follower costs SYNC puts a wait, not a timeout", 50, 600_000)
    replication_frame_bytes_max: int = _f(1 * MIB, "commit-log bytes one replication frame carries at most "
                                                   "(whole records; a larger record goes alone)", 4 * KIB, 64 * MIB)
    replication_state_interval_ms: int = _f(1_000, "how often a follower copies the leader's broker state "
                                                   "(topics, consumer offsets, pop state, timer, transactions)",
                                            10, 600_000)
    replication_retry_ms: int = _f(200, "a follower that lost its leader connects again after this", 10, 60_000)
    leader_port: int = _f(0, "port served only while this broker leads its group: the group's write endpoint "
                             "(official clients list every member's; gRPC's pick_first finds the leader); 0: none",
                          0, 65535)
    coordinator: str = _f("", "ZooKeeper for automatic failover, '[digest:USER@]HOST:PORT[,HOST:PORT...][/chroot]' "
                              "(empty: static roles, `tidemq replication promote` by hand; chroot default "
                              "/tidemq; USER: ZooKeeper digest authentication, with coordinator_password)")
    coordinator_password: str = _f("", "password of the coordinator's digest USER (never in `coordinator` itself)",
                                   secret=True)
    coordinator_session_timeout_ms: int = _f(6_000, "ZooKeeper session timeout: a leader silent this long loses "
                                                    "its lease (within the server's min/max session timeout, 2 and "
                                                    "20 ticks by default: the server may not grant less)",
                                             400, 600_000)
    leader_lease_ratio: float = _f(0.5, "a leader acknowledges writes only until its last confirmed coordinator "
                                        "request plus this fraction of coordinator_session_timeout_ms (checked on "
                                        "every write, ASYNC too): below 1, so that it stops before its session can "
                                        "expire and another member be elected; the rest is the margin for the "
                                        "clocks' rates and a write's time between its check and its answer",
                                   0.1, 0.9)
    leader_port_forward_timeout_ms: int = _f(3_000, "a call a following member forwards to its leader through the "
                                                    "leader port gets at most this long (or the client's deadline), "
                                                    "then UNAVAILABLE, which the clients retry: a stopped leader "
                                                    "costs them this, not their whole deadline", 100, 600_000)
    election_wait_ms: int = _f(1_000, "after the leader's lease is gone, how long the members post their log "
                                      "ends before the most up-to-date one takes the lease", 0, 600_000)

    def __post_init__(self) -> None:
        self._check()
        if not self.broker_group:
            alone = [f"{k} ({flag})" for k, flag, v in (
                ("broker_role follower", "--role", self.broker_role == "follower"),
                ("leader_endpoint", "--leader", self.leader_endpoint), ("leader_port", "--leader-port", self.leader_port),
                ("coordinator", "--coordinator", self.coordinator)) if v]
            if alone:
                raise ConfigError(f"{', '.join(alone)} only mean something in a broker group: give broker_group "
                                  f"(--group NAME), or leave them out for one broker without replication")
        if self.coordinator:
            from .broker.replication.zk_address import AddressError, parse
            try:
                addr = parse(self.coordinator)
            except AddressError as e:
                raise ConfigError(str(e)) from None
            if addr.user and not self.coordinator_password:
                raise ConfigError(f"coordinator user {addr.user!r} needs coordinator_password "
                                  "(TIDEMQ_COORDINATOR_PASSWORD, or the config file)")
        if self.broker_group and not self.coordinator and self.broker_role == "follower" \
                and not self.leader_endpoint:
            raise ConfigError("broker_role follower without a coordinator needs leader_endpoint (--leader HOST:PORT)")

    @property
    def enabled(self) -> bool:
        return bool(self.broker_group)

    @property
    def sync(self) -> bool:
        return self.replication_mode == "SYNC"


@dataclass(frozen=True)
class ClientConfig(_Loadable):
    """A client of a running broker: the `tidemq` commands that talk to one (``--endpoint``) and
    tidemq.client (``tidemq.client.settings``). Read from ``~/.config/tidemq/client.toml`` (or
    ``$XDG_CONFIG_HOME/tidemq/client.toml``), then the ``[client]`` table of ``--config FILE``, then
    ``TIDEMQ_CLIENT_*``, then the commands' flags (``--access-key``, ``--secret-key``, ``--tls``,
    ``--ca-file``). Never the broker's private key: a client trusts a CA (``ca_file``), and proves who
    it is with its keys (and, where the broker requires one, its own certificate)."""

    SECTION: ClassVar[str] = "client"
    ENV_INFIX: ClassVar[str] = "CLIENT_"

    access_key: str = _f("", "access key every call is signed with (a user of the broker: `tidemq user create`); "
                             "empty: unsigned (the commands then use the broker's own access_key / secret_key "
                             "when those are set, as on the broker's host)")
    secret_key: str = _f("", "secret key of access_key (keep it in a file only you read, or in "
                             "TIDEMQ_CLIENT_SECRET_KEY)", secret=True)
    tls: bool = _f(False, "speak TLS to the broker (one with tls_cert_file); the certificate is checked against "
                          "ca_file, else the system's roots")
    ca_file: str = _f("", "PEM file of the CA(s) that signed the brokers' certificates (implies tls)")
    cert_file: str = _f("", "PEM certificate (chain) this client shows a broker that requires one "
                            "(tls_client_ca_file); with key_file")
    key_file: str = _f("", "PEM private key of cert_file (this client's own key, never the broker's)")
    tls_server_name: str = _f("", "the name the broker's certificate must carry, when it is not the endpoint's "
                                  "host (a certificate without an IP SAN reached by its address)")

    def __post_init__(self) -> None:
        self._check()
        if bool(self.access_key) != bool(self.secret_key):
            raise ConfigError("client access_key and secret_key go together: set both (signed calls) or neither")
        if bool(self.cert_file) != bool(self.key_file):
            raise ConfigError("client cert_file and key_file go together: set both or neither")

    @property
    def tls_enabled(self) -> bool:
        return self.tls or bool(self.ca_file) or bool(self.cert_file)


for _c in (StoreConfig, BrokerConfig, ReplicationConfig, ClientConfig):
    SECTIONS[_c.SECTION] = _c
_FIELDS_BY_NAME = {f.name: f for f in fields(StoreConfig)}
