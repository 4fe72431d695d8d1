"""The broker's HTTP port against a real broker process: health, readiness, a Prometheus scrape
whose numbers move under load, the status as JSON and the page; a port in use is an error."""

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tidemq.client import Producer, PullConsumer

from tests.support.brokers import REPO, SMALL, free_port

T = "metered"


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(port: int) -> dict:
    """{(name, labels as a sorted tuple): value} of one scrape, parsed by prometheus-client."""
    code, text = get(port, "/metrics")
    assert code == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


@pytest.fixture
def broker(broker_factory):
    b = broker_factory(env=SMALL, args=["--auto-create-topics", "--metrics-port", str(free_port())])
    yield b
    assert b.stop() == 0


def test_health_readiness_and_a_scrape_that_moves_under_load(broker):
    port = broker.metrics_port
    assert get(port, "/healthz") == (200, "ok\n")
    assert get(port, "/readyz") == (200, "ready\n")
    before = scrape(port)
    assert before[("tidemq_up", ())] == 1
    assert before[("tidemq_writes_refused", (("reason", ""),))] == 0
    with Producer(broker.endpoint) as p:
        results = p.send_batch(T, [b"m%d" % i for i in range(40)])
    assert all(r.ok for r in results)
    queues = sorted({r.queue_id for r in results})
    with PullConsumer(broker.endpoint, group="readers") as c:
        got = c.pull(T, queues[0], 0, batch_size=1000)
        c.commit(T, queues[0], got.next_offset)
    after = scrape(port)
    assert after[("tidemq_messages_put_total", (("topic", T),))] == 40
    assert after[("tidemq_messages_got_total", (("topic", T),))] == len(got.messages) > 0
    assert after[("tidemq_bytes_in_total", ())] > before[("tidemq_bytes_in_total", ())]
    assert after[("tidemq_put_latency_seconds_count", ())] >= 1
    lag = {k[1]: v for k, v in after.items() if k[0] == "tidemq_consumer_lag_messages"}
    assert sum(lag.values()) == 40 - len(got.messages)
    assert lag[(("group", "readers"), ("queue", str(queues[0])), ("topic", T))] == 0
    dirs = [k for k in after if k[0] == "tidemq_disk_used_ratio"]
    assert dirs and all(0 < after[k] < 1 for k in dirs)
    for reason in ("expired", "space"):
        assert after[("tidemq_segments_deleted_total", (("reason", reason),))] == 0
    assert after[("tidemq_cleanup_not_freed_total", (("reason", "nothing-expired"),))] == 0


def test_status_json_and_page_show_the_verdict(broker):
    code, body = get(broker.metrics_port, "/status.json")
    st = json.loads(body)
    assert code == 200 and st["verdict"] == {"writes": "accepted", "reasons": []}
    assert st["endpoint"] == broker.endpoint and st["ready"] is True
    code, html = get(broker.metrics_port, "/")
    assert code == 200 and 'id="verdict" class="accepted"' in html and 'id="chart"' in html
    assert get(broker.metrics_port, "/nothing")[0] == 404


def test_a_metrics_port_in_use_is_a_start_up_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "tidemq.cli.main", "serve", "--root", str(tmp_path / "s"),
                            "--port", "0", "--metrics-port", str(taken)], capture_output=True, text=True,
                           timeout=120, cwd=REPO, env={**SMALL, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 1 and "ready" not in r.stdout
    assert f"cannot serve metrics on 127.0.0.1:{taken}" in r.stderr and "Traceback" not in r.stderr
