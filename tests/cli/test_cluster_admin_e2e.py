"""Cluster-wide administration from any member's endpoint (tidemq/cli/cluster_admin.py): two broker
groups on a real ZooKeeper, a topic spread over both; `topic status` through one group counts the
other's queues too (per group with -v); `topic delete` deletes every group's part and the topology
entry (no ghost in `status --cluster`); a topic of one group is found through another's member; a
view that cannot reach a group names it and exits 1."""

import json

from tidemq.client import Producer, PullConsumer

from ..support.brokers import admin_call
from ..support.cli import run
from ..support.group import Group
from ..support.wait import wait_until
from ..support.zookeeper import zookeeper  # noqa: F401  (fixture)


def test_views_and_deletes_act_on_every_group_owning_the_topic(tmp_path, zookeeper):  # noqa: F811
    a = Group(str(tmp_path), 1, coordinator=zookeeper, mode="ASYNC", name="a")
    b = Group(str(tmp_path), 1, coordinator=zookeeper, mode="ASYNC", name="b")
    try:
        a.start_all()
        b.start_all()
        a.wait_leader()
        b.wait_leader()
        for t in ("S1", "S2"):
            assert admin_call(a.endpoint(0), "CreateTopic", {"name": t, "queues": 4, "groups": ["a", "b"]})["ok"]

        def routed():
            with PullConsumer(b.endpoint(0)) as c:
                return c.queue_count("S1") == 4 == c.queue_count("S2")
        wait_until(routed, "the spread topics known to both groups")
        with Producer(a.endpoint(0)) as p:
            for t in ("S1", "S2"):
                for _ in range(8):
                    assert p.send_batch(t, [b"m%d" % i for i in range(5)]).all_ok()
        own = [admin_call(g.endpoint(0), "TopicStatus", {"topic": "S1"})["messages"] for g in (a, b)]
        assert sum(own) == 40 and all(n < 40 for n in own), own      # each group's own view: its part
        r = run("topic", "status", "S1", "--json", "--endpoint", a.endpoint(0))
        doc = json.loads(r.output)
        assert r.exit_code == 0 and doc["messages"] == 40, "the whole topic, through one group's member"
        assert run("query", "--topic", "S1", "--queue", 1, "--time", 0, "--endpoint", a.endpoint(0)).exit_code == 0
        assert {q["id"]: q["group"] for q in doc["queues"]} == {0: "a", 1: "b", 2: "a", 3: "b"}
        r = run("topic", "status", "S1", "-v", "--endpoint", b.endpoint(0))
        assert r.exit_code == 0 and "broker group a" in r.output and "broker group b" in r.output

        for g in (a, b):
            with Producer(g.endpoint(0)) as p:
                for _ in range(4):
                    assert p.send_batch("S1", [b"keyed"], keys=[["k1"]]).all_ok()
        r = run("query", "--topic", "S1", "--key", "k1", "--json", "--endpoint", a.endpoint(0))
        assert r.exit_code == 0 and len(json.loads(r.output)) == 8, r.output
        assert {m["broker_group"] for m in json.loads(r.output)} == {"a", "b"}, "found on both groups"
        r = run("topic", "delete", "S1", "--yes", "--json", "--endpoint", b.endpoint(0))
        assert r.exit_code == 0, r.output
        assert set(json.loads(r.output)["groups"]) == {"a", "b"}
        for g in (a, b):
            assert "S1" not in [t["topic"] for t in admin_call(g.endpoint(0), "ListTopics")["topics"]]
        cluster = json.loads(run("status", "--cluster", "--json", "--endpoint", a.endpoint(0)).output)
        assert "S1" not in cluster["topics"] and "S2" in cluster["topics"], "no ghost entry"

        assert admin_call(b.endpoint(0), "CreateTopic", {"name": "OnlyB", "queues": 2})["ok"]   # one group's
        r = run("topic", "status", "OnlyB", "--json", "--endpoint", a.endpoint(0))
        assert r.exit_code == 0 and {q["group"] for q in json.loads(r.output)["queues"]} == {"b"}, r.output
        r = run("topic", "delete", "OnlyB", "--yes", "--endpoint", a.endpoint(0))
        assert r.exit_code == 0 and "OnlyB" not in [t["topic"] for t in admin_call(b.endpoint(0), "ListTopics")["topics"]]
        assert run("topic", "status", "OnlyB", "--endpoint", a.endpoint(0)).exit_code == 1

        b.kill_all()
        r = run("topic", "status", "S2", "--endpoint", a.endpoint(0))
        assert r.exit_code == 1 and "could not reach broker group(s) b" in r.output, r.output
        r = run("group", "list", "--endpoint", a.endpoint(0))
        assert r.exit_code == 1 and "could not reach broker group(s) b" in r.output, r.output
        r = run("topic", "delete", "S2", "--yes", "--endpoint", a.endpoint(0))
        assert r.exit_code == 1 and "not deleted everywhere" in r.output, r.output
        assert "S2" in json.loads(run("status", "--cluster", "--json", "--endpoint", a.endpoint(0)).output)["topics"]
    finally:
        a.kill_all()
        b.kill_all()
