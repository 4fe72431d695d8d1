"""The status page's forecast: a least-squares trend over a long window with its uncertainty. An
even fill gives a narrow range; the same mean pace with one busy minute in it gives a forecast that
moves little (the window is long) and a wider range; a flat or falling disk has no forecast."""

import pytest

from tidemq.broker.observe.trend import fit, reach


def even(n=180, step=10.0, start=50.0, per_s=0.002):
    return [(i * step, start + per_s * i * step) for i in range(n)]


def test_an_even_fill_gives_a_narrow_range_around_the_true_time():
    pts = even()
    t = fit(pts, pts[-1][0], 1800)
    assert t["percent_per_hour"] == pytest.approx(7.2)
    assert t["percent_per_hour_se"] == pytest.approx(0.0, abs=1e-9)
    r = reach(t, (75, 85, 90))
    assert r[85]["mid"] == pytest.approx((85 - pts[-1][1]) / 0.002)
    assert r[85]["early"] == pytest.approx(r[85]["mid"]) and r[85]["late"] == pytest.approx(r[85]["mid"])


def test_one_busy_minute_moves_the_forecast_little_and_widens_its_range():
    calm = even()
    busy = [(t, p + (0.5 if t >= calm[-1][0] - 60 else 0.0)) for t, p in calm]     # +0.5 % in the last minute
    a = reach(fit(calm, calm[-1][0], 1800), (90,))[90]
    b = reach(fit(busy, busy[-1][0], 1800), (90,))[90]
    assert 0.75 < b["mid"] / a["mid"] < 1.0          # a one-minute pace would have said minutes, not hours
    assert b["early"] < b["mid"] < b["late"]


def test_a_flat_or_falling_disk_has_no_forecast_and_reached_ratios_are_now():
    flat = [(i * 10.0, 80.0) for i in range(20)]
    assert reach(fit(flat, 190.0, 1800), (75, 85, 90)) == {75: {"mid": 0.0, "early": 0.0, "late": 0.0}}
    assert fit(flat[:2], 10.0, 1800) is None
    assert reach(None, (85,)) == {}
