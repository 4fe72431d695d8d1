"""The status page (``/`` on the metrics port): server-rendered HTML, no build step, no script,
refreshing itself. From the top: the write verdict with its reasons; each disk as a bar against
the 75 / 85 / 90 % lines; a chart of usage over the kept history with the forecast line to each
ratio (when must disk be added); alarms; topics with sizes; groups with lag.

Every element a test or a person looks for has an id: #verdict (class accepted / held /
refused), #disks (.disk rows, class ok / warn / danger), #chart (#usage, .forecast lines and
labels, #stopped while writes are held or refused), #cleanup, #forecast, #replication (in a
broker group: #role, followers with their lag), #alarms, #topics, #groups."""

from __future__ import annotations

from html import escape

from ...words import cleanup_summary, human_bytes, human_seconds, until

RATIOS = (75, 85, 90)
CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:70em}
h1{font-size:1.4em} h2{font-size:1.1em;margin-top:1.5em}
#verdict{padding:.8em 1em;border-radius:6px;font-size:1.2em;font-weight:600}
#verdict.accepted{background:#e3f5e1;color:#1b5e20} #verdict.held{background:#fff3cd;color:#7a5b00}
#verdict.refused{background:#fde2e1;color:#8b1a1a} #verdict li{font-weight:400;font-size:.85em}
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


def _verdict(v: dict) -> str:
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


def _chart(series: list[dict], forecast: dict, now_s: float, writes: str = "accepted", w: int = 720,
           h: int = 260) -> str:
    """Used % of the fullest directory over time, a dashed line from now to each ratio it will
    reach, and, while writes are held or refused, that they stop now (the warning ratio's time)."""
    pts = [(s["t_s"], max(s["used_percent"].values(), default=0.0)) for s in series]
    eta = {int(k): v for k, v in forecast["seconds_until_percent"].items() if v is not None and v > 0}
    t0 = pts[0][0] if pts else now_s - 60
    horizon = max([now_s + v for v in eta.values()] + [now_s + 0.25 * max(now_s - t0, 60)])
    span = max(horizon - t0, 1.0)

    def x(t: float) -> float:
        return 40 + (t - t0) / span * (w - 50)

    def y(p: float) -> float:
        return h - 20 - p / 100 * (h - 30)

    grid = "".join(f'<line x1="40" x2="{w - 10}" y1="{y(r):.1f}" y2="{y(r):.1f}" stroke="#c33" stroke-dasharray="3 3"'
                   f' opacity=".5"/><text x="5" y="{y(r) + 4:.1f}" font-size="10">{r}%</text>' for r in RATIOS)
    path = " ".join(f"{x(t):.1f},{y(p):.1f}" for t, p in pts)
    used = f'<polyline id="usage" fill="none" stroke="#1565c0" stroke-width="2" points="{path}"/>' if pts else ""
    fc = ""
    if pts and eta:
        last_t, last_p = pts[-1]
        for r, s in sorted(eta.items()):
            fc += (f'<line class="forecast" x1="{x(last_t):.1f}" y1="{y(last_p):.1f}" x2="{x(now_s + s):.1f}" '
                   f'y2="{y(r):.1f}" stroke="#e65100" stroke-dasharray="6 4"/>'
                   f'<text class="forecast" x="{min(x(now_s + s) - 30, w - 90):.1f}" y="{y(r) - 4:.1f}" '
                   f'font-size="10">{r}% in {until(s)}</text>')
    stop = forecast["seconds_until_percent"].get(str(RATIOS[2]))
    if pts and writes != "accepted" and stop == 0:
        fc += (f'<text id="stopped" x="{x(now_s) + 6:.1f}" y="{y(RATIOS[2]) - 4:.1f}" font-size="11" fill="#b71c1c" '
               f'font-weight="600">writes {escape(writes)} now</text>')
    axis = (f'<text x="40" y="{h - 5}" font-size="10">{human_seconds(now_s - t0)} ago</text>'
            f'<line x1="{x(now_s):.1f}" x2="{x(now_s):.1f}" y1="10" y2="{h - 20}" stroke="#999" stroke-dasharray="2 2"/>'
            f'<text x="{x(now_s) - 10:.1f}" y="{h - 5}" font-size="10">now</text>')
    return (f'<svg id="chart" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
            f'aria-label="disk usage (fullest directory) over time and the forecast to each ratio">'
            f'<rect x="40" y="10" width="{w - 50}" height="{h - 30}" fill="#fafafa" stroke="#ddd"/>'
            f'{grid}{axis}{used}{fc}</svg>')


