"""`tidemq receive TOPIC --group G [--count N]`: take messages of a running broker and print
them (mqadmin consumeMessage). With a group and no position it consumes as the group, the way
the official simple consumer does: ReceiveMessage pops up to COUNT messages from any queue,
AckMessage then says they are done (`tidemq group status G` shows the group's offsets move).
`--from beginning|end` or `--queue Q --offset N` read from there by PullMessage, acking and
committing nothing."""

from __future__ import annotations

import click
import grpc

from .common import client_options, config_option, endpoint_option, fail_call, quiet_logs
from .output import emit_json, fail, out, table

INVISIBLE_S = 60.0        # a message received but not acked (the command stopped) comes back after this


def _row(m, q: int | None = None) -> dict:
    sp = m.system_properties
    return {"queue": sp.queue_id if q is None else q, "offset": sp.queue_offset, "message_id": sp.message_id,
            "tag": sp.tag, "keys": list(sp.keys), "properties": dict(m.user_properties),
            "body": m.body.decode("utf-8", "backslashreplace")}


@click.command()
@click.argument("topic")
@click.option("--group", default=None, help="consumer group: receive and ack as it (its offsets move)")
@click.option("--count", type=click.IntRange(1, 100_000), default=10, show_default=True, help="messages at most")
@click.option("--from", "start", type=click.Choice(["beginning", "end"]), default=None,
              help="read from here, ack and commit nothing")
@click.option("--queue", type=click.IntRange(0), default=None, help="one queue only")
@click.option("--offset", type=click.IntRange(0), default=None, help="with --queue: read from this offset")
@click.option("--wait", "wait_s", type=click.FloatRange(0, 60), default=0.0, help="long-poll an empty topic this long")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def receive(topic, group, count, start, queue, offset, wait_s, endpoint, config_file, as_json) -> None:
    """Print up to COUNT messages of TOPIC."""
    from ..client import ClientError
    quiet_logs()
    if offset is not None and queue is None:
        raise click.UsageError("--offset needs --queue")
    if group is None and start is None and offset is None:
        raise click.UsageError("give --group (receive and ack as the group), --from beginning|end or --queue/--offset")
    as_group = group is not None and start is None and offset is None
    if as_group and queue is not None:
        raise click.UsageError("--queue goes with --offset or --from (a group receives from every queue)")
    try:
        if as_group:
            rows, not_acked = _pop(topic, group, count, wait_s, endpoint, config_file)
        else:
            rows, not_acked = _pull(topic, group, count, start, queue, offset, wait_s, endpoint, config_file), 0
    except ClientError as e:
        fail(f"broker at {endpoint}: {e}", code=2)
    except grpc.RpcError as e:          # no broker answers (UNAVAILABLE), a deadline passed, ...
        fail_call(endpoint, e, bool(client_options(config_file).get("tls")))
    if as_json:
        emit_json(rows)
    else:
        table(f"{topic}: {len(rows)} message(s)", ["queue", "offset", "tag", "keys", "body", "properties"],
              [[r["queue"], r["offset"], r["tag"], ",".join(r["keys"]), r["body"],
                " ".join(f"{k}={v}" for k, v in r["properties"].items())] for r in rows])
        if as_group:
            out.print(f"acked {len(rows) - not_acked} for group {group}")
    if not_acked:
        fail(f"{not_acked} message(s) could not be acked: the group receives them again after {INVISIBLE_S:g} s")


def _pop(topic, group, count, wait_s, endpoint, config_file) -> tuple[list[dict], int]:
    """ReceiveMessage until COUNT messages or none is left, each batch acked at once."""
    from ..client import PopConsumer
    from ..protocol.stubs import Code
    rows: list[dict] = []
    not_acked = 0
    with PopConsumer(endpoint, group, timeout_s=10.0 + wait_s, **client_options(config_file)) as c:
        while len(rows) < count:
            msgs = c.receive(topic, batch_size=min(count - len(rows), 256), invisible_s=INVISIBLE_S,
                             wait_s=wait_s if not rows else 0.0)
            if not msgs:
                break
            not_acked += sum(1 for code in c.ack(topic, msgs) if code != Code.OK)
            rows.extend(_row(m) for m in msgs)
    return rows, not_acked


def _pull(topic, group, count, start, queue, offset, wait_s, endpoint, config_file) -> list[dict]:
    """PullMessage from a position, queue by queue, committing nothing."""
    from ..client import PullConsumer
    rows: list[dict] = []
    with PullConsumer(endpoint, group=group or "", **client_options(config_file)) as c:
        queues = [queue] if queue is not None else list(range(c.queue_count(topic)))
        for q in queues:
            if len(rows) >= count:
                break
            if offset is not None:
                at = offset
            else:
                at = c.query_offset(topic, q, "BEGINNING" if start == "beginning" else "END")
            r = c.pull(topic, q, at, batch_size=min(count - len(rows), 1024), long_polling_s=wait_s)
            rows.extend(_row(m, q) for m in r.messages)
    return rows
