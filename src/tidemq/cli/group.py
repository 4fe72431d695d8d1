"""`tidemq group`: consumer groups of a running broker (kafka-consumer-groups, mqadmin
consumerProgress).

    tidemq group list                       one line per group: topics, lag, in flight
    tidemq group status G                   per topic and queue: committed offset, max offset, lag,
                                            in flight (popped, not acked); exit 1 when G is unknown
    tidemq group reset G --topic T --to earliest|latest|TIME|OFFSET | --offsets 0=42,1=17
                      [--dry-run] [--force]
                                            move G's committed offsets and pop cursors; TIME is
                                            ISO 8601 (2026-11-27T05:00Z; without a zone: local
                                            time), relative (-1h, -30m, -2d) or 13-digit ms
    tidemq group create|update|delete G ...  G's own settings (retry policy, retry max, orderly,
                                            consume enable): group_settings.py
"""

from __future__ import annotations

import time

import click

from .common import ascii_int, config_option, endpoint_option, quiet_logs
from ..words import human_seconds
from .output import emit_json, fail, out, table


def _lag(endpoint: str, config_file: str | None, group: str | None) -> dict:
    """The Groups answer of the broker, or of every broker group of its cluster (through the
    coordinator's topology): rows of a spread topic from the group owning each queue, each row with
    its "broker_group"; "unreachable": the groups that did not answer (the command then exits 1)."""
    from .cluster_admin import Cluster, unreachable
    from .common import admin_call
    req = {"group": group} if group else {}
    cluster = Cluster.of(endpoint, config_file)
    if cluster is None:
        return {**admin_call(endpoint, "Groups", req, config_file), "unreachable": []}
    answers = cluster.ask(cluster.groups, "Groups", req)
    rows, summary = [], {}
    for g, r in answers.items():
        if not r.get("ok"):
            continue
        for row in r["lag"]:
            owners = cluster.owners(row["topic"])
            if owners is not None and row["queue"] not in owners.get(g, ()):
                continue                         # a queue of the spread topic another group owns
            rows.append({**row, "broker_group": g})
        for x in r["groups"]:
            d = summary.setdefault(x["group"], {"group": x["group"], "topics": [], "lag": 0, "inflight": 0,
                                               "dlq_messages": 0, "broker_groups": []})
            d["topics"] = sorted(set(d["topics"]) | set(x["topics"]))
            d["inflight"] += x["inflight"]
            d["dlq_messages"] += x.get("dlq_messages", 0)
            d["broker_groups"].append(g)
    for d in summary.values():
        d["lag"] = sum(r["lag"] for r in rows if r["group"] == d["group"])
    return {"lag": rows, "groups": [summary[k] for k in sorted(summary)], "unreachable": unreachable(answers)}


def _say_unreachable(answer: dict) -> None:
    if answer.get("unreachable"):
        fail("could not reach broker group(s) " + "; ".join(answer["unreachable"]) + " (their part is missing)",
             code=1)


@click.group()
def group() -> None:
    """Consumer groups: lag per queue, reset offsets."""


@group.command("list")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def list_(endpoint, config_file, as_json) -> None:
    """Every group the broker knows, with its total lag."""
    quiet_logs()
    answer = _lag(endpoint, config_file, None)
    gs = answer["groups"]
    if as_json:
        emit_json(gs)
    else:
        table("groups", ["group", "topics", "lag", "in flight", "dead letters"],
              [[g["group"], ",".join(g["topics"]), g["lag"], g["inflight"], g.get("dlq_messages", "-")] for g in gs])
    _say_unreachable(answer)


@group.command("status")
@click.argument("name")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def status(name, endpoint, config_file, as_json) -> None:
    """Per topic and queue: committed offset, max offset, lag, in flight (and of those, delivered
    again), last consumed; the group's dead letters."""
    quiet_logs()
    answer = _lag(endpoint, config_file, name)
    rows = answer["lag"]
    if as_json:
        emit_json(rows)
    else:
        now_ms = time.time() * 1000
        table(f"group {name}", ["topic", "queue", "broker group", "kind", "committed", "max", "lag", "in flight",
                                "again", "last consumed"],
              [[r["topic"], r["queue"], r.get("broker_group", "-"), r["kind"], r["committed_offset"], r["max_offset"],
                r["lag"], r["inflight"], r.get("redelivering", 0), _ago(r.get("last_consumed_ms"), now_ms)]
               for r in rows])
        dlq = sum(g.get("dlq_messages", 0) for g in answer["groups"])
        out.print(f"total lag {sum(r['lag'] for r in rows)}; dead letters {dlq} (topic %DLQ%{name})")
        if "settings" in answer:
            from .group_settings import describe
            out.print(f"settings ({'its own' if answer.get('created') else 'the broker defaults'}): "
                      f"{describe(answer['settings'])}")
    _say_unreachable(answer)
    if not rows and not answer.get("created"):
        fail(f"group {name!r} has consumed nothing on this broker", code=1)


def _ago(ms: int | None, now_ms: float) -> str:
    return "not since start" if ms is None else f"{human_seconds(max(0.0, now_ms - ms) / 1000)} ago"


