"""A real Prometheus (Debian's package) scraping a real broker whose metrics port needs a bearer
token (metrics_auth_token): the metrics are read back through Prometheus's query API, the target
scraped without the token is down (401), the tidemq rules load, and every expression of the
Grafana dashboard is one Prometheus accepts and answers."""

import json
import os

import pytest

from tidemq.client import Producer

from tests.support import prometheus
from tests.support.brokers import REPO, SMALL, free_port
from tests.support.wait import wait_until

TOKEN = "scrape-token-e2e"
T = "watched"


@pytest.fixture
def prom_and_broker(broker_factory):
    prometheus.require()
    b = broker_factory(env={**SMALL, "TIDEMQ_METRICS_AUTH_TOKEN": TOKEN},
                       args=["--auto-create-topics", "--metrics-port", str(free_port())])
    target = f"127.0.0.1:{b.metrics_port}"
    p = prometheus.PrometheusServer({"tidemq": ([target], TOKEN), "tidemq-no-token": ([target], None)})
    try:
        yield p, b, target
    finally:
        p.stop()
        assert b.stop() == 0


def test_prometheus_scrapes_a_broker_with_its_token_and_answers_a_tidemq_metric(prom_and_broker):
    prom, broker, target = prom_and_broker
    up = wait_until(lambda: prom.query('tidemq_up{job="tidemq"}'), "Prometheus to scrape tidemq_up")
    assert up[0]["metric"]["instance"] == target
    assert up[0]["value"][1] == "1"
    with Producer(broker.endpoint) as p:
        assert all(r.ok for r in p.send_batch(T, [b"m%d" % i for i in range(25)]))
    put = wait_until(lambda: [r for r in prom.query(f'tidemq_messages_put_total{{job="tidemq", topic="{T}", '
                                                    'status="OK"}') if r["value"][1] == "25"],
                     "Prometheus to see the 25 messages put")
    assert put[0]["metric"]["instance"] == target
    alias = wait_until(lambda: prom.query(f'rocketmq_messages_in_total{{job="tidemq", topic="{T}"}}'),
                       "the RocketMQ 5 alias")
    assert alias[0]["value"][1] == "25"
    # the same port scraped without the token: refused, so that target is down
    targets = wait_until(lambda: (lambda ts: ts if {t["labels"]["job"]: t["health"] for t in ts}.get(
        "tidemq-no-token") == "down" else None)(prom.api("targets")["activeTargets"]),
        "the scrape without the token to fail")
    health = {t["labels"]["job"]: t["health"] for t in targets}
    assert health["tidemq"] == "up"
    assert prom.query('up{job="tidemq-no-token"}')[0]["value"][1] == "0"
    # the rules file loads, every rule healthy (evaluated without error)
    groups = wait_until(lambda: (lambda gs: gs if gs and all(r.get("health") == "ok" for g in gs for r in g["rules"])
                                 else None)(prom.api("rules")["groups"]), "the tidemq rules to be evaluated")
    names = {r["name"] for g in groups for r in g["rules"]}
    assert {"TidemqDiskAbove85", "TidemqGroupWithoutLeader", "TidemqMemberDown", "TidemqWritesRefused"} <= names
    # every dashboard expression parses and runs (template variables as "All")
    dash = json.load(open(os.path.join(REPO, "deploy", "grafana", "tidemq.json")))
    answered = 0
    for panel in dash["panels"]:
        for t in panel.get("targets", ()):
            expr = (t["expr"].replace("$__rate_interval", "1m").replace("$instance", ".*")
                    .replace("$broker_group", ".*").replace("$group", ".*"))
            prom.query(expr)                    # 400 (and an assertion) on an expression it cannot parse
            answered += 1
    assert answered >= 15
    rate = wait_until(lambda: prom.query(f'sum by (status) (rate(tidemq_messages_put_total{{job="tidemq", '
                                         f'instance="{target}"}}[1m]))'), "a put rate")
    assert {r["metric"]["status"] for r in rate} == {"OK"}
