"""`tidemq send TOPIC [BODY...]`: send messages to a running broker, one per BODY or one per
line of stdin (mqadmin sendMessage), and print where each was stored. Exit 1 when any was refused."""

from __future__ import annotations

import sys

import click
import grpc

from .common import client_options, config_option, endpoint_option, fail_call, quiet_logs
from .output import emit_json, fail, table


def _property(ctx, param, values) -> dict:
    out = {}
    for v in values:
        k, sep, val = v.partition("=")
        if not sep or not k:
            raise click.BadParameter(f"{v!r}: give KEY=VALUE")
        out[k] = val
    return out


@click.command()
@click.argument("topic")
@click.argument("bodies", nargs=-1)
@click.option("--tag", default=None, help="the messages' tag")
@click.option("--key", "keys", multiple=True, help="a message key (repeat for more)")
@click.option("--property", "props", multiple=True, callback=_property, help="KEY=VALUE (repeat for more)")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def send(topic, bodies, tag, keys, props, endpoint, config_file, as_json) -> None:
    """Send BODY arguments (or the lines of stdin) as messages of TOPIC."""
    from ..client import ClientError, Producer
    from ..protocol.stubs import code_name
    quiet_logs()
    texts = list(bodies) if bodies else [line.rstrip("\n") for line in sys.stdin]
    if not texts:
        fail("nothing to send: give BODY arguments or lines on stdin")
    raw = [t.encode() for t in texts]
    try:
        opts = client_options(config_file)
        with Producer(endpoint, **opts) as p:
            results = p.send_batch(topic, raw, tags=tag, keys=[list(keys)] * len(raw) if keys else None,
                                   properties=[props] * len(raw) if props else None)
    except ClientError as e:
        fail(f"broker at {endpoint}: {e}", code=2)
    except grpc.RpcError as e:          # no broker answers (UNAVAILABLE), a deadline passed, ...
        fail_call(endpoint, e, bool(opts.get("tls")))
    rows = [{"message_id": r.message_id, "queue": r.queue_id, "offset": r.offset, "status": code_name(r.code),
             "duplicate": r.duplicate, "error": r.error} for r in results]
    if as_json:
        emit_json(rows)
    else:
        table(f"sent to {topic}", ["message id", "queue", "offset", "status"],
              [[r["message_id"], r["queue"], r["offset"], r["status"] + (f": {r['error']}" if r["error"] else "")]
               for r in rows])
    if any(not r.ok for r in results):
        raise SystemExit(1)
