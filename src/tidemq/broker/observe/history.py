"""Samples of what the status page charts and `tidemq status` turns into rates: per directory
used percent, messages put and got, bytes in, taken every ``interval_s`` and kept for
``keep_s`` (a bounded ring). Time comes from the caller (the broker's clock), so tests place
samples where they like."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

RATE_WINDOW_S = 60.0     # rates over the last minute: a change of pace shows within one


@dataclass(frozen=True)
class Sample:
    t_s: float                       # wall-clock seconds
    used_percent: dict[str, float]   # directory -> used %
    put_total: int
    got_total: int
    bytes_in_total: int


class History:
    def __init__(self, keep_s: float, interval_s: float) -> None:
        self.interval_s = interval_s
        self.samples: deque[Sample] = deque(maxlen=max(2, int(keep_s / interval_s) + 1))

    def add(self, s: Sample) -> None:
        self.samples.append(s)

    def rates(self, now: Sample | None = None, window_s: float = RATE_WINDOW_S) -> dict:
        """Messages put / got and bytes in per second over the last ``window_s`` (0 with one sample)."""
        pts = list(self.samples) + ([now] if now is not None else [])
        if len(pts) < 2:
            return {"put_per_s": 0.0, "got_per_s": 0.0, "bytes_in_per_s": 0.0, "window_s": 0.0}
        last = pts[-1]
        first = next((p for p in pts if last.t_s - p.t_s <= window_s), pts[-2])
        if first is last:
            first = pts[-2]
        dt = max(last.t_s - first.t_s, 1e-9)
        return {"put_per_s": round((last.put_total - first.put_total) / dt, 2),
                "got_per_s": round((last.got_total - first.got_total) / dt, 2),
                "bytes_in_per_s": round((last.bytes_in_total - first.bytes_in_total) / dt, 1),
                "window_s": round(dt, 1)}

    def series(self) -> list[dict]:
        return [{"t_s": s.t_s, "used_percent": s.used_percent} for s in self.samples]
