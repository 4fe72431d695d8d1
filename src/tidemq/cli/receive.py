"""`tidemq receive TOPIC --group G [--count N]`: read messages of a running broker and print
them (mqadmin consumeMessage). With a group and no position, it reads from the group's
committed offset of each queue (the beginning for a new group) and commits what it printed, as
a pull consumer does; `--from beginning|end` or `--queue Q --offset N` read from there and
commit nothing."""

from __future__ import annotations

import click

from .common import client_options, config_option, endpoint_option, quiet_logs
from .output import emit_json, fail, out, table


def _row(q: int, m) -> dict:
    sp = m.system_properties
    return {"queue": q, "offset": sp.queue_offset, "message_id": sp.message_id, "tag": sp.tag,
            "keys": list(sp.keys), "properties": dict(m.user_properties),
            "body": m.body.decode("utf-8", "backslashreplace")}


@click.command()
@click.argument("topic")
@click.option("--group", default=None, help="consumer group (its committed offsets are read and moved)")
@click.option("--count", type=click.IntRange(1, 100_000), default=10, show_default=True, help="messages at most")
@click.option("--from", "start", type=click.Choice(["beginning", "end"]), default=None,
              help="read from here, commit nothing")
@click.option("--queue", type=click.IntRange(0), default=None, help="one queue only")
@click.option("--offset", type=click.IntRange(0), default=None, help="with --queue: read from this offset")
@click.option("--wait", "wait_s", type=click.FloatRange(0, 60), default=0.0, help="long-poll an empty queue this long")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def receive(topic, group, count, start, queue, offset, wait_s, endpoint, config_file, as_json) -> None:
    """Print up to COUNT messages of TOPIC."""
    from ..client import ClientError, PullConsumer
    quiet_logs()
    if offset is not None and queue is None:
        raise click.UsageError("--offset needs --queue")
    if group is None and start is None and offset is None:
        raise click.UsageError("give --group (read and commit its offsets), --from beginning|end or --queue/--offset")
    commit = group is not None and start is None and offset is None
    rows: list[dict] = []
    try:
        with PullConsumer(endpoint, group=group or "", **client_options(config_file)) as c:
            queues = [queue] if queue is not None else list(range(c.queue_count(topic)))
            for q in queues:
                if len(rows) >= count:
                    break
                if offset is not None:
                    at = offset
                elif start is not None:
                    at = c.query_offset(topic, q, "BEGINNING" if start == "beginning" else "END")
                else:
                    at = c.committed(topic, q)
                    at = c.query_offset(topic, q, "BEGINNING") if at is None else at
                r = c.pull(topic, q, at, batch_size=min(count - len(rows), 1024), long_polling_s=wait_s)
                rows.extend(_row(q, m) for m in r.messages)
                if commit and r.messages:
                    c.commit(topic, q, r.next_offset)
    except ClientError as e:
        fail(f"broker at {endpoint}: {e}", code=2)
    if as_json:
        emit_json(rows)
        return
    table(f"{topic}: {len(rows)} message(s)", ["queue", "offset", "tag", "keys", "body", "properties"],
          [[r["queue"], r["offset"], r["tag"], ",".join(r["keys"]), r["body"],
            " ".join(f"{k}={v}" for k, v in r["properties"].items())] for r in rows])
    if commit:
        out.print(f"committed for group {group}")
