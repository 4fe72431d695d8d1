"""`tidemq status`: a running broker at a glance (rabbitmq-diagnostics status, mqadmin
brokerStatus): version, uptime, endpoint, store root, the write verdict with its reasons,
alarms, disks against the three ratios, rates, topics and groups; in a broker group its role and
the followers' lag. Exit 1 while writes are not accepted (check_local_alarms; a follower, which
takes none by design, exits 0 unless something else refuses them), 2 when the broker cannot be
asked."""

from __future__ import annotations

import click

from .common import config_option, endpoint_option, quiet_logs
from ..words import cleanup_summary, human_seconds, until
from .output import emit_json, out, table


def _pct(d: dict) -> str:
    return f"{d['used_ratio_percent']:.1f} %"


def print_verdict(v: dict) -> None:
    colour = {"accepted": "green", "held": "yellow", "refused": "red"}[v["writes"]]
    out.print(f"writes: [{colour}]{v['writes']}[/]")
    for r in v["reasons"]:
        out.print(f"  {r['code']}: {r['text']}")


@click.command()
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True, help="print the status as JSON")
@click.option("--cluster", is_flag=True, help="the cluster instead: broker groups, their members, leaders, epochs, "
                                              "and which group owns which queues (from the coordinator)")
def status(endpoint, config_file, as_json, cluster) -> None:
    """The broker at a glance; exit 1 while writes are held or refused."""
    from .common import admin_call
    quiet_logs()
    if cluster:
        c = admin_call(endpoint, "Cluster", config_file=config_file)["cluster"]
        raise SystemExit(_cluster(_with_consoles(c, config_file), as_json))
    st = admin_call(endpoint, "Status", config_file=config_file)["status"]
    accepted = st["verdict"]["writes"] == "accepted" or _following(st)
    if as_json:
        emit_json(st)
        raise SystemExit(0 if accepted else 1)
    r = st["rates"]
    out.print(f"tidemq {st['version']} on {st['endpoint']}, up {human_seconds(st['uptime_s'])}, store {st['root']}"
              + (f", metrics on {st['metrics_endpoint']}" if st["metrics_endpoint"] else ""))
    print_verdict(st["verdict"])
    al = st["alarms"]
    rep = st.get("replication")
    if rep:
        print_replication(rep)
    out.print("alarms: " + ", ".join(f"{k} {'RAISED' if a['raised'] else 'clear'}" for k, a in al.items()))
    d = st["disk"]
    th = d["directories"][0]["thresholds_percent"] if d["directories"] else {}
    table("disks", ["path", "role", "state", "used", "free MiB", "75/85/90"],
          [[x["path"], x["role"], x["state"], _pct(x), f"{x['free_bytes'] / 2**20:.1f}",
            "/".join(str(v) for v in th.values())] for x in d["directories"]])
    out.print("last cleanup: " + cleanup_summary(d["last_cleanup"], st["started_ms"] / 1000 + st["uptime_s"]))
    eta = d["forecast"]["seconds_until_percent"]
    out.print("forecast: " + ", ".join(f"{k} % {until(v)}" for k, v in eta.items()) + f"; {d['forecast']['advice']}")
    out.print(f"rates (last {r['window_s']:.0f} s): put {r['put_per_s']:.1f}/s, got {r['got_per_s']:.1f}/s, "
              f"in {r['bytes_in_per_s'] / 2**20:.2f} MiB/s; {st['topics']} topics, {st['groups']} groups; "
              f"recovery took {st['recovery']['seconds']:.2f} s")
    raise SystemExit(0 if accepted else 1)


def _following(st: dict) -> bool:
    """A follower refuses writes by design (NOT_LEADER, naming the leader): healthy, exit 0, unless
    something else refuses them too."""
    rep = st.get("replication") or {}
    return rep.get("role") == "follower" and all(r["code"] == "NOT_LEADER" for r in st["verdict"]["reasons"])


def print_replication(rep: dict) -> None:
    """This broker's place in its group; a leader's followers with their lag, a follower's copy."""
    out.print(f"broker group {rep['group']}: {rep['member']} is {rep['role']} (epoch {rep['epoch'] or rep['known_epoch']}, "
              f"{rep['mode']} replication, leader {rep['leader'] or 'being elected'})"
              + (f"; fenced: {rep['fenced']}" if rep.get("fenced") else ""))
    if rep.get("followers") is not None:
        table("followers", ["member", "endpoint", "connected", "in sync", "lag bytes", "lag s"],
              [[f["member"], f["endpoint"], f["connected"], f["in_sync"], f["lag_bytes"], f["lag_seconds"]]
               for f in rep["followers"]])
    cs = rep.get("coordinator_session")
    if cs:
        out.print(f"coordinator {rep.get('coordinator')}: session {cs['state']}, timeout granted "
                  f"{cs['session_timeout_ms_granted'] or '?'} ms (asked {cs['session_timeout_ms_asked']} ms)")
    down = [m["member"] for m in (rep.get("console") or {}).get("members", ()) if m["state"] == "down"]
    if down:
        out.print(f"[red]members down: {', '.join(down)}[/]")
    if rep.get("replica"):
        r = rep["replica"]
        out.print(f"copying {r['leader']}: {'connected' if r['connected'] else 'not connected'}, "
                  f"{r['lag_bytes']} bytes behind, cut {r['truncated_bytes']} diverged bytes"
                  + (f"; last error: {r['last_error']}" if r.get("last_error") else ""))


