"""`tidemq group`: consumer groups of a running broker (kafka-consumer-groups, mqadmin
consumerProgress).

    tidemq group list                       one line per group: topics, lag, in flight
    tidemq group status G                   per topic and queue: committed offset, max offset, lag,
                                            in flight (popped, not acked); exit 1 when G is unknown
    tidemq group reset G --topic T --to earliest|latest|TIMESTAMP_MS|OFFSET
                                            move G's committed offsets (pull consumers: UpdateOffset)
"""

from __future__ import annotations

import click

from .common import client_options, config_option, endpoint_option, quiet_logs
from .output import emit_json, fail, out, table


def _lag(endpoint: str, config_file: str | None, group: str | None) -> dict:
    from .topic import _admin
    return _admin(endpoint, "Groups", {"group": group} if group else {}, config_file)


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
    table("groups", ["group", "topics", "lag", "in flight"],
          [[g["group"], ",".join(g["topics"]), g["lag"], g["inflight"]] for g in gs])


@group.command("status")
@click.argument("name")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def status(name, endpoint, config_file, as_json) -> None:
    """Per topic and queue: committed offset, max offset, lag, in flight."""
    quiet_logs()
    rows = _lag(endpoint, config_file, name)["lag"]
    if as_json:
        emit_json(rows)
    else:
        table(f"group {name}", ["topic", "queue", "kind", "committed", "max", "lag", "in flight"],
              [[r["topic"], r["queue"], r["kind"], r["committed_offset"], r["max_offset"], r["lag"], r["inflight"]]
               for r in rows])
        out.print(f"total lag {sum(r['lag'] for r in rows)}")
    if not rows:
        fail(f"group {name!r} has consumed nothing on this broker", code=1)


def target_offset(consumer, topic: str, q: int, to: str) -> int:
    """earliest | latest | a timestamp in ms (13 digits or more) | an offset."""
    if to == "earliest":
        return consumer.query_offset(topic, q, "BEGINNING")
    if to == "latest":
        return consumer.query_offset(topic, q, "END")
    try:
        n = int(to)
    except ValueError:
        raise click.BadParameter(f"{to!r}: give earliest, latest, a timestamp in ms or an offset", param_hint="--to")
    if n < 0:
        raise click.BadParameter("offsets and timestamps are >= 0", param_hint="--to")
    if n >= 10**12:
        return consumer.query_offset(topic, q, "TIMESTAMP", timestamp_ms=n)
    return min(max(n, consumer.query_offset(topic, q, "BEGINNING")), consumer.query_offset(topic, q, "END"))


@group.command("reset")
@click.argument("name")
@click.option("--topic", required=True)
@click.option("--to", "to", required=True, help="earliest | latest | TIMESTAMP_MS | OFFSET")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def reset(name, topic, to, endpoint, config_file, as_json) -> None:
    """Move the group's committed offsets of every queue of TOPIC (kafka-consumer-groups --reset-offsets)."""
    from ..client import ClientError, PullConsumer
    quiet_logs()
    done = []
    try:
        with PullConsumer(endpoint, group=name, **client_options(config_file)) as c:
            for q in range(c.queue_count(topic)):
                before = c.committed(topic, q)
                off = target_offset(c, topic, q, to)
                c.commit(topic, q, off)
                done.append({"topic": topic, "queue": q, "from": before, "to": off})
    except ClientError as e:
        fail(f"broker at {endpoint}: {e}", code=2)
    if as_json:
        emit_json(done)
        return
    table(f"group {name} reset", ["topic", "queue", "from", "to"],
          [[d["topic"], d["queue"], "-" if d["from"] is None else d["from"], d["to"]] for d in done])
