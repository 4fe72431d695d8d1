"""Latency buckets: a histogram as Prometheus keeps one (cumulative counts per upper bound, a
sum and a count), filled with one bisect per observation and no allocation, so that timing a
put costs next to nothing. Read by metrics.py."""

from __future__ import annotations

from bisect import bisect_left

# seconds: 50 us .. 10 s, the range a put (or a flush) takes between a page-cache append and a stalled fsync
PUT_BOUNDS_S = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                2.5, 10.0)


class LatencyBuckets:
    __slots__ = ("bounds", "counts", "sum_s", "count")

    def __init__(self, bounds: tuple[float, ...] = PUT_BOUNDS_S) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)      # the last one: above every bound (+Inf)
        self.sum_s = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum_s += seconds
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """[(upper bound as Prometheus writes it, observations <= it)], ending with +Inf."""
        out, total = [], 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts):
            total += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), total))
        return out
