"""Consumer-group settings as values (RocketMQ's SubscriptionGroupConfig): a group's retry
policy, its retry_max, whether it consumes in order, whether it may consume; how they are written
in a document and parsed from the CLI's text. Shared by the broker (which keeps them:
broker/consume/groups.py, where the rules and the file are described) and the CLI (which parses
``--retry-policy``): no I/O here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

GROUPS_FILE = "groups.json"
VERSION = 1
RETRY_MAX_MAX = 1000            # RocketMQ caps nothing; 1000 retries is far past any use
DELAY_MS_MAX = 24 * 3600 * 1000
DELAYS_MAX = 64                 # entries of a customized policy
MULTIPLIER_MAX = 100.0
GROUPS_MAX = 100_000
DEFAULT_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
NAME_RE = re.compile(r"[%|a-zA-Z0-9_-]{1,255}")


@dataclass(frozen=True)
class RetryPolicy:
    kind: str                          # "exponential" | "customized"
    initial_ms: int = 0
    max_ms: int = 0
    multiplier: float = 0.0
    delays_ms: tuple[int, ...] = ()

    def document(self) -> dict:
        if self.kind == "exponential":
            return {"kind": "exponential", "initial_ms": self.initial_ms, "max_ms": self.max_ms,
                    "multiplier": self.multiplier}
        return {"kind": "customized", "delays_ms": list(self.delays_ms)}

    def text(self) -> str:
        if self.kind == "exponential":
            return f"exponential:{self.initial_ms},{self.max_ms},{self.multiplier:g}"
        return "customized:" + ",".join(_ms_text(d) for d in self.delays_ms)

    @staticmethod
    def from_doc(d) -> "RetryPolicy":
        if not isinstance(d, dict):
            raise ValueError("retry_policy is an object")
        if d.get("kind") == "exponential":
            return exponential(_int(d.get("initial_ms"), "initial_ms", 1, DELAY_MS_MAX),
                               _int(d.get("max_ms"), "max_ms", 1, DELAY_MS_MAX), d.get("multiplier"))
        if d.get("kind") == "customized":
            ds = d.get("delays_ms")
            if not isinstance(ds, list):
                raise ValueError("delays_ms is a list")
            return customized([_int(x, "a delay", 1, DELAY_MS_MAX) for x in ds])
        raise ValueError("retry_policy kind is exponential or customized")


def exponential(initial_ms: int, max_ms: int, multiplier) -> RetryPolicy:
    if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) or not math.isfinite(multiplier) \
            or not 1.0 <= multiplier <= MULTIPLIER_MAX:
        raise ValueError(f"multiplier is a number in [1, {MULTIPLIER_MAX:g}]")
    if max_ms < initial_ms:
        raise ValueError(f"max ({max_ms} ms) is below initial ({initial_ms} ms)")
    return RetryPolicy("exponential", initial_ms, max_ms, float(multiplier))


def customized(delays_ms) -> RetryPolicy:
    """One delay per retry (the last one repeated), in whole seconds: the Python client reads only a
    Duration's seconds (a 500 ms delay would be 0 to it)."""
    delays = tuple(delays_ms)
    if not 1 <= len(delays) <= DELAYS_MAX:
        raise ValueError(f"a customized policy has 1 to {DELAYS_MAX} delays")
    if any(d % 1000 for d in delays):
        raise ValueError("a customized policy's delays are whole seconds (the clients read only seconds)")
    return RetryPolicy("customized", delays_ms=delays)


DEFAULT_POLICY = customized(s * 1000 for s in DEFAULT_BACKOFF_S)

_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)?")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, None: 1}


def _ms_text(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _duration_ms(text: str, default_unit: str | None) -> int:
    m = _DURATION.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a duration (500ms, 5s, 2m, 1h)")
    ms = round(float(m.group(1)) * _UNIT_MS[m.group(2) or default_unit])
    if not 1 <= ms <= DELAY_MS_MAX:
        raise ValueError(f"{text!r}: a delay is from 1 ms to 24 h")
    return ms


def parse_policy(text: str) -> RetryPolicy:
    """``exponential:INITIAL_MS,MAX_MS,MULTIPLIER`` or ``customized:1s,5s,...`` (the CLI's form);
    ValueError when it is neither."""
    kind, _, rest = text.partition(":")
    parts = [p for p in rest.split(",") if p.strip()]
    if kind == "exponential":
        if len(parts) != 3:
            raise ValueError("exponential:INITIAL_MS,MAX_MS,MULTIPLIER (three values)")
        try:
            multiplier = float(parts[2])
        except ValueError:
            raise ValueError(f"{parts[2]!r} is not a multiplier") from None
        return exponential(_duration_ms(parts[0], "ms"), _duration_ms(parts[1], "ms"), multiplier)
    if kind == "customized":
        return customized([_duration_ms(p, "s") for p in parts])
    raise ValueError("a retry policy is exponential:INITIAL_MS,MAX_MS,MULTIPLIER or customized:1s,5s,...")


def _int(v, what: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{what} is an integer in [{lo}, {hi}]")
    return v


@dataclass(frozen=True)
class GroupSettings:
    retry_max: int
    retry_policy: RetryPolicy
    orderly: bool
    consume_enable: bool

    @property
    def attempts_max(self) -> int:
        """Deliveries before the dead-letter queue: retry_max + 1."""
        return self.retry_max + 1

    def document(self) -> dict:
        return {"retry_max": self.retry_max, "retry_policy": self.retry_policy.document(), "orderly": self.orderly,
                "consume_enable": self.consume_enable}

    @staticmethod
    def from_doc(d) -> "GroupSettings":
        if not isinstance(d, dict):
            raise ValueError("a group's settings are an object")
        for k in ("orderly", "consume_enable"):
            if not isinstance(d.get(k), bool):
                raise ValueError(f"{k} is true or false")
        return GroupSettings(_int(d.get("retry_max"), "retry_max", 0, RETRY_MAX_MAX),
                             RetryPolicy.from_doc(d.get("retry_policy")), d["orderly"], d["consume_enable"])


def check_name(name) -> str:
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
        raise ValueError(f"{name!r} is not a group name ({NAME_RE.pattern})")
    return name


def changes_of(req: dict) -> dict:
    """The settings a CreateGroup / UpdateGroup request gives (fields of GroupSettings, checked);
    ValueError when one is not valid."""
    out: dict = {}
    if "retry_max" in req:
        out["retry_max"] = _int(req["retry_max"], "retry_max", 0, RETRY_MAX_MAX)
    if "retry_policy" in req:
        p = req["retry_policy"]
        out["retry_policy"] = parse_policy(p) if isinstance(p, str) else RetryPolicy.from_doc(p)
    for k in ("orderly", "consume_enable"):
        if k in req:
            if not isinstance(req[k], bool):
                raise ValueError(f"{k} is true or false")
            out[k] = req[k]
    return out


def load_doc(doc) -> dict[str, GroupSettings]:
    """The groups of a document (ValueError when it is not one)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("groups"), dict):
        raise ValueError("a groups document is {version, groups: {...}}")
    if len(doc["groups"]) > GROUPS_MAX:
        raise ValueError(f"more than {GROUPS_MAX} groups")
    return {check_name(n): GroupSettings.from_doc(s) for n, s in doc["groups"].items()}
