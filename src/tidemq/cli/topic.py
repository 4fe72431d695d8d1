"""`tidemq topic create|list|status`: topics of a running broker (--endpoint) or of a store
directory that no broker holds (--root)."""

from __future__ import annotations

import click

from .common import admin_call, config_option, connection_options, open_store, quiet_logs, root_option
from ..words import human_bytes
from .output import emit_json, fail, table


def _open(root, config_file):
    return open_store(root, config_file, ": a broker holds it, use --endpoint HOST:PORT")


@click.group()
def topic() -> None:
    """Create and list topics (offline, on a store directory; the store lock keeps a broker out)."""


def endpoint_option(f):
    """--endpoint (None: the store directory is opened) and the connection flags."""
    return click.option("--endpoint", default=None, envvar="TIDEMQ_ENDPOINT",
                        help="HOST:PORT of a running broker (else the store directory is opened)")(
        connection_options(f))


@topic.command("create")
@click.argument("name")
@click.option("--queues", type=int, default=None, help="queue count (a new topic: 8; an existing one keeps "
                                                        "its count unless this is more)")
@click.option("--space-policy", type=click.Choice(["evict", "refuse"]), default=None,
              help="when space is short and the oldest segment holds messages subscribed groups have not "
                   "consumed: evict (delete them, say which groups lost what; a new topic's default) or refuse "
                   "(keep them, refuse writes until the groups consumed them)")
@click.option("--message-type", type=click.Choice(["normal", "fifo", "delay", "transaction", "mixed"]),
              default=None, help="the messages sends to it may carry (RocketMQ's message.type): one kind, or "
                                 "mixed (any: a new topic's default); a send of another kind is answered "
                                 "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE")
@click.option("--groups", default=None, help="spread the queues over these broker groups ('a,b'; needs --endpoint "
                                             "of a broker with a coordinator)")
@endpoint_option
@root_option
@config_option
def create(name, queues, space_policy, message_type, groups, endpoint, root, config_file) -> None:
    """Create topic NAME (or grow it to --queues queues, or set its --space-policy or --message-type)."""
    quiet_logs()
    if groups and not endpoint:
        fail("--groups needs --endpoint (a broker of the cluster)")
    if endpoint:
        from ..protocol import admin as api
        req = {"name": name}
        if queues is not None:
            req["queues"] = queues
        if space_policy is not None:
            req["space_policy"] = space_policy
        if message_type is not None:
            req["message_type"] = message_type
        if groups:
            req["groups"] = [g.strip() for g in groups.split(",") if g.strip()]
        r = admin_call(endpoint, api.CREATE_TOPIC, req, config_file)
        owners = "".join(f"; {g}: queues {','.join(map(str, q))}" for g, q in (r.get("owners") or {}).items())
        policy = f", space policy {r['space_policy']}" if r.get("space_policy") else ""
        kind = f", message type {r['message_type']}" if r.get("message_type") else ""
        click.echo(f"topic {name}: {r['queues']} queue(s){policy}{kind}{owners}")
        if r.get("note"):
            click.echo(f"note: {r['note']}", err=True)
        return
    store = _open(root, config_file)
    try:
        had = store.queue_count(name)
        store.create_topic(name, queues or had or 8, space_policy, message_type)
        click.echo(f"topic {name}: {store.queue_count(name)} queue(s), space policy {store.space_policy(name)}, "
                   f"message type {store.message_type(name)}")
        if queues is not None and had > queues:
            click.echo(f"note: topic {name} already has {had} queues; queues are never taken away (asked for "
                       f"{queues}: kept {had})", err=True)
    except ValueError as e:
        fail(str(e))
    finally:
        store.shutdown()


