"""Parts of the status page rendered from plain data: the chart (the used line drawn last, on top;
the ratio labels never overlapping, even when the ratios are close; time-axis labels apart by more
than their width; the forecast range shaded), a follower's neutral verdict, and the Cluster section
(every member known, a member down in red with when it was last seen, the coordinator's session
with the timeout granted)."""

import re

from tidemq.broker.observe.members import MemberBook
from tidemq.broker.observe.page import chart, cluster_section, text_width, verdict_box
from tidemq.broker.observe.trend import fit, reach


def texts(svg: str) -> list[tuple[float, float, str, float, str]]:
    """(x, y, anchor, font px, text) of every <text> of the chart."""
    out = []
    for attrs, body in re.findall(r"<text([^>]*)>([^<]*)</text>", svg):
        x = float(re.search(r' x="([\d.]+)"', attrs).group(1))
        y = float(re.search(r' y="([\d.]+)"', attrs).group(1))
        anchor = (re.search(r'text-anchor="(\w+)"', attrs) or [None, "start"])[1]
        size = float(re.search(r'font-size="([\d.]+)"', attrs).group(1))
        out.append((x, y, anchor, size, body))
    return out


def boxes(svg: str):
    for x, y, anchor, size, body in texts(svg):
        w = text_width(body, size)
        x0 = x - w / 2 if anchor == "middle" else x - w if anchor == "end" else x
        yield (x0, y - size, x0 + w, y + 2, body)


def overlapping(svg: str) -> list:
    bs = list(boxes(svg))
    return [(a[4], b[4]) for i, a in enumerate(bs) for b in bs[i + 1:]
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]


def filling(hours: float, per_hour: float, start: float, step_s: float = 10.0):
    n = int(hours * 3600 / step_s)
    return [{"t_s": 1_000_000 + i * step_s, "used_percent": {"/d": start + per_hour * i * step_s / 3600}}
            for i in range(n)]


def trend_of(series, window_s=1800):
    pts = [(s["t_s"], s["used_percent"]["/d"]) for s in series]
    t = fit(pts, pts[-1][0], window_s)
    return {"fit": t, "seconds_until_percent": {str(r): v for r, v in reach(t, (75, 85, 90)).items()}}


def test_labels_never_overlap_and_the_used_line_is_on_top():
    for hours, per_hour, start in ((6, 2.0, 60.0), (0.05, 30.0, 70.0), (1, 0.5, 84.0), (6, 20.0, 5.0),
                                   (0.02, 100.0, 88.0)):
        series = filling(hours, per_hour, start)
        svg = chart(series, trend_of(series), series[-1]["t_s"])
        assert overlapping(svg) == [], (hours, per_hour, start)
        assert svg.index('id="usage"') > max(svg.rfind('class="forecast"', 0, svg.index('id="usage"')),
                                              svg.find('id="forecast-range"'))
        assert not re.search(r'<line class="forecast"', svg[svg.index('id="usage"'):]), "no line after the used one"
        assert svg.count('<line class="forecast"') == len(re.findall(r'<text class="forecast"', svg))


def test_the_forecast_shows_its_range():
    series = filling(1, 4.0, 70.0)
    svg = chart(series, trend_of(series), series[-1]["t_s"])
    assert 'id="forecast-range"' in svg
    labels = re.findall(r'<text class="forecast"[^>]*>(\d+)% in ([^<(]+) \(([^)]+)\)</text>', svg)
    assert {r for r, _, _ in labels} == {"75", "85", "90"} and all("\u2013" in rng for _, _, rng in labels)


def test_a_follower_is_neutral_and_a_leader_refusing_is_red():
    v = {"writes": "refused", "reasons": [{"source": "store", "code": "NOT_LEADER", "text": "follows m1"}]}
    box = verdict_box(v, {"role": "follower", "leader": "127.0.0.1:9081"})
    assert 'class="following"' in box and "127.0.0.1:9081" in box
    full = {"writes": "refused", "reasons": [{"source": "store", "code": "DISK_FULL", "text": "full"}]}
    assert 'class="refused"' in verdict_box(full, {"role": "follower", "leader": "x"})


def rep_with(book: MemberBook, now_s: float, role="follower", **kw) -> dict:
    return {"group": "g1", "member": "m2", "role": role, "epoch": 0, "known_epoch": 4, "leader": "m3:81",
            "fenced": False, "mode": "SYNC", "coordinator": "127.0.0.1:2181/tidemq",
            "replica": {"leader": "m3:91", "connected": True, "lag_bytes": 12, "truncated_bytes": 0},
            "console": book.summary(now_s),
            "coordinator_session": {"state": "connected", "session_timeout_ms_asked": 1500,
                                    "session_timeout_ms_granted": 4000}, **kw}


def members_view(leader, epoch, *ms):
    return {"leader": leader, "epoch": epoch, "members": {m: {"endpoint": f"{m}:81", "role": "x"} for m in ms}}


def test_the_cluster_section_shows_a_member_down_in_red_and_the_granted_timeout():
    b = MemberBook()
    b.observe(members_view("m1:81", 3, "m1", "m2", "m3"), "m2", 100.0)
    b.observe(members_view("m3:81", 4, "m2", "m3"), "m2", 107.0)          # m1 killed, m3 elected
    html = cluster_section(rep_with(b, 130.0), 130.0)
    assert 'id="group-health" class="member_down"' in html and "m1 down" in html
    down = re.search(r'<tr class="down"><td>m1</td><td>m1:81</td><td>down</td><td>3</td>.*?<td>([^<]+)</td></tr>',
                     html).group(1)
    assert down == "30 s ago"
    assert re.search(r'<tr class="leader"><td>m3</td>', html)
    assert re.search(r'<tr class="follower"><td>m2 \(this broker\)</td><td>m2:81</td><td>follower</td><td>4</td>'
                     r'<td>12 B</td>', html)
    assert "leader since 23 s ago" in html and "1 leader change(s)" in html
    assert "timeout granted 4000 ms (asked 1500 ms)" in html
    b.observe(members_view("m3:81", 4, "m1", "m2", "m3"), "m2", 140.0)    # back
    assert 'id="group-health" class="ok"' in cluster_section(rep_with(b, 140.0), 140.0)


def test_no_leader_is_red():
    b = MemberBook()
    b.observe(members_view("", 4, "m2", "m3"), "m2", 1.0)
    html = cluster_section(rep_with(b, 1.0, leader=""), 1.0)
    assert 'id="group-health" class="no_leader"' in html
