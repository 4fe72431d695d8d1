"""Byte-rate quotas per user, client id or topic, Kafka's way (`tidemq quota set`).

A quota gives an entity (``user:NAME``, ``client:ID``, ``topic:NAME``) a produce and/or a fetch rate
in bytes per second. Each entity with a quota has a token bucket per direction holding at most one
second of its rate; a request takes its bytes out of every bucket that applies to it (its user, its
client id, its topics). Kafka's behaviour follows from the bucket's debt:

- no debt: answered at once;
- in debt by D bytes at rate R: the answer is **delayed** D / R seconds (the client slows down, as a
  Kafka client does with throttle_time_ms; nothing is refused);
- a debt that would take longer than ``quota_throttle_ms_max`` (a [broker] setting) to pay: the
  request is **refused** TOO_MANY_REQUESTS before anything is done, and its bytes are not taken.

A fetch is checked before the read (refused when its buckets are already past the bound) and charged
after it with what it read (the answer is delayed by the debt that made). One place per direction:
SendPath's gate step for produce (produce/send_path.py), ``Quotas.fetch_admit`` / ``fetch_charge``
on the read paths (PullMessage, ReceiveMessage, PullRecords).

The quotas themselves are in the broker state (``broker/quotas.json``), copied to followers with the
rest of it (replication/state.py), changed without a restart. Metrics per entity: bytes throttled and
the time they were delayed, requests refused (observe/metrics.py: tidemq_quota_*).
"""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass, field

from ... import checked
from ...io import Clock, FileIO

KINDS = ("user", "client", "topic")
DIRECTIONS = ("produce", "fetch")
QUOTAS_FILE = "quotas.json"
RATE_MAX = 1 << 50
ENTITIES_MAX = 100_000


class QuotaError(ValueError):
    pass


def entity(kind: str, name: str) -> str:
    if kind not in KINDS:
        raise QuotaError(f"a quota is for one of {', '.join(KINDS)}")
    if not isinstance(name, str) or not name or len(name) > 255:
        raise QuotaError(f"{kind} is a non-empty name of at most 255 characters")
    return f"{kind}:{name}"


@dataclass
class Bucket:
    rate: float                      # bytes per second
    tokens: float
    at_s: float


@dataclass
class EntityStats:
    throttled_total: int = 0         # requests delayed
    throttled_seconds_total: float = 0.0
    refused_total: int = 0
    bytes_total: int = 0


@dataclass
class Verdict:
    """What a quota check says: delay the answer ``delay_s`` seconds, or refuse (``refused``: the text)."""
    delay_s: float = 0.0
    refused: str | None = None
    entities: list[str] = field(default_factory=list)


