"""`tidemq query --topic T (--key K | --id ID | --offset COMMITLOG_OFFSET | --queue Q --time TS)`:
messages of a running broker found through its index (mqadmin queryMsgByKey / queryMsgById /
queryMsgByOffset), printed with their offsets and properties. Exit 1 when nothing is found."""

from __future__ import annotations

import click

from .common import config_option, endpoint_option, quiet_logs
from .output import emit_json, fail, table


@click.command()
@click.option("--topic", required=True)
@click.option("--key", default=None, help="a message key")
@click.option("--id", "msg_id", default=None, help="a message id (the producer's)")
@click.option("--offset", type=click.IntRange(0), default=None, help="a commit-log offset")
@click.option("--queue", type=click.IntRange(0), default=None, help="with --time: a queue")
@click.option("--time", "ts", type=click.IntRange(0), default=None, help="with --queue: a store time in ms")
@click.option("--max", "n", type=click.IntRange(1, 64), default=16, show_default=True)
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def query(topic, key, msg_id, offset, queue, ts, n, endpoint, config_file, as_json) -> None:
    """Find messages by key, id, commit-log offset or queue and time."""
    from .common import admin_call
    quiet_logs()
    if (queue is None) != (ts is None):
        raise click.UsageError("--queue and --time go together")
    given = {k: v for k, v in (("key", key), ("id", msg_id), ("commitlog_offset", offset)) if v is not None}
    if queue is not None:
        given.update(queue=queue, timestamp_ms=ts)
    if len(set(given) - {"timestamp_ms"}) != 1:
        raise click.UsageError("give one of --key, --id, --offset, --queue with --time")
    from .cluster_admin import Cluster, unreachable
    req = {"topic": topic, "max": n, **given}
    cluster = Cluster.of(endpoint, config_file)
    owners = cluster.owners(topic) if cluster is not None else None
    lost: list[str] = []
    if owners:      # a topic spread over broker groups: the group owning the queue, else every owning group
        groups = [g for g, q in owners.items() if queue in q] if queue is not None else list(owners)
        answers = cluster.ask(groups, "Query", req)
        lost = unreachable(answers)
        refused = [f"{g}: {r.get('error')}" for g, r in answers.items() if not r.get("ok") and g not in
                   {x.split(":")[0] for x in lost}]
        if refused and not any(r.get("ok") for r in answers.values()):
            fail("; ".join(refused), code=1)
        msgs = sorted((dict(m, broker_group=g) for g, r in answers.items() if r.get("ok") for m in r["messages"]),
                      key=lambda m: -m["store_timestamp_ms"])[:n]
    else:
        msgs = admin_call(endpoint, "Query", req, config_file)["messages"]
    if as_json:
        emit_json(msgs)
    else:
        table(f"{topic}: {len(msgs)} message(s)", ["queue", "offset", "commit-log offset", "msg id", "tags", "keys",
                                                     "stored (ms)", "body", "properties"],
              [[m["queue"], m["queue_offset"], m["commitlog_offset"], m["msg_id"], m["tags"] or "",
                ",".join(m["keys"]), m["store_timestamp_ms"], m["body"],
                " ".join(f"{k}={v}" for k, v in m["properties"].items())] for m in msgs])
    if lost:
        fail("could not reach broker group(s) " + "; ".join(lost) + " (their messages are missing)", code=1)
    if not msgs:
        fail("no message found", code=1)