@topic.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="do not ask")
@endpoint_option
@root_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def delete(name, yes, endpoint, root, config_file, as_json) -> None:
    """Delete topic NAME (mqadmin deleteTopic): its queues at once, its messages are never served
    again (the log keeps their bytes until cleanup); the groups' offsets of it go. Asks first."""
    quiet_logs()
    if not yes and not click.confirm(f"delete topic {name} and every message in it?", default=False):
        fail("nothing deleted", code=1)
    if endpoint:
        from ..protocol import admin as api
        from .cluster_admin import Cluster, holders, unreachable
        cluster = Cluster.of(endpoint, config_file)
        owners = cluster.owners(name) if cluster is not None else None
        spread = bool(owners)
        if cluster is not None and not owners:      # a topic of some groups, not spread: the groups holding it
            owners, seen = holders(cluster, name)
            if not owners and unreachable(seen):
                fail(f"topic {name} found on no reachable group; could not reach " + "; ".join(unreachable(seen)),
                     code=1)
        if owners:                 # each owning group's leader, then (a spread topic) the topology
            answers = cluster.ask(owners, api.DELETE_TOPIC, {"topic": name}, leader_only=True)
            lost = unreachable(answers)
            refused = [f"{g}: {r.get('error')}" for g, r in answers.items()
                       if not r.get("ok") and r.get("code") not in ("UNREACHABLE", "NOT_FOUND")]
            if lost or refused:
                fail(f"topic {name} not deleted everywhere (the cluster still lists it): "
                     + "; ".join(lost + refused), code=1)
            if spread:
                first = next(iter(answers.values()))["endpoint"]
                admin_call(first, api.DELETE_TOPIC, {"topic": name, "forget_topology": True}, config_file)
            done = {"topic": name, "queues": sum(len(q) for q in owners.values()),
                    "messages": sum(r.get("messages", 0) for r in answers.values() if r.get("ok")),
                    "groups": {g: {k: v for k, v in r.items() if k != "ok"} for g, r in answers.items()}}
        else:
            done = admin_call(endpoint, api.DELETE_TOPIC, {"topic": name}, config_file)
    else:
        store = _open(root, config_file)
        try:
            done = store.delete_topic(name)
        finally:
            store.shutdown()
        if done is None:
            fail(f"topic {name!r} does not exist", code=1)
    if as_json:
        emit_json(done)
    else:
        click.echo(f"deleted topic {name}: {done['queues']} queue(s), {done['messages']} message(s)")


@topic.command("list")
@endpoint_option
@root_option
@config_option
@click.option("--all", "show_all", is_flag=True, help="the broker's system topics too (timer, transactions)")
@click.option("--json", "as_json", is_flag=True)
def list_(endpoint, root, config_file, show_all, as_json) -> None:
    """One row per topic: queues, messages, size, space policy, its own settings."""
    quiet_logs()
    if endpoint:
        from ..protocol import admin as api
        doc = admin_call(endpoint, api.LIST_TOPICS, config_file=config_file)["topics"]
    else:
        doc = _list_offline(root, config_file)
    hidden = [d for d in doc if d.get("system")]
    if not show_all:
        doc = [d for d in doc if not d.get("system")]
    if as_json:
        emit_json(doc)
        return
    table("topics", ["topic", "queues", "messages", "size", "space policy", "own settings"],
          [[d["topic"], len(d["queues"]), d["messages"], ("" if d["bytes_exact"] else "~") + human_bytes(d["bytes"]),
            d.get("space_policy") or "-", ", ".join(f"{k}={v}" for k, v in d.get("settings", {}).items()) or "-"]
           for d in doc])
    if hidden and not show_all:
        click.echo(f"({len(hidden)} system topic(s) not shown: --all)", err=True)


def _list_offline(root, config_file) -> list:
    from ..broker.admin import topic_rows
    store = _open(root, config_file)
    try:
        return topic_rows(store)
    finally:
        store.shutdown()


@topic.command("config")
@click.argument("name")
@click.option("--set", "changes", multiple=True, metavar="KEY=VALUE",
              help="retention_hours=H, retention_bytes=N, max_message_bytes=N, space_policy=evict|refuse; "
                   "KEY=default: back to the store's (repeatable)")
