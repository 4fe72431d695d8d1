"""The loading and checking every component's settings share (the classes: store.py, broker.py,
replication.py, client.py; the package's docstring says the rules).

``setting(default, doc, lo, hi, choices, secret)`` declares a field with its doc string and bounds (the
component modules call it ``_f``); ``Loadable`` loads a class from its sources, weakest first
(defaults, a base, a TOML file, ``TIDEMQ_*``, overrides) and checks it.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import tomllib
import warnings
from dataclasses import field, fields
from typing import Any, ClassVar, Mapping

log = logging.getLogger("tidemq.config")

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

ENV_PREFIX = "TIDEMQ_"
# TIDEMQ_* variables that are not settings of a config class (command options' twins, benchmarks)
ENV_NOT_SETTINGS = frozenset({"TIDEMQ_CONFIG", "TIDEMQ_ENDPOINT", "TIDEMQ_BENCH_SRC", "TIDEMQ_BENCH_RESULTS",
                              "TIDEMQ_ACCEL", "TIDEMQ_TEST_WORKERS"})
SECTIONS: dict[str, type] = {}       # TOML section -> config class (filled by tidemq.config)


def accel_wanted(env: Mapping[str, str] | None = None) -> bool:
    """TIDEMQ_ACCEL: "0" runs the pure-Python record loops even where the compiled ones
    (tidemq._accel) are built (tidemq/accel.py; CI runs the suite both ways); anything else, or
    unset, uses the compiled ones when they are there. Read once, at import of tidemq.accel."""
    v = (os.environ if env is None else env).get("TIDEMQ_ACCEL", "1").strip().lower()
    return v not in ("0", "false", "no", "off")


def setting(default: Any, doc: str, lo: float | None = None, hi: float | None = None,
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


def coerce(name: str, typ: Any, value: Any) -> Any:
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


class Loadable:
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
        values: dict[str, Any] = {k: coerce(k, known[k].type, v) for k, v in (base or {}).items() if k in known}
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
                values[name] = coerce(name, known[name].type, _old_ratio(k, name, v))
        env = os.environ if env is None else env
        check_env(env)
        for old, new in cls.RENAMED.items():
            ev = env.get(cls.env_var(old))
            if ev is not None and cls.env_var(new) not in env:
                cls._renamed(old, cls.env_var(old))
                values[new] = coerce(new, known[new].type, _old_ratio(old, new, ev))
        for k, f in known.items():
            ev = env.get(cls.env_var(k))
            if ev is not None:
                values[k] = coerce(k, f.type, ev)
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
        return dataclasses.replace(self, **{name: coerce(name, known[name].type, value)})  # type: ignore[type-var]

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
