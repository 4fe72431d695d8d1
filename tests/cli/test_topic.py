"""tidemq.cli.topic: `tidemq topic create|list|status|delete` through a running broker's admin service
(--endpoint) and offline on a stopped store (--root; refused clearly while a broker holds it)."""

import json

from tidemq.store import MessageStore, StoreConfig

from ..support.cli import run

T = "ops"


def test_topics_through_the_broker(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    b = broker_factory(root)
    r = run("topic", "create", "Made", "--queues", "3", "--endpoint", b.endpoint)
    assert r.exit_code == 0 and "3 queue(s)" in r.output
    r = run("topic", "list", "--endpoint", b.endpoint, "--json")
    doc = json.loads(r.output)
    from tidemq.broker.topic_names import SYSTEM_TOPICS
    assert [d["topic"] for d in doc] == ["Made"] and len(doc[0]["queues"]) == 3, "the broker's own: --all"
    doc = json.loads(run("topic", "list", "--all", "--endpoint", b.endpoint, "--json").output)
    assert {d["topic"] for d in doc} - {"Made"} == SYSTEM_TOPICS and all(d["system"] for d in doc if d["topic"] != "Made")
    r = run("topic", "create", "Made", "--queues", "2", "--endpoint", b.endpoint)
    assert r.exit_code == 0 and "3 queue(s)" in r.output and "already has 3 queues" in r.output \
        and "never taken away" in r.output, r.output
    r = run("topic", "create", "bad name!", "--endpoint", b.endpoint)
    assert r.exit_code == 1 and "invalid topic name" in r.output
    r = run("topic", "create", "Other", "--root", root)
    assert r.exit_code == 2 and "in use by another process" in r.output, "the broker holds the store"
    from tidemq.client import Producer
    with Producer(b.endpoint) as p:
        assert all(x.ok for x in p.send_batch("Made", [b"a", b"b", b"c"]))
    # the space policy: set at creation or later, shown by list and status
    r = run("topic", "create", "Held", "--queues", "2", "--space-policy", "refuse", "--endpoint", b.endpoint)
    assert r.exit_code == 0 and "space policy refuse" in r.output, r.output
    r = run("topic", "create", "Made", "--space-policy", "refuse", "--endpoint", b.endpoint)
    assert r.exit_code == 0 and "3 queue(s), space policy refuse" in r.output, "set on an existing topic, queues kept"
    r = run("topic", "list", "--all", "--endpoint", b.endpoint, "--json")
    policies = {d["topic"]: d["space_policy"] for d in json.loads(r.output)}
    assert policies["Held"] == policies["Made"] == "refuse" and set(policies.values()) == {"refuse", "evict"}
    rows = {d["topic"]: d for d in json.loads(run("topic", "list", "--endpoint", b.endpoint, "--json").output)}
    assert (rows["Made"]["messages"], len(rows["Made"]["queues"]), rows["Made"]["bytes"] > 3) == (3, 3, True)
    table = run("topic", "list", "--endpoint", b.endpoint).output
    assert sum(1 for line in table.splitlines() if "Made" in line) == 1, "one row per topic"
    assert "2 system topic(s) not shown" in table
    r = run("topic", "status", "Held", "--endpoint", b.endpoint)
    assert r.exit_code == 0 and "space policy refuse" in r.output, r.output
    r = run("topic", "create", "Bad", "--space-policy", "keep", "--endpoint", b.endpoint)
    assert r.exit_code == 2 and "'keep' is not one of 'evict', 'refuse'" in r.output, r.output
    r = run("topic", "create", "Huge", "--queues", "1000000", "--endpoint", b.endpoint)
    assert r.exit_code == 1 and "topic_queues_max" in r.output, r.output


def test_the_space_policy_of_a_stopped_store(tmp_path):
    root = str(tmp_path / "store")
    MessageStore(StoreConfig(root_dir=root, segment_size_bytes=1 << 20, index_slots=100,
                             index_entries=400)).start().shutdown()    # offline commands never make a store
    r = run("topic", "create", "Held", "--queues", "2", "--space-policy", "refuse", "--root", root)
    assert r.exit_code == 0 and "space policy refuse" in r.output, r.output
    r = run("topic", "create", "Free", "--root", root)
    assert r.exit_code == 0 and "space policy evict" in r.output, r.output
    r = run("topic", "list", "--root", root, "--json")
    assert {d["topic"]: d["space_policy"] for d in json.loads(r.output)} == {"Held": "refuse", "Free": "evict"}
    r = run("topic", "list", "--root", root)
    assert "space policy" in r.output and "refuse" in r.output


def test_unreachable_broker_is_a_clear_error():
    r = run("topic", "list", "--endpoint", "127.0.0.1:1")
    assert r.exit_code == 2 and "UNAVAILABLE" in r.output


def test_topic_status_counts_messages_bytes_and_groups_lag(broker):
    ep = ("--endpoint", broker.endpoint)
    run("send", T, "a", "b", "c", *ep)
    run("receive", T, "--group", "g", "--count", 1, *ep)
    doc = json.loads(run("topic", "status", T, "--json", *ep).output)
    assert doc["messages"] == 3 and len(doc["queues"]) == 8
    assert doc["bytes"] == sum(q["bytes"] for q in doc["queues"]) > 3 * 91 and doc["bytes_exact"]
    r = run("topic", "status", T, *ep)
    assert f"topic {T}: 3 message(s), {doc['bytes']} B" in r.output and "size" in r.output, r.output
    assert [(g["group"], g["lag"]) for g in doc["groups"]] == [("g", 2)]
    r = run("topic", "status", "nope", *ep)
    assert r.exit_code == 1 and "does not exist" in r.output


def test_topic_delete_asks_then_deletes_and_the_groups_forget_it(broker):
    ep = ("--endpoint", broker.endpoint)
    assert run("send", "doomed", "a", "b", "c", *ep).exit_code == 0
    assert run("receive", "doomed", "--group", "g", "--count", 2, *ep).exit_code == 0
    assert run("group", "status", "g", *ep).exit_code == 0
    r = run("topic", "delete", "doomed", *ep, input="n\n")
    assert r.exit_code == 1 and "nothing deleted" in r.output
    r = run("topic", "delete", "doomed", "--yes", "--json", *ep)
    done = json.loads(r.output)
    assert r.exit_code == 0 and done["messages"] == 3 and done["topic"] == "doomed"
    assert "doomed" not in run("topic", "list", *ep).output
    assert run("group", "status", "g", *ep).exit_code == 1, "its offsets went with it"
    r = run("topic", "delete", "doomed", "--yes", *ep)
    assert r.exit_code == 1 and "does not exist" in r.output
    r = run("topic", "delete", "rmq_sys_wheel_timer", "--yes", *ep)
    assert r.exit_code == 1 and "system topic" in r.output
    # sent again (auto-created): a new topic, its messages only
    assert run("send", "doomed", "new", *ep).exit_code == 0
    r = run("receive", "doomed", "--from", "beginning", "--count", 10, "--json", *ep)
    assert [m["body"] for m in json.loads(r.output)] == ["new"]


def test_the_message_type_of_a_topic_offline_kept_across_a_restart(tmp_path):
    """--message-type: set at creation or later (offline here; through a broker in
    tests/broker/produce/test_message_types_e2e.py), kept in topics.json, mixed by default."""
    root = str(tmp_path / "store")
    MessageStore(StoreConfig(root_dir=root, segment_size_bytes=1 << 20, index_slots=100,
                             index_entries=400)).start().shutdown()
    r = run("topic", "create", "Orders", "--queues", "2", "--message-type", "fifo", "--root", root)
    assert r.exit_code == 0 and "message type fifo" in r.output, r.output
    r = run("topic", "create", "Any", "--root", root)
    assert r.exit_code == 0 and "message type mixed" in r.output, r.output
    r = run("topic", "create", "Any", "--message-type", "transaction", "--root", root)
    assert r.exit_code == 0 and "8 queue(s)" in r.output and "message type transaction" in r.output, r.output
    r = run("topic", "create", "Bad", "--message-type", "lite", "--root", root)
    assert r.exit_code == 2, r.output
    s = MessageStore(StoreConfig(root_dir=root, segment_size_bytes=1 << 20, index_slots=100, index_entries=400)).start()
    try:
        assert (s.message_type("Orders"), s.message_type("Any"), s.message_type("Bad")) == ("fifo", "transaction", None)
    finally:
        s.shutdown()


def test_topic_config_live_through_the_broker(broker):
    """`topic config T --set ...` changes a topic's own settings at once: a body over its
    max_message_bytes is refused MESSAGE_BODY_TOO_LARGE on the next send; --show and list show them;
    bad values and unknown settings are refused with the reason; 'default' unsets one."""
    from tidemq.client import Producer
    from tidemq.protocol.stubs import Code
    ep = ("--endpoint", broker.endpoint)
    assert run("topic", "create", "Cfg", "--queues", "1", *ep).exit_code == 0
    r = run("topic", "config", "Cfg", "--set", "retention_hours=2.5", "--set", "max_message_bytes=100",
            "--set", "retention_bytes=1000000", "--set", "space_policy=refuse", *ep)
    assert r.exit_code == 0 and "changed" in r.output, r.output
    doc = json.loads(run("topic", "config", "Cfg", "--show", "--json", *ep).output)
    assert doc["settings"] == {"retention_hours": 2.5, "retention_bytes": 1_000_000, "max_message_bytes": 100}
    assert doc["space_policy"] == "refuse"
    with Producer(broker.endpoint) as p:
        r = p.send_batch("Cfg", [b"x" * 100, b"y" * 101])
        assert [x.code for x in r] == [Code.OK, Code.MESSAGE_BODY_TOO_LARGE], r
        assert "max_message_bytes=100" in r[1].error
    rows = {d["topic"]: d for d in json.loads(run("topic", "list", "--json", *ep).output)}
    assert rows["Cfg"]["settings"]["retention_hours"] == 2.5 and rows["Cfg"]["messages"] == 1
    for bad, words in ((("retention_hours=-1",), "outside"), (("max_message_bytes=1.5",), "whole"),
                       (("retention=1",), "unknown topic setting"), (("space_policy=keep",), "space_policy"),
                       (("noequals",), "KEY=VALUE")):
        r = run("topic", "config", "Cfg", *[a for b in bad for a in ("--set", b)], *ep)
        assert r.exit_code in (1, 2) and words in r.output, (bad, r.output)
    assert run("topic", "config", "NOPE", *ep).exit_code == 1
    r = run("topic", "config", "Cfg", "--set", "max_message_bytes=default", "--json", *ep)
    assert r.exit_code == 0 and json.loads(r.output)["settings"]["max_message_bytes"] is None
    with Producer(broker.endpoint) as p:
        assert p.send_batch("Cfg", [b"y" * 101]).all_ok(), "unset: the store's limit again"