RELATIVE_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def parse_to(value: str, now_s: float | None = None) -> dict:
    """A --to as the ResetGroup request's part: {"to": earliest | latest | OFFSET} or {"timestamp_ms":
    ms} (ISO 8601, relative to now like -1h, or 13-digit milliseconds); click.BadParameter else."""
    import datetime
    import re
    v = value.strip()
    if v in ("earliest", "latest"):
        return {"to": v}
    bad = click.BadParameter(f"{value!r}: give earliest, latest, a time (2026-11-27T05:00Z, -1h, -30m, "
                             f"13-digit ms) or an offset, in ASCII digits", param_hint="--to")
    m = re.fullmatch(r"-([0-9]{1,12}(?:\.[0-9]{1,9})?)([smhdw])", v)      # (bounded: no float overflows)
    if m:
        now_s = time.time() if now_s is None else now_s
        return {"timestamp_ms": max(0, int((now_s - float(m.group(1)) * RELATIVE_UNITS_S[m.group(2)]) * 1000))}
    if v.isdigit():
        n = ascii_int(v, 19)
        if n is None:             # another script's digits, a superscript, beyond an int64
            raise bad
        return {"timestamp_ms": n} if len(v) >= 13 else {"to": n}
    if not v.isascii():
        raise bad                 # (fromisoformat reads other scripts' digits)
    try:
        dt = datetime.datetime.fromisoformat(v)
    except ValueError:
        raise bad from None
    if dt.tzinfo is None:
        dt = dt.astimezone()            # no zone: this machine's local time (as kafka-consumer-groups reads it)
    return {"timestamp_ms": max(0, int(dt.timestamp() * 1000))}


def parse_offsets(value: str) -> dict:
    """--offsets 0=42,1=17 as {"0": 42, "1": 17}; click.BadParameter else."""
    out = {}
    for part in value.split(","):
        q, sep, o = part.strip().partition("=")
        qid, offset = ascii_int(q.strip(), 6), ascii_int(o.strip(), 19)
        if not sep or qid is None or offset is None:
            raise click.BadParameter(f"{part.strip()!r}: give QUEUE=OFFSET pairs in ASCII digits, e.g. 0=42,1=17",
                                     param_hint="--offsets")
        out[str(qid)] = offset
    return out


@group.command("reset")
@click.argument("name")
@click.option("--topic", required=True)
@click.option("--to", "to", default=None,
              help="earliest | latest | TIME (2026-11-27T05:00Z; no zone: local time; -1h, -30m, -2d; 13-digit "
                   "ms) | OFFSET (every queue)")
@click.option("--offsets", default=None, help="per queue: QUEUE=OFFSET,... (0=42,1=17); the other queues stay")
@click.option("--dry-run", is_flag=True, help="show what would change, change nothing")
@click.option("--force", is_flag=True, help="reset even while the group's consumers are live")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def reset(name, topic, to, offsets, dry_run, force, endpoint, config_file, as_json) -> None:
    """Move the group's position on the queues of TOPIC (kafka-consumer-groups --reset-offsets):
    committed offsets of pull consumers, the cursor of pop consumers (their in-flight messages
    are forgotten: delivered again from there). Refused while the group's consumers are live
    (consumed in the last client_idle_s_max) unless --force; a group that never consumed on the
    broker is not made by a reset."""
    from .common import admin_call
    quiet_logs()
    if (to is None) == (offsets is None):
        fail("give one of --to and --offsets", code=2)
    req = {"group": name, "topic": topic, **(parse_to(to) if to is not None else {"offsets": parse_offsets(offsets)})}
    if dry_run:
        req["dry_run"] = True
    if force:
        req["force"] = True
    from .cluster_admin import Cluster, unreachable
    cluster = Cluster.of(endpoint, config_file)
    owners = cluster.owners(topic) if cluster is not None else None
    if owners:          # a topic spread over broker groups: each owning group's leader resets its queues
        reqs = {}
        for g, qids in owners.items():
            if "offsets" in req:
                mine = {q: o for q, o in req["offsets"].items() if int(q) in qids}
                if mine:
                    reqs[g] = {**req, "offsets": mine}
            else:
                reqs[g] = req
        answers = {g: cluster.ask([g], "ResetGroup", rq, leader_only=True)[g] for g, rq in reqs.items()}
        bad = unreachable(answers) + [f"{g}: {a.get('code')}: {a.get('error')}" for g, a in answers.items()
                                      if not a.get("ok") and a.get("code") != "UNREACHABLE"]
        done = [{**d, "broker_group": g} for g, a in answers.items() if a.get("ok") for d in a["reset"]
                if d["queue"] in owners[g]]
        r = {"reset": done, "live": sorted({t for a in answers.values() for t in a.get("live", ())})}
        if bad:
            if done:
                table(f"group {name} reset on part of the cluster only", ["topic", "queue", "broker group", "kind",
                                                                         "from", "to"],
                      [[d["topic"], d["queue"], d["broker_group"], d["kind"], d["from"], d["to"]] for d in done])
            fail("not reset on broker group(s) " + "; ".join(bad), code=1)
    else:
        r = admin_call(endpoint, "ResetGroup", req, config_file)
    done = r["reset"]
    if as_json:
        emit_json(done if not dry_run else {"dry_run": True, "reset": done})
        return
    title = f"group {name} reset" + (" (dry run: nothing changed)" if dry_run else "")
    table(title, ["topic", "queue", "kind", "from", "to"],
          [[d["topic"], d["queue"], d["kind"], "-" if d["from"] is None else d["from"], d["to"]] for d in done])
    if r.get("live"):
        out.print(f"the group's consumers are live on {', '.join(r['live'])}"
                  + (": a reset without --force is refused" if dry_run else " (--force)"))


from .group_settings import create, delete, update  # noqa: E402  (group_settings.py: create, update, delete)

group.add_command(create)
group.add_command(update)
group.add_command(delete)
