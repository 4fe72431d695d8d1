"""Several broker groups, one cluster: a topic's queues spread over two groups in ZooKeeper; the
official client (given both groups' leader ports), tidemq.client and the route all use the whole
cluster (and a push consumer's assignment names both groups); each group's store holds only the
queues it owns; `tidemq status --cluster` shows it.

A feature across modules, kept whole: it tests broker/replication/coordinator.py (the topology),
node.py (topics applied, cluster routes), routes.py, and cli/status.py (--cluster)."""

import json
import os
import subprocess
import sys

import grpc

from tidemq.client import Producer, PullConsumer
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.brokers import REPO, admin_call
from ...support.group import Group
from ...support.official import msg
from ...support.wait import wait_until
from ...support.zookeeper import zookeeper  # noqa: F401  (fixture)


def test_a_topic_spread_over_two_groups(tmp_path, zookeeper, clients):  # noqa: F811
    a = Group(str(tmp_path), 1, coordinator=zookeeper, mode="ASYNC", name="a")
    b = Group(str(tmp_path), 1, coordinator=zookeeper, mode="ASYNC", name="b")
    try:
        a.start_all()
        b.start_all()
        a.wait_leader()
        b.wait_leader()
        r = admin_call(a.endpoint(0), "CreateTopic", {"name": "Spread", "queues": 4, "groups": ["a", "b"]})
        assert r["ok"] and r["owners"] == {"a": [0, 2], "b": [1, 3]}

        def routed():
            with PullConsumer(b.endpoint(0)) as c:
                return c.queue_count("Spread") == 4
        wait_until(routed, "the spread topic known to both groups")
        for g in (a, b):                                 # push consumers: one "any queue" assignment per group
            with grpc.insecure_channel(g.endpoint(0)) as ch:
                r = sgrpc.MessagingServiceStub(ch).QueryAssignment(spb.QueryAssignmentRequest(
                    topic=pb.Resource(name="Spread"), group=pb.Resource(name="G")), timeout=30)
            assert r.status.code == Code.OK, r.status
            assert {(x.message_queue.broker.name, x.message_queue.id) for x in r.assignments} == {("a", -1), ("b", -1)}
        producer, _ = clients
        p = producer(f"{a.official_endpoints};{b.official_endpoints}", ["Spread"])
        for i in range(40):
            p.send(msg("Spread", b"official%d" % i))
        with Producer(a.endpoint(0)) as tp:
            for i in range(10):
                assert all(x.ok for x in tp.send_batch("Spread", [b"fast%d-%d" % (i, j) for j in range(5)]))
        with PullConsumer(a.endpoint(0)) as c:           # one endpoint, the whole cluster
            got = []
            for q in range(c.queue_count("Spread")):
                n = c.query_offset("Spread", q, "END")
                got += [bytes(m.body) for m in c.pull_records("Spread", q, 0).messages()] if n else []
        assert sorted(got) == sorted([b"official%d" % i for i in range(40)] +
                                     [b"fast%d-%d" % (i, j) for i in range(10) for j in range(5)])
        per_group = {g.name: [t for t in admin_call(g.endpoint(0), "ListTopics")["topics"] if t["topic"] == "Spread"]
                     for g in (a, b)}
        for name, owned in (("a", {0, 2}), ("b", {1, 3})):
            queues = per_group[name][0]["queues"]
            assert all(q["max_offset"] == 0 for q in queues if q["id"] not in owned)
            assert all(q["max_offset"] > 0 for q in queues if q["id"] in owned)
        out = subprocess.run([sys.executable, "-m", "tidemq.cli.main", "status", "--cluster", "--json", "--endpoint",
                              b.endpoint(0)], capture_output=True, text=True, cwd=REPO,
                             env={**os.environ, "TIDEMQ_METRICS_PORT": "0"}, timeout=120)
        cluster = json.loads(out.stdout)
        assert set(cluster["groups"]) == {"a", "b"} and cluster["topics"]["Spread"]["owners"]["b"] == [1, 3]
    finally:
        a.kill_all()
        b.kill_all()
