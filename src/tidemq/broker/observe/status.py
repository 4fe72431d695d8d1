"""The broker at a glance, as plain data: what `tidemq status`, the metrics and the status page
show (one source, so they agree).

    {"version", "event_loop", "started_ms", "uptime_s", "endpoint", "metrics_endpoint", "root", "ready",
     "recovery": {"seconds", "abnormal", ...}, "verdict": verdict.py, "alarms": {"memory", "disk"},
     "disk": the store's disk status, "rates": history.rates, "totals": {"put", "got", "bytes_in",
     "bytes_out", "held", "refused"}, "topics": int, "groups": int,
     "replication": node.status() + {"console": members.py's summary, "coordinator_session": {"state",
     "session_timeout_ms_asked", "session_timeout_ms_granted"}} in a broker group, else None}

The Observer is built by the broker once its store has started; ``sample()`` runs every
status_sample_interval_s on the broker's loop (its history feeds rates and the chart).
"""

from __future__ import annotations

import dataclasses

from ... import __version__
from ...io import Clock
from ..topic_names import SYSTEM_TOPICS
from .history import History, Sample
from .lag import group_lag, groups_summary
from .latency import LatencyBuckets
from .members import MemberBook
from .page import RATIOS
from .trend import fit, reach
from .verdict import write_verdict


class Observer:
    def __init__(self, broker, clock: Clock, recovery_s: float) -> None:
        self.broker = broker
        self.clock = clock
        self.started_ms = clock.now_ms()
        self.recovery_s = recovery_s
        c = broker.config
        self.history = History(c.status_history_s, c.status_sample_interval_s)
        self.put_latency = LatencyBuckets()
        self.flush_latency = LatencyBuckets()       # every commit-log flush (fsync), the store calls it
        self.members = MemberBook()                 # the group's members seen, live or down (members.py)

    # the parts --------------------------------------------------------------------------------
    @property
    def store(self):
        return self.broker.store

    @property
    def service(self):
        return self.broker.service

    def put_totals(self) -> dict[str, int]:
        """Messages stored per topic since the store began: the sum of its queues' max offsets."""
        s = self.store
        return {t: sum(s.max_offset(t, q) for q in range(s.queue_count(t))) for t in s.topic_names()}

    def read_totals(self) -> dict[str, list[int]]:
        return {t: list(c) for t, c in list(self.store.read_counts.items())}

    def put_outcomes(self) -> dict[tuple[str, str], int]:
        """Messages answered by the send path since start, by (topic, status) (observe/outcomes.py)."""
        return self.service.sends.outcomes.snapshot()

    def got_outcomes(self) -> dict[tuple[str, str], int]:
        """Messages handed out by the read paths since start, by (topic, status)."""
        return self.service.got.snapshot()

    def used_percent(self, disk: dict) -> dict[str, float]:
        return {d["path"]: d["used_ratio_percent"] for d in disk["directories"]}

    def sample(self, disk: dict | None = None) -> Sample:
        disk = disk if disk is not None else self.store.disk_status()
        reads = self.read_totals()
        return Sample(self.clock.now_ms() / 1000, self.used_percent(disk), sum(self.put_totals().values()),
                      sum(c[0] for c in reads.values()), self.store.commitlog_max_offset)

    def tick(self) -> None:
        """One sample into the history (the broker's sampling task), one look at the group."""
        self.history.add(self.sample())
        self.look_at_group()

    @property
    def node(self):
        return getattr(self.broker, "replication", None)

    def trend(self) -> dict:
        """The fullest directory's used % over status_forecast_window_s, fitted, and when it reaches each
        ratio with its range (trend.py): what the status page's chart draws."""
        pts = [(s.t_s, max(s.used_percent.values(), default=0.0)) for s in list(self.history.samples)]
        t = fit(pts, self.clock.now_ms() / 1000, self.broker.config.status_forecast_window_s)
        return {"fit": t, "seconds_until_percent": {str(r): v for r, v in reach(t, RATIOS).items()}}

    def look_at_group(self) -> None:
        """The group's live members into the book (members.py); nothing outside a broker group."""
        node = self.node
        if node is not None:
            self.members.observe(node.view(), node.member, self.clock.now_ms() / 1000)

    def replication(self) -> dict | None:
        """This member's replication status, the members known (live or down), the coordinator's session."""
        node = self.node
        if node is None:
            return None
        self.look_at_group()
        out = dict(node.status())
        out["console"] = self.members.summary(self.clock.now_ms() / 1000)
        out["coordinator_session"] = coordinator_session(node)
        return out

    def verdict(self) -> dict:
        return write_verdict(self.service.gate, self.store)

    def lag(self, group: str | None = None) -> list[dict]:
        svc = self.service
        return group_lag(self.store, svc.group_offsets, svc.pop, group)

    # the whole picture ------------------------------------------------------------------------
    def status(self) -> dict:
        b, store = self.broker, self.store
        disk = store.disk_status()
        now = self.sample(disk)
        alarms = b.alarms.status() if b.alarms is not None else {}
        flow = self.service.gate.status()
        reads = self.read_totals()
        rec = store.recovery
        c = b.config
        return {
            "version": __version__,
            "event_loop": type(b._loop).__module__.partition(".")[0],      # "uvloop" or "asyncio"
            "started_ms": self.started_ms,
            "uptime_s": round((self.clock.now_ms() - self.started_ms) / 1000, 1),
            "endpoint": f"{c.host}:{b.port}",
            "metrics_endpoint": f"{c.metrics_host}:{b.metrics_port}" if b.metrics_port else None,
            "root": store.config.root_dir,
            "ready": True,
            "recovery": {"seconds": round(self.recovery_s, 3),
                         **({k: v for k, v in dataclasses.asdict(rec).items() if not isinstance(v, list)}
                            if rec is not None else {})},
            "verdict": self.verdict(),
            "alarms": {k: alarms[k] for k in ("memory", "disk") if k in alarms},
            "disk": disk,
            "rates": self.history.rates(now),
            "trend": self.trend(),
            "totals": {"put": now.put_total, "got": now.got_total, "bytes_in": now.bytes_in_total,
                       "bytes_out": sum(c[1] for c in reads.values()), "held": flow["held_total"],
                       "refused": flow["refused_total"]},
            "topics": len([t for t in store.topic_names() if t not in SYSTEM_TOPICS]),
            "groups": len(groups_summary(self.lag())),
            "replication": self.replication(),
        }


def coordinator_session(node) -> dict | None:
    """The coordinator's session as this member has it: state, the timeout asked and the one granted
    (zk_address.GrantedTimeout); None without a coordinator."""
    coord = getattr(node, "coordinator", None)
    if coord is None:
        return None
    # the GrantedTimeout (replication/zk_address.py) on the ZooKeeper client: the coordinator itself,
    # or its session object where the group's logic and the client are apart (``coordinator.c``)
    granted = getattr(coord, "granted", None) or getattr(getattr(coord, "c", None), "granted", None)
    out = {"state": str(getattr(coord, "state", "") or ""),
           "session_timeout_ms_asked": node.config.coordinator_session_timeout_ms,
           "session_timeout_ms_granted": getattr(granted, "granted_ms", None)}
    return out