@click.option("--show", is_flag=True, help="show the topic's settings (the default without --set)")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def config_(name, changes, show, endpoint, config_file, as_json) -> None:
    """A topic's own settings, changed live on the running broker (kafka-configs --entity-type
    topics): retention by time and size (a commit-log segment is deleted once every topic with
    messages in it allows it: the log is shared), the largest message body, the space policy.
    Kept in the broker state (followers copy it); unset ones are the store's."""
    from ..protocol import admin as api
    quiet_logs()
    if not endpoint:
        fail("topic config needs --endpoint (a running broker)", code=2)
    req: dict = {"topic": name}
    if changes:
        req["set"] = {}
        for c in changes:
            k, sep, v = c.partition("=")
            if not sep or not k.strip():
                fail(f"--set {c!r}: give KEY=VALUE", code=2)
            req["set"][k.strip()] = None if v.strip().lower() == "default" else v.strip()
    r = admin_call(endpoint, api.TOPIC_CONFIG, req, config_file)
    if as_json:
        emit_json({k: v for k, v in r.items() if k != "ok"})
        return
    rows = [[k, "-" if v is None else v, "own" if v is not None else
             f"store's ({'no limit' if r['store'][k] is None else r['store'][k]})"]
            for k, v in r["settings"].items()]
    rows.append(["space_policy", r["space_policy"], "own"])
    table(f"topic {name}" + (" (changed)" if changes else ""), ["setting", "value", "from"], rows)


@topic.command("status")
@click.argument("name")
@endpoint_option
@root_option
@config_option
@click.option("--json", "as_json", is_flag=True)
@click.option("-v", "--verbose", is_flag=True, help="each broker group's part of a topic spread over the cluster")
def status(name, endpoint, root, config_file, as_json, verbose) -> None:
    """Queues of topic NAME (min / max offsets, messages) and, through a broker, its groups' lag."""
    quiet_logs()
    lost: list[str] = []
    if endpoint:
        from ..protocol import admin as api
        from .cluster_admin import Cluster, holders, merge_topic_status, unreachable
        cluster = Cluster.of(endpoint, config_file)
        owners = cluster.owners(name) if cluster is not None else None
        if owners:                 # spread over broker groups: each group's queues from that group
            answers = cluster.ask(owners, api.TOPIC_STATUS, {"topic": name})
        elif cluster is not None:  # a topic of some groups, not spread: every group that has it
            owners, answers = holders(cluster, name)
        if owners:
            lost = unreachable(answers)
            doc = merge_topic_status(name, answers, owners)
        elif cluster is not None and unreachable(answers):
            fail(f"topic {name} found on no reachable group; could not reach " + "; ".join(unreachable(answers)),
                 code=1)
        else:
            doc = admin_call(endpoint, api.TOPIC_STATUS, {"topic": name}, config_file)
    else:
        from ..broker.observe.query import topic_status
        store = _open(root, config_file)
        try:
            if store.queue_count(name) == 0:
                fail(f"topic {name!r} does not exist")
            doc = topic_status(store, name, [])
        finally:
            store.shutdown()
    if as_json:
        emit_json(doc)
        if lost:
            fail("could not reach broker group(s) " + "; ".join(lost), code=1)
        return
    def size(d: dict) -> str:
        return ("" if d["bytes_exact"] else "~") + human_bytes(d["bytes"])
    table(f"topic {name}: {doc['messages']} message(s), {size(doc)}, space policy {doc.get('space_policy') or '-'}",
          ["queue", "broker group", "min offset", "max offset", "messages", "size"],
          [[q["id"], q.get("group", "-"), q["min_offset"], q["max_offset"], q["messages"], size(q)]
           for q in doc["queues"]])
    if doc["groups"]:
        table("groups", ["group", "lag", "in flight"], [[g["group"], g["lag"], g["inflight"]] for g in doc["groups"]])
    if verbose and doc.get("groups_detail"):
        for g, r in doc["groups_detail"].items():
            if "queues" in r:
                table(f"broker group {g} ({r.get('endpoint', '?')}): queues {','.join(map(str, doc['owners'][g]))}",
                      ["queue", "messages", "lag by consumer group"],
                      [[q["id"], q["messages"], "-"] for q in r["queues"] if q["id"] in doc["owners"][g]]
                      + [["all", r["messages"], ", ".join(f"{x['group']}={x['lag']}" for x in r["groups"]) or "-"]])
            else:
                click.echo(f"broker group {g}: {r.get('code')}: {r.get('error')}", err=True)
    if lost:
        fail("could not reach broker group(s) " + "; ".join(lost) + " (their queues are missing above)", code=1)
