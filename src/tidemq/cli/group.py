"""`tidemq group`: consumer groups of a running broker (kafka-consumer-groups, mqadmin
consumerProgress).

    tidemq group list                       one line per group: topics, lag, in flight
    tidemq group status G                   per topic and queue: committed offset, max offset, lag,
                                            in flight (popped, not acked); exit 1 when G is unknown
    tidemq group reset G --topic T --to earliest|latest|TIMESTAMP_MS|OFFSET
                                            move G's committed offsets and pop cursors
    tidemq group create|update|delete G ...  G's own settings (retry policy, retry max, orderly,
                                            consume enable): group_settings.py
"""

from __future__ import annotations

import time

import click

from .common import config_option, endpoint_option, quiet_logs
from ..words import human_seconds
from .output import emit_json, fail, out, table


def _lag(endpoint: str, config_file: str | None, group: str | None) -> dict:
    from .common import admin_call
    return admin_call(endpoint, "Groups", {"group": group} if group else {}, config_file)


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
    gs = _lag(endpoint, config_file, None)["groups"]
    if as_json:
        emit_json(gs)
        return
    table("groups", ["group", "topics", "lag", "in flight", "dead letters"],
          [[g["group"], ",".join(g["topics"]), g["lag"], g["inflight"], g.get("dlq_messages", "-")] for g in gs])


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
        table(f"group {name}", ["topic", "queue", "kind", "committed", "max", "lag", "in flight", "again",
                                "last consumed"],
              [[r["topic"], r["queue"], r["kind"], r["committed_offset"], r["max_offset"], r["lag"], r["inflight"],
                r.get("redelivering", 0), _ago(r.get("last_consumed_ms"), now_ms)] for r in rows])
        dlq = sum(g.get("dlq_messages", 0) for g in answer["groups"])
        out.print(f"total lag {sum(r['lag'] for r in rows)}; dead letters {dlq} (topic %DLQ%{name})")
        if "settings" in answer:
            from .group_settings import describe
            out.print(f"settings ({'its own' if answer.get('created') else 'the broker defaults'}): "
                      f"{describe(answer['settings'])}")
    if not rows and not answer.get("created"):
        fail(f"group {name!r} has consumed nothing on this broker", code=1)


def _ago(ms: int | None, now_ms: float) -> str:
    return "not since start" if ms is None else f"{human_seconds(max(0.0, now_ms - ms) / 1000)} ago"


def _to(value: str) -> str | int:
    if value in ("earliest", "latest"):
        return value
    try:
        n = int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r}: give earliest, latest, a timestamp in ms or an offset",
                                 param_hint="--to") from None
    if n < 0:
        raise click.BadParameter("offsets and timestamps are >= 0", param_hint="--to")
    return n


@group.command("reset")
@click.argument("name")
@click.option("--topic", required=True)
@click.option("--to", "to", required=True, help="earliest | latest | TIMESTAMP_MS (13 digits) | OFFSET")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def reset(name, topic, to, endpoint, config_file, as_json) -> None:
    """Move the group's position on every queue of TOPIC (kafka-consumer-groups --reset-offsets):
    committed offsets of pull consumers, the cursor of pop consumers (their in-flight messages
    are forgotten: delivered again from there)."""
    from .common import admin_call
    quiet_logs()
    done = admin_call(endpoint, "ResetGroup", {"group": name, "topic": topic, "to": _to(to)}, config_file)["reset"]
    if as_json:
        emit_json(done)
        return
    table(f"group {name} reset", ["topic", "queue", "kind", "from", "to"],
          [[d["topic"], d["queue"], d["kind"], "-" if d["from"] is None else d["from"], d["to"]] for d in done])


from .group_settings import create, delete, update  # noqa: E402  (group_settings.py: create, update, delete)

group.add_command(create)
group.add_command(update)
group.add_command(delete)
