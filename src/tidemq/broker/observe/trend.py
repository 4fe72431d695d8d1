"""The status page's disk forecast: the trend of the fullest directory's used % over a long window
of the kept history (``status_forecast_window_s``, 30 min by default), with its uncertainty.

The store's own forecast (store/disk.py, the metric ``tidemq_disk_forecast_seconds`` and the
alerts) follows the pace of the last minute: it reacts at once, and so swings on one busy minute
of a shared disk (days, then hours, then days). The chart draws this one instead: a least-squares
line through every sample of the window, and a range from the slope's standard error (slope +/- 2
SE, about a 95 % band when the residuals are independent): the earliest and latest time each ratio
may be reached. A disk that fills evenly gives a narrow range; one shared with bursts, a wide one;
a slope whose lower bound is not positive has no latest time (it may never fill).

Pure functions of the samples (history.py), no clock of their own.
"""

from __future__ import annotations

import math

SAMPLES_MIN = 3
SE_FACTOR = 2.0


def fit(points: list[tuple[float, float]], now_s: float, window_s: float) -> dict | None:
    """The trend of (t_s, used %) points within ``window_s`` before ``now_s``: {"window_s", "samples",
    "percent_per_hour", "percent_per_hour_se", "last_percent"}; None with fewer than 3 points or no
    time between them."""
    pts = [(t, p) for t, p in points if now_s - window_s <= t <= now_s]
    n = len(pts)
    if n < SAMPLES_MIN:
        return None
    mt = sum(t for t, _ in pts) / n
    mp = sum(p for _, p in pts) / n
    sxx = sum((t - mt) ** 2 for t, _ in pts)
    if sxx <= 0:
        return None
    slope = sum((t - mt) * (p - mp) for t, p in pts) / sxx
    resid = sum((p - (mp + slope * (t - mt))) ** 2 for t, p in pts)
    se = math.sqrt(resid / (n - 2) / sxx) if n > 2 else 0.0
    return {"window_s": round(pts[-1][0] - pts[0][0], 1), "samples": n,
            "percent_per_hour": slope * 3600, "percent_per_hour_se": se * 3600, "last_percent": pts[-1][1]}


def reach(trend: dict | None, ratios) -> dict[int, dict]:
    """Per ratio not reached yet: {"mid", "early", "late"} seconds from the last sample (late None:
    it may never be reached at the slow end of the range). Ratios reached: {"mid": 0, ...}. Empty
    when the trend is not rising."""
    if trend is None:
        return {}
    slope = trend["percent_per_hour"] / 3600
    se = trend["percent_per_hour_se"] / 3600
    p = trend["last_percent"]
    out: dict[int, dict] = {}
    for r in ratios:
        if p >= r:
            out[r] = {"mid": 0.0, "early": 0.0, "late": 0.0}
            continue
        if slope <= 0:
            continue
        hi, lo = slope + SE_FACTOR * se, slope - SE_FACTOR * se
        out[r] = {"mid": (r - p) / slope, "early": (r - p) / hi, "late": (r - p) / lo if lo > 0 else None}
    return out