class Quotas:
    def __init__(self, fio: FileIO | None, state_dir: str | None, clock: Clock, throttle_s_max: float) -> None:
        self.fio = fio
        self.path = os.path.join(state_dir, QUOTAS_FILE) if state_dir else None
        self.clock = clock
        self.throttle_s_max = throttle_s_max
        self.limits: dict[str, dict[str, int]] = {}       # entity -> {direction: bytes per second}
        self._buckets: dict[tuple[str, str], Bucket] = {}
        self.stats: dict[tuple[str, str], EntityStats] = {}
        self._lock = threading.Lock()

    # the table --------------------------------------------------------------------------------------
    def load(self) -> None:
        if self.fio is None or self.path is None:
            return
        got = checked.load(self.fio, self.path, "quotas", lambda doc: Quotas(None, None, self.clock, 1).replace(doc))
        if got.doc is not None:
            self.replace(got.doc)

    def document(self) -> dict:
        with self._lock:
            return {e: dict(d) for e, d in sorted(self.limits.items())}

    def replace(self, doc: dict) -> None:
        """The whole table (a follower copying its leader's); ValueError when ``doc`` is not one."""
        limits = {}
        for e, d in (doc or {}).items():
            kind, _, name = str(e).partition(":")
            entity(kind, name)
            limits[e] = {k: _rate(k, v) for k, v in d.items()}
        with self._lock:
            self.limits = limits
            self._buckets = {k: b for k, b in self._buckets.items() if limits.get(k[0], {}).get(k[1]) == b.rate}

    def set(self, kind: str, name: str, produce: int | None, fetch: int | None) -> dict:
        """Set (an int) or remove (0) an entity's rates; None leaves one as it is. Saved before it
        returns. The entity's quota as it is now ({} : none)."""
        e = entity(kind, name)
        with self._lock:
            if e not in self.limits and len(self.limits) >= ENTITIES_MAX:
                raise QuotaError(f"at most {ENTITIES_MAX} entities have quotas")
            was = dict(self.limits.get(e, {}))
            now = dict(was)
            for d, v in (("produce", produce), ("fetch", fetch)):
                if v is None:
                    continue
                v = _rate(d, v)
                if v == 0:
                    now.pop(d, None)
                else:
                    now[d] = v
            if now:
                self.limits[e] = now
            else:
                self.limits.pop(e, None)
            for d in DIRECTIONS:
                self._buckets.pop((e, d), None)
        try:
            self.save()
        except OSError:
            with self._lock:
                if was:
                    self.limits[e] = was
                else:
                    self.limits.pop(e, None)
            raise
        return now

    def save(self) -> None:
        if self.fio is not None and self.path is not None:
            self.fio.makedirs(os.path.dirname(self.path))
            checked.write(self.fio, self.path, self.document())

    # enforcement ------------------------------------------------------------------------------------
    def applying(self, direction: str, user: str | None, client_id: str | None, topics) -> list[str]:
        if not self.limits:
            return []
        cands = [f"topic:{t}" for t in topics]
        if user:
            cands.append(f"user:{user}")
        if client_id:           # as the client sent it (not the user<TAB>id the broker keys it by)
            cands.append(f"client:{client_id.rpartition(chr(9))[2]}")
        return [e for e in cands if direction in self.limits.get(e, ())]

    def _bucket(self, e: str, direction: str, now: float) -> Bucket:
        rate = self.limits[e][direction]
        b = self._buckets.get((e, direction))
        if b is None or b.rate != rate:
            b = self._buckets[(e, direction)] = Bucket(rate, rate, now)
        b.tokens = min(b.rate, b.tokens + (now - b.at_s) * b.rate)      # at most one second's worth
        b.at_s = now
        return b

    def _stats(self, e: str, direction: str) -> EntityStats:
        s = self.stats.get((e, direction))
        if s is None:
            s = self.stats[(e, direction)] = EntityStats()
        return s

    def admit(self, direction: str, entities: list[str]) -> str | None:
        """Refuse (the text) when a bucket of ``entities`` is already in debt past throttle_s_max."""
        if not entities:
            return None
        now = self.clock.monotonic_s()
        with self._lock:
            for e in entities:
                if direction not in self.limits.get(e, ()):
                    continue
                b = self._bucket(e, direction, now)
                if -b.tokens / b.rate > self.throttle_s_max:
                    self._stats(e, direction).refused_total += 1
                    return (f"quota: {e} is over its {direction} rate of {b.rate} bytes/s (a debt of "
                            f"{-b.tokens / b.rate:.1f} s, more than quota_throttle_ms_max)")
        return None

    def charge(self, direction: str, entities: list[str], nbytes: int, refuse: bool) -> Verdict:
        """Take ``nbytes`` out of the buckets: the delay to answer after (the longest debt), or, with
        ``refuse``, a refusal (nothing taken) when the debt would pass throttle_s_max."""
        v = Verdict(entities=entities)
        if not entities or nbytes <= 0:
            return v
        now = self.clock.monotonic_s()
        with self._lock:
            bs = [(e, self._bucket(e, direction, now)) for e in entities if direction in self.limits.get(e, ())]
            for e, b in bs:
                debt_s = (nbytes - b.tokens) / b.rate
                if refuse and debt_s > self.throttle_s_max:
                    self._stats(e, direction).refused_total += 1
                    v.refused = (f"quota: {e} is over its {direction} rate of {b.rate} bytes/s ({nbytes} bytes "
                                 f"would wait {debt_s:.1f} s, more than quota_throttle_ms_max)")
                    return v
            for e, b in bs:
                b.tokens -= nbytes
                s = self._stats(e, direction)
                s.bytes_total += nbytes
                if b.tokens < 0:
                    v.delay_s = max(v.delay_s, min(-b.tokens / b.rate, self.throttle_s_max))
            if v.delay_s > 0:
                for e, _b in bs:
                    s = self._stats(e, direction)
                    s.throttled_total += 1
                    s.throttled_seconds_total += v.delay_s
        return v

    # the read paths' two calls (one place for the fetch direction) ---------------------------------
    def fetch_admit(self, context, topic: str) -> tuple[list[str], str | None]:
        """(the entities whose fetch quota applies to this call, a refusal text or None): before a read."""
        if not self.limits:
            return [], None
        user, client_id = who(context)
        ents = self.applying("fetch", user, client_id, (topic,))
        return ents, self.admit("fetch", ents)

    async def fetch_charge(self, entities: list[str], nbytes: int) -> None:
        """After a read of ``nbytes``: the answer waits as long as the quotas' debt says."""
        if entities:
            delay = self.charge("fetch", entities, nbytes, refuse=False).delay_s
            if delay > 0:
                await asyncio.sleep(delay)

    def snapshot(self) -> dict[tuple[str, str], EntityStats]:
        with self._lock:
            return {k: EntityStats(**vars(s)) for k, s in self.stats.items()}


def _rate(direction: str, v) -> int:
    if direction not in DIRECTIONS:
        raise QuotaError(f"a quota's rates are {', '.join(d + '_bytes_per_s' for d in DIRECTIONS)}")
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= RATE_MAX:
        raise QuotaError(f"{direction}_bytes_per_s is a whole number of bytes per second in [0, 2^50] (0: none)")
    return v



def who(context) -> tuple[str | None, str | None]:
    """(the authenticated user or None, the client id or None) of an RPC's context."""
    from ..sessions.telemetry import client_id_of
    from .access import IDENTITY
    ident = IDENTITY.get()
    try:
        cid = client_id_of(context) if context is not None else None
    except Exception:  # noqa: BLE001 - a context without metadata
        cid = None
    return (ident.user if ident is not None else None), (cid or None)
