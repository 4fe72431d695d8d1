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
        _cluster(admin_call(endpoint, "Cluster", config_file=config_file)["cluster"], as_json)
        return
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
    if rep.get("replica"):
        r = rep["replica"]
        out.print(f"copying {r['leader']}: {'connected' if r['connected'] else 'not connected'}, "
                  f"{r['lag_bytes']} bytes behind, cut {r['truncated_bytes']} diverged bytes"
                  + (f"; last error: {r['last_error']}" if r.get("last_error") else ""))


def _cluster(c: dict, as_json: bool) -> None:
    if as_json:
        emit_json(c)
        return
    rows = []
    for g, d in sorted(c["groups"].items()):
        leader = (d.get("leader") or {}).get("member") if isinstance(d.get("leader"), dict) else d.get("leader")
        for m, md in sorted(d["members"].items()):
            role = md.get("role") or ("leader" if m == leader else "follower")
            rows.append([g, m, md.get("endpoint", ""), role, d.get("epoch", "")])
    table("broker groups", ["group", "member", "endpoint", "role", "epoch"], rows)
    table("topics spread over groups", ["topic", "queues", "owners"],
          [[t, d["queues"], "; ".join(f"{g}: {','.join(map(str, q))}" for g, q in sorted(d["owners"].items()))]
           for t, d in sorted(c["topics"].items())])
