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
        return
    store = _open(root, config_file)
    try:
        store.create_topic(name, queues or store.queue_count(name) or 8, space_policy, message_type)
        click.echo(f"topic {name}: {store.queue_count(name)} queue(s), space policy {store.space_policy(name)}, "
                   f"message type {store.message_type(name)}")
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
@click.option("--json", "as_json", is_flag=True)
def list_(endpoint, root, config_file, as_json) -> None:
    """Topics with their queues' min / max offsets."""
    quiet_logs()
    if endpoint:
        from ..protocol import admin as api
        doc = admin_call(endpoint, api.LIST_TOPICS, config_file=config_file)["topics"]
    else:
        doc = _list_offline(root, config_file)
    if as_json:
        emit_json(doc)
        return
    table("topics", ["topic", "space policy", "queue", "min offset", "max offset"],
          [[d["topic"], d.get("space_policy") or "-", q["id"], q["min_offset"], q["max_offset"]]
           for d in doc for q in d["queues"]])


def _list_offline(root, config_file) -> list:
    store = _open(root, config_file)
    try:
        return [{"topic": t, "space_policy": store.space_policy(t),
                 "queues": [{"id": q, "min_offset": store.min_offset(t, q), "max_offset": store.max_offset(t, q)}
                            for q in range(store.queue_count(t))]}
                for t in store.topic_names()]
    finally:
        store.shutdown()


@topic.command("status")
@click.argument("name")
@endpoint_option
@root_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def status(name, endpoint, root, config_file, as_json) -> None:
    """Queues of topic NAME (min / max offsets, messages) and, through a broker, its groups' lag."""
    quiet_logs()
    if endpoint:
        from ..protocol import admin as api
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
        return
    def size(d: dict) -> str:
        return ("" if d["bytes_exact"] else "~") + human_bytes(d["bytes"])
    table(f"topic {name}: {doc['messages']} message(s), {size(doc)}, space policy {doc.get('space_policy') or '-'}",
          ["queue", "min offset", "max offset", "messages", "size"],
          [[q["id"], q["min_offset"], q["max_offset"], q["messages"], size(q)] for q in doc["queues"]])
    if doc["groups"]:
        table("groups", ["group", "lag", "in flight"], [[g["group"], g["lag"], g["inflight"]] for g in doc["groups"]])
