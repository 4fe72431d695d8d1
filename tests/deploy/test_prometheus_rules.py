"""deploy/prometheus/tidemq-rules.yml through Debian's promtool: the rules load (`check rules`), and
their unit tests (tidemq-rules.test.yml: a disk above 85 % for 5 minutes, a group without a leader,
a member down, writes refused, sends held, a broker down) pass (`test rules`); every tidemq metric
the rules and the Grafana dashboard name is one the broker exports (metrics.py)."""

import json
import os
import re

import pytest

from tests.support import prometheus
from tests.support.brokers import REPO

METRICS_PY = os.path.join(REPO, "src", "tidemq", "broker", "observe", "metrics.py")
DASHBOARD = os.path.join(REPO, "deploy", "grafana", "tidemq.json")


@pytest.fixture(scope="module", autouse=True)
def promtool_installed():
    prometheus.require()


def test_promtool_checks_the_rules():
    r = prometheus.promtool("check", "rules", prometheus.RULES)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_promtool_unit_tests_of_the_rules_pass():
    r = prometheus.promtool("test", "rules", os.path.basename(prometheus.RULES_TEST))
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_unit_tests_cover_the_alerts_the_issue_names():
    text = open(prometheus.RULES_TEST).read()
    for alert in ("TidemqDiskAbove85", "TidemqGroupWithoutLeader", "TidemqMemberDown", "TidemqWritesRefused"):
        assert f"alertname: {alert}" in text, alert


def test_a_broken_rule_fails_the_unit_tests(tmp_path):
    """The unit tests can fail: with the disk threshold moved to 95 % the 85 % case does not fire."""
    rules = open(prometheus.RULES).read().replace("(tidemq_disk_used_ratio) > 0.85", "(tidemq_disk_used_ratio) > 0.95")
    (tmp_path / "tidemq-rules.yml").write_text(rules)
    (tmp_path / "tidemq-rules.test.yml").write_text(open(prometheus.RULES_TEST).read())
    r = prometheus.promtool("test", "rules", "tidemq-rules.test.yml", cwd=str(tmp_path))
    assert r.returncode != 0
    assert "TidemqDiskAbove85" in r.stdout + r.stderr


def _exported() -> set[str]:
    """Family names metrics.py yields (a counter's samples add _total, a histogram's _bucket ...)."""
    return set(re.findall(r'"(tidemq_[a-z0-9_]+|rocketmq_[a-z0-9_]+)"', open(METRICS_PY).read()))


def _named(text: str) -> set[str]:
    names = set()
    for n in re.findall(r"\b(tidemq_[a-z0-9_]+)", text):
        names.add(re.sub(r"_(total|bucket|count|sum)$", "", n))
    return names


def test_every_metric_the_rules_and_dashboard_name_is_exported():
    exported = _exported()
    rules = _named(open(prometheus.RULES).read())
    dash = json.load(open(DASHBOARD))
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", ())]
    assert exprs
    named = rules | _named("\n".join(exprs))
    assert named - exported == set()


def test_the_dashboard_has_the_panels_the_issue_names():
    dash = json.load(open(DASHBOARD))
    assert dash["uid"] == "tidemq"
    exprs = "\n".join(t["expr"] for p in dash["panels"] for t in p.get("targets", ()))
    for metric in ("tidemq_writes_refused", "tidemq_disk_used_ratio", "tidemq_disk_forecast_seconds",
                   "tidemq_messages_put_total", "tidemq_messages_got_total", "tidemq_consumer_lag_messages",
                   "tidemq_replication_members", "tidemq_replication_lag_bytes"):
        assert metric in exprs, metric
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:                    # panels never overlap on Grafana's 24-column grid
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24
    boxes = [(p["gridPos"]["x"], p["gridPos"]["y"], p["gridPos"]["w"], p["gridPos"]["h"]) for p in dash["panels"]]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not (a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]), (a, b)


def test_the_example_prometheus_configuration_loads_with_the_rules(tmp_path):
    conf = open(os.path.join(prometheus.RULES_DIR, "prometheus.yml")).read()
    token = tmp_path / "tidemq-metrics.token"
    token.write_text("t")
    assert "/etc/prometheus/tidemq-metrics.token" in conf
    (tmp_path / "prometheus.yml").write_text(conf.replace("/etc/prometheus/tidemq-metrics.token", str(token)))
    (tmp_path / "tidemq-rules.yml").write_text(open(prometheus.RULES).read())
    r = prometheus.promtool("check", "config", "prometheus.yml", cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "10 rules found" in r.stdout