def _span(series: list[dict]) -> float:
    return series[-1]["t_s"] - series[0]["t_s"] if len(series) > 1 else 0.0


def _size(t: dict) -> str:
    return ("" if t.get("bytes_exact", True) else "~") + human_bytes(t.get("bytes", 0))


def _table(id_: str, cols: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f'<table id="{id_}"><tr>{head}</tr>{body or "<tr><td class=muted>none</td></tr>"}</table>'


def _replication(rep: dict | None) -> str:
    """#replication: this broker's role in its group; a leader's followers with their lag."""
    if not rep:
        return ""
    head = (f"<p id=\"role\">broker group {escape(rep['group'])}: {escape(rep['member'])} is {escape(rep['role'])}, "
            f"epoch {rep['epoch'] or rep['known_epoch']}, {escape(rep['mode'])} replication, leader "
            f"{escape(rep['leader'] or 'being elected')}</p>")
    rows = [[f["member"], f["endpoint"], "yes" if f["connected"] else "no", "yes" if f["in_sync"] else "no",
             human_bytes(f["lag_bytes"]), f"{f['lag_seconds']:.1f} s"] for f in rep.get("followers") or ()]
    r = rep.get("replica")
    if r:
        rows.append([rep["member"] + " (this broker)", r["leader"], "yes" if r["connected"] else "no", "-",
                     human_bytes(r["lag_bytes"]), "-"])
    return "<h2>Replication</h2>" + head + _table("replication", ["member", "endpoint", "connected", "in sync",
                                                                 "lag", "lag time"], rows)


def render(st: dict, series: list[dict], topics: list[dict], groups: list[dict], refresh_s: int = 5) -> str:
    disk = st["disk"]
    f = disk["forecast"]
    alarms = [[name, "RAISED" if a["raised"] else "clear", a["message"] or "-"] for name, a in st["alarms"].items()]
    eta = ", ".join(f"{k} % {until(v)}" for k, v in f["seconds_until_percent"].items())
    r = st["rates"]
    return f"""<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{refresh_s}">
<title>tidemq {escape(st['endpoint'])}</title><style>{CSS}</style></head><body>
<h1>tidemq {escape(st['version'])} on {escape(st['endpoint'])}</h1>
{_verdict(st['verdict'])}
<p class="muted">store {escape(st['root'])}, up {human_seconds(st['uptime_s'])}; put {r['put_per_s']:.1f}/s,
got {r['got_per_s']:.1f}/s, in {human_bytes(r['bytes_in_per_s'])}/s; {st['topics']} topics, {st['groups']} groups</p>
<h2>Disks</h2>{_disks(disk)}
<h2>Usage and forecast</h2>{_chart(series, f, st['started_ms'] / 1000 + st['uptime_s'], st['verdict']['writes'])}
<p class="legend muted"><span class="u">&#9472;</span> used, fullest directory (last {human_seconds(_span(series))});
<span class="f">- -</span> forecast at the pace of the last minute; red dashes: the 75 / 85 / 90 % ratios</p>
<p id="cleanup">{escape('Last cleanup: ' + cleanup_summary(disk['last_cleanup'], st['started_ms'] / 1000 + st['uptime_s']))}</p>
<p id="forecast">{escape(eta)} &mdash; {escape(f['advice'])}</p>
{_replication(st.get('replication'))}
<h2>Alarms</h2>{_table('alarms', ['alarm', 'state', 'why'], alarms)}
<h2>Topics</h2>{_table('topics', ['topic', 'queues', 'messages', 'size', 'min..max offsets'],
                       [[t['topic'], t['queues'], t['messages'], _size(t), t['range']] for t in topics])}
<h2>Groups</h2>{_table('groups', ['group', 'topics', 'lag', 'in flight'],
                       [[g['group'], ', '.join(g['topics']), g['lag'], g['inflight']] for g in groups])}
</body></html>"""
