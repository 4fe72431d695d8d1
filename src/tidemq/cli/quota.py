"""`tidemq quota set|list`: byte-rate quotas per user, client id or topic (kafka-configs
--entity-type users|clients|topics --add-config producer_byte_rate=...,consumer_byte_rate=...).

    tidemq quota set (--user U | --client-id C | --topic T) [--produce-bytes-per-s N] [--fetch-bytes-per-s N]
    tidemq quota list

Over its rate a send or fetch is answered late (the delay its debt needs); one whose debt would
take longer than the broker's quota_throttle_ms_max is refused TOO_MANY_REQUESTS. 0 removes a rate.
Kept in the broker state (followers copy it); changed without a restart."""

from __future__ import annotations

import click

from .common import config_option, endpoint_option, quiet_logs
from .output import emit_json, fail, out, table


@click.group()
def quota() -> None:
    """Byte-rate quotas per user, client id or topic: set, list."""


@quota.command("set")
@click.option("--user", default=None)
@click.option("--client-id", default=None)
@click.option("--topic", default=None)
@click.option("--produce-bytes-per-s", type=int, default=None, help="bytes per second sent (0: no limit)")
@click.option("--fetch-bytes-per-s", type=int, default=None, help="bytes per second fetched (0: no limit)")
@endpoint_option
@config_option
def set_(user, client_id, topic, produce_bytes_per_s, fetch_bytes_per_s, endpoint, config_file) -> None:
    """Set the quota of one user, client id or topic, live."""
    from .common import admin_call
    quiet_logs()
    who = [(k, v) for k, v in (("user", user), ("client_id", client_id), ("topic", topic)) if v is not None]
    if len(who) != 1:
        fail("give one of --user, --client-id, --topic", code=2)
    if produce_bytes_per_s is None and fetch_bytes_per_s is None:
        fail("give --produce-bytes-per-s and / or --fetch-bytes-per-s (0: no limit)", code=2)
    req = dict(who)
    if produce_bytes_per_s is not None:
        req["produce_bytes_per_s"] = produce_bytes_per_s
    if fetch_bytes_per_s is not None:
        req["fetch_bytes_per_s"] = fetch_bytes_per_s
    r = admin_call(endpoint, "SetQuota", req, config_file)
    q = r["quota"]
    out.print(f"{r['entity']}: " + (", ".join(f"{d} {v} bytes/s" for d, v in q.items()) or "no quota"), markup=False)


@quota.command("list")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def list_(endpoint, config_file, as_json) -> None:
    """Every quota, and what it did since the broker started."""
    from .common import admin_call
    quiet_logs()
    r = admin_call(endpoint, "ListQuotas", config_file=config_file)
    if as_json:
        emit_json({"quotas": r["quotas"], "stats": r["stats"]})
        return
    stats = {(s["entity"], s["direction"]): s for s in r["stats"]}
    rows = []
    for e, q in r["quotas"].items():
        for d, rate in sorted(q.items()):
            s = stats.get((e, d), {})
            rows.append([e, d, rate, s.get("bytes", 0), s.get("throttled", 0), s.get("throttled_seconds", 0),
                         s.get("refused", 0)])
    table("quotas", ["entity", "direction", "bytes/s", "bytes", "delayed", "delayed s", "refused"], rows)