def _console_of(endpoint: str, group: str, config_file) -> dict | None:
    """The group's console (observe/console.py) as the member at ``endpoint`` has it; None when it
    cannot be asked."""
    import time

    from ..client.admin import call
    from ..client.settings import tls_of
    from ..protocol.signing import date_time, signed_metadata
    from .common import client_config
    try:
        cfg = client_config(config_file)
        md = signed_metadata(cfg.access_key, cfg.secret_key, date_time(time.time())) if cfg.access_key else None
        r = call(endpoint, "Cluster", None, metadata=md, tls=tls_of(cfg) or False)
    except Exception:  # noqa: BLE001 - unreachable, refused: said in the table
        return None
    return ((r.get("cluster") or {}).get("consoles") or {}).get(group) if r.get("ok") else None


def _with_consoles(c: dict, config_file) -> dict:
    """Every group's console, asked of its leader (it knows every follower's lag), else of a live
    member; the one the asked broker gave for its own group when no other answers. Groups no
    member of which answered are listed under "unreachable"."""
    consoles = dict(c.get("consoles") or {})
    unreachable = []
    for g, d in sorted(c["groups"].items()):
        leader = d.get("leader") if isinstance(d.get("leader"), dict) else {}
        tried = [leader.get("endpoint")] if leader and leader.get("endpoint") else []
        if g not in consoles or (consoles[g].get("leader_member") and consoles[g]["seen_by"] != consoles[g]["leader_member"]):
            tried += [md.get("endpoint") for _, md in sorted((d.get("members") or {}).items()) if md.get("endpoint")]
            for ep in dict.fromkeys(e for e in tried if e):
                got = _console_of(ep, g, config_file)
                if got is not None:
                    consoles[g] = got
                    break
        if g not in consoles:
            unreachable.append(g)
    return {**c, "consoles": consoles, "unreachable": unreachable}


def _cluster(c: dict, as_json: bool) -> int:
    """Print the cluster; 1 when a group has no leader, a member down, or could not be asked."""
    consoles = c.get("consoles") or {}
    bad = [g for g, k in consoles.items() if k["health"] != "ok"] + list(c.get("unreachable") or ())
    if as_json:
        emit_json(c)
        return 1 if bad else 0
    rows = []
    for g, d in sorted(c["groups"].items()):
        k = consoles.get(g)
        if k is not None:
            for m in k["members"]:
                rows.append([g, m["member"], m["endpoint"], m["state"], m["epoch"],
                             "-" if m.get("lag_bytes") is None else m["lag_bytes"],
                             "now" if m["state"] != "down" else f"{human_seconds(m.get('seen_ago_s') or 0)} ago"])
            continue
        leader = (d.get("leader") or {}).get("member") if isinstance(d.get("leader"), dict) else d.get("leader")
        for m, md in sorted(d["members"].items()):
            role = md.get("role") or ("leader" if m == leader else "follower")
            rows.append([g, m, md.get("endpoint", ""), role, d.get("epoch", ""), "-", "now"])
    table("broker groups", ["group", "member", "endpoint", "state", "epoch", "lag bytes", "last seen"], rows)
    for g, k in sorted(consoles.items()):
        colour = "green" if k["health"] == "ok" else "red"
        since = k.get("leader_for_s")
        lead = (f"leader {k['leader_member']} for {human_seconds(since)}" + ("" if k.get("leader_since_exact")
                else " at least") if k.get("leader_member") and since is not None else "no leader")
        cs = k.get("coordinator_session")
        coord = (f"; coordinator {cs['state']}, session timeout granted "
                 f"{cs['session_timeout_ms_granted'] or '?'} ms (asked {cs['session_timeout_ms_asked']} ms)") if cs else ""
        out.print(f"group {g}: [{colour}]{k['health']}[/] ({lead}, epoch {k['epoch']}, "
                  f"{k['leader_changes']} leader change(s) seen by {k['seen_by']}){coord}")
    for g in c.get("unreachable") or ():
        out.print(f"group {g}: [red]no member answered[/]")
    table("topics spread over groups", ["topic", "queues", "owners"],
          [[t, d["queues"], "; ".join(f"{g}: {','.join(map(str, q))}" for g, q in sorted(d["owners"].items()))]
           for t, d in sorted(c["topics"].items())])
