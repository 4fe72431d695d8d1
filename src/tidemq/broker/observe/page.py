"""The status page (``/`` on the metrics port): server-rendered HTML, no build step, no script,
refreshing itself. From the top: the write verdict with its reasons; each disk as a bar against
the 75 / 85 / 90 % lines; a chart of usage over the kept history with the forecast line to each
ratio (when must disk be added); alarms; topics with sizes; groups with lag.

Every element a test or a person looks for has an id: #verdict (class accepted / held /
refused), #disks (.disk rows, class ok / warn / danger), #chart (#usage, .forecast lines and
labels in a column on the right, #forecast-range the trend's uncertainty, #stopped while writes are
held or refused), #cleanup, #forecast, #replication / #cluster (in a broker group: #group-health, #role, #coordinator,
#members: every member known, live or down), #alarms, #topics, #groups."""

from __future__ import annotations

import math
from html import escape

from ...words import cleanup_summary, human_bytes, human_seconds, until
from .console import MEMBER_DOWN, NO_LEADER, OK, group_console

RATIOS = (75, 85, 90)
CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:70em}
h1{font-size:1.4em} h2{font-size:1.1em;margin-top:1.5em}
#verdict{padding:.8em 1em;border-radius:6px;font-size:1.2em;font-weight:600}
#verdict.accepted{background:#e3f5e1;color:#1b5e20} #verdict.held{background:#fff3cd;color:#7a5b00}
#verdict.refused{background:#fde2e1;color:#8b1a1a} #verdict li{font-weight:400;font-size:.85em}
#verdict.following{background:#e8eef7;color:#1a3a6b}
#group-health{padding:.5em 1em;border-radius:6px;font-weight:600}
#group-health.ok{background:#eef2f5;color:#333} #group-health.member_down,#group-health.no_leader{background:#fde2e1;color:#8b1a1a}
#members tr.down td{color:#8b1a1a;font-weight:600} #members tr.leader td{font-weight:600}
.bar{position:relative;height:22px;background:#eee;border-radius:4px;width:100%;min-width:220px}
td.num{white-space:nowrap;text-align:right}
#disks{width:100%} #disks td.path{overflow-wrap:anywhere;min-width:20em} .legend{font-size:.85em}
.legend .u{color:#1565c0;font-weight:600} .legend .f{color:#e65100;font-weight:600}
.fill{height:100%;border-radius:4px} .ok .fill{background:#4caf50} .warn .fill{background:#f0ad4e}
.danger .fill{background:#d9534f}
.line{position:absolute;top:-3px;bottom:-3px;width:2px;background:#333;opacity:.6}
table{border-collapse:collapse;margin-top:.5em} td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}
.disk td{vertical-align:middle} .muted{color:#777}
"""


def _level(pct: float) -> str:
    return "danger" if pct >= RATIOS[1] else "warn" if pct >= RATIOS[0] else "ok"


def verdict_box(v: dict, rep: dict | None = None) -> str:
    """#verdict. A follower refusing writes only because it follows (NOT_LEADER) is neutral
    (class following): writes go to its leader; the group's own health is the Cluster section's."""
    if rep and rep.get("role") == "follower" and v["reasons"] and all(r["code"] == "NOT_LEADER" for r in v["reasons"]):
        return (f'<div id="verdict" class="following">Follower: writes go to the leader '
                f'{escape(rep.get("leader") or "(being elected)")}</div>')
    words = {"accepted": "Writes accepted", "held": "Writes held (then refused)", "refused": "Writes refused"}
    items = "".join(f"<li>{escape(r['code'])}: {escape(r['text'])}</li>" for r in v["reasons"])
    return (f'<div id="verdict" class="{v["writes"]}">{words[v["writes"]]}'
            + (f"<ul>{items}</ul>" if items else "") + "</div>")


def _disks(disk: dict) -> str:
    rows = []
    for d in disk["directories"]:
        pct = d["used_ratio_percent"]
        lines = "".join(f'<div class="line" style="left:{r}%" title="{r} %"></div>' for r in RATIOS)
        rows.append(f'<tr class="disk {_level(pct)}" data-used="{pct:.2f}"><td class="path">{escape(d["path"])}</td>'
                    f'<td>{escape(d["role"])}</td><td>{escape(d["state"])}</td>'
                    f'<td style="width:30%"><div class="bar"><div class="fill" style="width:{min(pct, 100):.1f}%">'
                    f'</div>{lines}</div></td><td class="num">{pct:.1f} %</td>'
                    f'<td class="num">{human_bytes(d["free_bytes"])} free</td></tr>')
    return ('<table id="disks"><tr><th>directory</th><th>role</th><th>state</th>'
            '<th>used (marks at 75 / 85 / 90 %)</th><th></th><th></th></tr>'
            + "".join(rows) + "</table>")


TICK_STEPS_S = (10, 30, 60, 300, 600, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400,
                7 * 86400, 14 * 86400, 30 * 86400)
CHAR_W = 0.62            # a character's width in a font-size unit (system-ui digits, generous)
LABEL_GAP_PX = 13        # the least distance between two ratio labels' baselines (font 10)


def _tick(s: float) -> str:
    """A time-axis label relative to now: -2h, -30m, now, +1d."""
    if abs(s) < 1:
        return "now"
    sign = "-" if s < 0 else "+"
    s = abs(s)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            v = s / size
            return f"{sign}{v:.0f}{unit}" if v >= 10 or v == int(v) else f"{sign}{v:.1f}{unit}"
    return f"{sign}{s:.0f}s"


def text_width(text: str, font_px: float) -> float:
    """An estimate (generous) of a text's width in pixels, to keep labels apart."""
    return len(text) * font_px * CHAR_W


def chart(series: list[dict], trend: dict | None, now_s: float, writes: str = "accepted",
           stopped: bool = False, w: int = 760, h: int = 280) -> str:
    """Used % of the fullest directory over time (the line on top), the trend ahead (trend.py: a
    dashed line to each ratio it will reach and a shaded range from the slope's uncertainty), the
    ratios' labels in a column on the right (never on top of each other), a time axis whose labels
    are spaced by their width, and, while writes are held or refused, that they stop now."""
    left, right, top, bottom = 44, w - 180, 10, h - 30
    pts = [(s["t_s"], max(s["used_percent"].values(), default=0.0)) for s in series]
    fit = (trend or {}).get("fit")
    # ratios ahead (a second or more away); none while writes are held or refused: nothing is written
    eta = {int(k): v for k, v in ((trend or {}).get("seconds_until_percent") or {}).items()
           if v["mid"] >= 1 and not stopped}
    t0 = pts[0][0] if pts else now_s - 60
    ahead = max([v["mid"] for v in eta.values()] + [0.25 * max(now_s - t0, 60)])
    horizon = now_s + min(ahead * 1.15, 30 * 86400)
    span = max(horizon - t0, 1.0)

    def x(t: float) -> float:
        return left + (min(t, horizon) - t0) / span * (right - left)

    def y(p: float) -> float:
        return bottom - max(0.0, min(p, 100.0)) / 100 * (bottom - top)

    grid = "".join(f'<line x1="{left}" x2="{right}" y1="{y(r):.1f}" y2="{y(r):.1f}" stroke="#c33" '
                   f'stroke-dasharray="3 3" opacity=".5"/><text class="axis" x="4" y="{y(r) + 4:.1f}" '
                   f'font-size="10">{r}%</text>' for r in RATIOS)
    # time axis: a step whose labels are apart by more than their width
    step = next((st for st in TICK_STEPS_S if (right - left) * st / span >= 64), TICK_STEPS_S[-1])
    ticks = ""
    k = math.ceil((t0 - now_s) / step)
    while now_s + k * step <= horizon:
        t = now_s + k * step
        label = _tick(t - now_s)
        ticks += (f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{bottom}" y2="{bottom + 4}" stroke="#999"/>'
                  f'<text class="axis" x="{x(t):.1f}" y="{h - 12}" font-size="10" text-anchor="middle">{label}</text>')
        k += 1
    now_line = (f'<line x1="{x(now_s):.1f}" x2="{x(now_s):.1f}" y1="{top}" y2="{bottom}" stroke="#999" '
                f'stroke-dasharray="2 2"/>')
    band = lines = labels = ""
    if pts and fit is not None and fit["percent_per_hour"] > 0 and eta:
        last_t, last_p = pts[-1]
        slope = fit["percent_per_hour"] / 3600
        se = fit["percent_per_hour_se"] / 3600
        hi, lo = slope + 2 * se, max(slope - 2 * se, 0.0)
        end_t = horizon
        band = (f'<polygon id="forecast-range" fill="#e65100" opacity=".12" points="{x(last_t):.1f},{y(last_p):.1f} '
                f'{x(end_t):.1f},{y(last_p + hi * (end_t - last_t)):.1f} '
                f'{x(end_t):.1f},{y(last_p + lo * (end_t - last_t)):.1f}"/>')
        ys = []
        for r in sorted(eta, reverse=True):          # top first: labels pushed down, never overlapping
            yy = y(r) + 4
            if ys and yy < ys[-1] + LABEL_GAP_PX:
                yy = ys[-1] + LABEL_GAP_PX
            ys.append(yy)
        for (r, yy) in zip(sorted(eta, reverse=True), ys):
            v = eta[r]
            late = until(v["late"]) if v["late"] is not None else "never"
            rng = f"{until(v['early'])}\u2013{late}"
            lines += (f'<line class="forecast" x1="{x(last_t):.1f}" y1="{y(last_p):.1f}" x2="{x(now_s + v["mid"]):.1f}" '
                      f'y2="{y(last_p + slope * min(v["mid"], horizon - now_s)):.1f}" stroke="#e65100" '
                      f'stroke-dasharray="6 4"/>')
            labels += (f'<text class="forecast" x="{right + 6}" y="{yy:.1f}" font-size="10" fill="#8a3300">'
                       f'{r}% in {until(v["mid"])} ({rng})</text>')
    used = (f'<polyline id="usage" fill="none" stroke="#1565c0" stroke-width="2.5" '
            f'points="{" ".join(f"{x(t):.1f},{y(p):.1f}" for t, p in pts)}"/>') if pts else ""
    stop = ""
    if pts and writes != "accepted" and stopped:
        stop = (f'<text id="stopped" x="{right + 6}" y="{y(RATIOS[2]) - 10:.1f}" font-size="11" fill="#b71c1c" '
                f'font-weight="600">writes {escape(writes)} now</text>')
    return (f'<svg id="chart" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
            f'aria-label="disk usage (fullest directory) over time and the forecast to each ratio">'
            f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="#fafafa" stroke="#ddd"/>'
            f'{grid}{ticks}{now_line}{band}{lines}{used}{labels}{stop}</svg>')


def _trend_words(trend: dict | None) -> str:
    fit = (trend or {}).get("fit")
    if fit is None:
        return "forecast: not enough history yet"
    return (f"trend over the last {human_seconds(fit['window_s'])} ({fit['samples']} samples): "
            f"{fit['percent_per_hour']:+.2f} \u00b1 {2 * fit['percent_per_hour_se']:.2f} % per hour; "
            f"shaded: the range it may take")


def _span(series: list[dict]) -> float:
    return series[-1]["t_s"] - series[0]["t_s"] if len(series) > 1 else 0.0


def _size(t: dict) -> str:
    return ("" if t.get("bytes_exact", True) else "~") + human_bytes(t.get("bytes", 0))


def _table(id_: str, cols: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f'<table id="{id_}"><tr>{head}</tr>{body or "<tr><td class=muted>none</td></tr>"}</table>'


def _ago(now_s: float, t_s: float | None) -> str:
    return "-" if t_s is None else f"{human_seconds(max(0.0, now_s - t_s))} ago"


def cluster_section(rep: dict | None, now_s: float) -> str:
    """#cluster: the group as the coordinator knows it (console.py): #group-health (class ok, or
    member_down / no_leader in red), the leader and since when, the coordinator's session, and
    #members: every member known, live or down (rows class leader / follower / down)."""
    if not rep:
        return ""
    c = group_console(rep)
    words = {OK: f"broker group {c['group']}: healthy", MEMBER_DOWN: f"broker group {c['group']}: member(s) "
             f"{', '.join(c['down'])} down", NO_LEADER: f"broker group {c['group']}: no leader: writes are refused"}
    since = c["leader_since_s"]
    lead = (f"leader {escape(c['leader_member'] or '-')} ({escape(c['leader'] or 'none')}), epoch {c['epoch']}, "
            + (f"leader since {_ago(now_s, since)}" if since is not None and c["leader_since_exact"]
               else f"leading since before this broker looked ({_ago(now_s, since)})" if since is not None else "")
            + f"; {c['leader_changes']} leader change(s) seen; {escape(c['mode'] or '')} replication")
    cs = c.get("coordinator_session")
    if cs:
        granted = cs.get("session_timeout_ms_granted")
        coord = (f'<p id="coordinator">coordinator {escape(rep.get("coordinator") or "")}: session '
                 f'{escape(cs["state"])}, timeout granted '
                 f'{f"{granted} ms" if granted else "not known yet"} (asked {cs["session_timeout_ms_asked"]} ms)</p>')
    else:
        coord = '<p id="coordinator">no coordinator: static roles</p>'
    rows = []
    for m in c["members"]:
        lag = "-" if m.get("lag_bytes") is None else human_bytes(m["lag_bytes"])
        lag_s = "-" if m.get("lag_seconds") is None else f"{m['lag_seconds']:.1f} s"
        ins = "-" if m.get("in_sync") is None else ("yes" if m["in_sync"] else "no")
        seen = "now" if m["state"] != "down" else _ago(now_s, m["last_seen_s"])
        name = m["member"] + (" (this broker)" if m.get("this") else "")
        rows.append(f'<tr class="{m["state"]}"><td>{escape(name)}</td><td>{escape(m["endpoint"])}</td>'
                    f'<td>{m["state"]}</td><td>{m["epoch"]}</td><td>{lag}</td><td>{lag_s}</td><td>{ins}</td>'
                    f'<td>{seen}</td></tr>')
    table = ('<table id="members"><tr><th>member</th><th>endpoint</th><th>state</th><th>epoch</th><th>lag</th>'
             '<th>lag time</th><th>in sync</th><th>last seen</th></tr>' + "".join(rows) + "</table>")
    return (f'<h2 id="replication">Cluster</h2><div id="cluster"><div id="group-health" class="{c["health"]}">'
            f'{escape(words[c["health"]])}</div><p id="role">{lead}</p>{coord}{table}'
            f'<p class="muted">Members this broker has seen since it started; lag where it knows it (a leader '
            f'knows every follower\'s). Every group: <code>tidemq status --cluster</code>.</p></div>')


def render(st: dict, series: list[dict], topics: list[dict], groups: list[dict], refresh_s: int = 5) -> str:
    disk = st["disk"]
    f = disk["forecast"]
    alarms = [[name, "RAISED" if a["raised"] else "clear", a["message"] or "-"] for name, a in st["alarms"].items()]
    eta = ", ".join(f"{k} % {until(v)}" for k, v in f["seconds_until_percent"].items())
    r = st["rates"]
    return f"""<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{refresh_s}">
<title>tidemq {escape(st['endpoint'])}</title><style>{CSS}</style></head><body>
<h1>tidemq {escape(st['version'])} on {escape(st['endpoint'])}</h1>
{verdict_box(st['verdict'], st.get('replication'))}
<p class="muted">store {escape(st['root'])}, up {human_seconds(st['uptime_s'])}; put {r['put_per_s']:.1f}/s,
got {r['got_per_s']:.1f}/s, in {human_bytes(r['bytes_in_per_s'])}/s; {st['topics']} topics, {st['groups']} groups</p>
<h2>Disks</h2>{_disks(disk)}
<h2>Usage and forecast</h2>{chart(series, st.get('trend'), st['started_ms'] / 1000 + st['uptime_s'],
                                   st['verdict']['writes'], f['seconds_until_percent'].get(str(RATIOS[2])) == 0)}
<p class="legend muted"><span class="u">&#9472;</span> used, fullest directory (last {human_seconds(_span(series))});
<span class="f">- -</span> {escape(_trend_words(st.get('trend')))}; red dashes: the 75 / 85 / 90 % ratios</p>
<p id="cleanup">{escape('Last cleanup: ' + cleanup_summary(disk['last_cleanup'], st['started_ms'] / 1000 + st['uptime_s']))}</p>
<p id="forecast">{escape(eta)} &mdash; {escape(f['advice'])}</p>
{cluster_section(st.get('replication'), st['started_ms'] / 1000 + st['uptime_s'])}
<h2>Alarms</h2>{_table('alarms', ['alarm', 'state', 'why'], alarms)}
<h2>Topics</h2>{_table('topics', ['topic', 'queues', 'messages', 'size', 'min..max offsets'],
                       [[t['topic'], t['queues'], t['messages'], _size(t), t['range']] for t in topics])}
<h2>Groups</h2>{_table('groups', ['group', 'topics', 'lag', 'in flight'],
                       [[g['group'], ', '.join(g['topics']), g['lag'], g['inflight']] for g in groups])}
</body></html>"""
