"""The broker's HTTP port against a real broker process: health, readiness, a Prometheus scrape
whose numbers move under load, the status as JSON and the page; a port in use is an error."""

import json
import socket
import subprocess
import sys

import pytest

from tidemq.client import Producer, PullConsumer
from tidemq.protocol.stubs import Code

from tests.support.brokers import REPO, SMALL, admin_call, free_port
from tests.support.scrape import get, scrape
from tests.support.wait import wait_until

T = "metered"


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
    with Producer(broker.endpoint) as p:        # sent again with their ids: answered, not stored twice
        again = p.send_batch(T, [b"m0", b"m1"], message_ids=[r.message_id for r in results[:2]])
    assert all(r.ok and r.duplicate for r in again)
    after = wait_until(lambda: (lambda m: m if m.get(("tidemq_flush_latency_seconds_count", ())) else None)(
        scrape(port)), "a commit-log flush in the histogram")
    assert after[("tidemq_messages_put_total", (("status", "OK"), ("topic", T)))] == 40
    assert after[("tidemq_messages_put_total", (("status", "DUPLICATE"), ("topic", T)))] == 2
    assert after[("tidemq_messages_got_total", (("status", "OK"), ("topic", T)))] == len(got.messages) > 0
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
    assert after[("tidemq_flush_latency_seconds_count", ())] >= 1
    assert after[("tidemq_writes_held", (("reason", ""),))] == 0


def test_a_refused_put_is_counted_by_its_status_and_a_hold_is_not_a_refusal(broker):
    """Sends held by the memory alarm: tidemq_writes_held{reason="MEMORY_ALARM"} 1 and
    tidemq_writes_refused stays 0 (the store refuses nothing); a send held past send_hold_ms_max is
    answered TOO_MANY_REQUESTS and counted so; once the alarm clears, sends are OK again."""
    port = broker.metrics_port
    with Producer(broker.endpoint) as p:
        assert all(r.ok for r in p.send_batch(T, [b"before"]))
        admin_call(broker.endpoint, "SetAlarmLimits", {"memory_high_watermark_bytes": 1 << 20})
        m = scrape(port)
        assert m[("tidemq_writes_held", (("reason", "MEMORY_ALARM"),))] == 1
        assert m[("tidemq_writes_refused", (("reason", ""),))] == 0, "held, not refused by the store"
        refused = p.send_batch(T, [b"held", b"then refused"])
        assert [r.code for r in refused] == [Code.TOO_MANY_REQUESTS] * 2
        admin_call(broker.endpoint, "SetAlarmLimits", {"memory_high_watermark_ratio": 0.9})
        assert all(r.ok for r in p.send_batch(T, [b"after"]))
    m = scrape(port)
    assert m[("tidemq_messages_put_total", (("status", "TOO_MANY_REQUESTS"), ("topic", T)))] == 2
    assert m[("tidemq_messages_put_total", (("status", "OK"), ("topic", T)))] == 2
    assert m[("tidemq_writes_held", (("reason", ""),))] == 0
    assert m[("tidemq_sends_refused_total", ())] >= 1
    with Producer(broker.endpoint) as p:        # a topic that does not exist: counted under topic ""
        assert [r.code for r in p.send_batch("no!such topic", [b"x"])] == [Code.ILLEGAL_TOPIC]
    assert scrape(port)[("tidemq_messages_put_total", (("status", "ILLEGAL_TOPIC"), ("topic", "")))] == 1


def test_status_json_and_page_show_the_verdict(broker):
    code, body = get(broker.metrics_port, "/status.json")
    st = json.loads(body)
    assert code == 200 and st["verdict"] == {"writes": "accepted", "reasons": []}
    assert st["endpoint"] == broker.endpoint and st["ready"] is True
    assert st["event_loop"] == "uvloop", "the default event loop (BrokerConfig.event_loop)"
    code, html = get(broker.metrics_port, "/")
    assert code == 200 and 'id="verdict" class="accepted"' in html and 'id="chart"' in html
    assert get(broker.metrics_port, "/nothing")[0] == 404


def test_the_broker_runs_on_asyncios_own_loop_when_configured(broker_factory):
    b = broker_factory(env={**SMALL, "TIDEMQ_EVENT_LOOP": "asyncio"}, args=["--auto-create-topics",
                                                                         "--metrics-port", str(free_port())])
    try:
        assert json.loads(get(b.metrics_port, "/status.json")[1])["event_loop"] == "asyncio"
        with Producer(b.endpoint) as p:
            assert all(r.ok for r in p.send_batch(T, [b"a", b"b"]))
    finally:
        assert b.stop() == 0


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


def listening_on(port: int) -> set[str]:
    """The addresses sockets listen on at ``port`` (/proc/net/tcp and tcp6; IPv4-mapped IPv6, as
    gRPC binds an IPv4 address, read as IPv4)."""
    out = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, p = local.split(":")
                if int(p, 16) != port or state != "0A":
                    continue
                raw = b"".join(bytes.fromhex(addr[i:i + 8])[::-1] for i in range(0, len(addr), 8))
                if len(raw) == 16 and raw[:12] == b"\0" * 10 + b"\xff\xff":
                    raw = raw[12:]
                out.add(socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw))
    return out


def test_the_metrics_port_binds_loopback_whatever_the_grpc_host(broker_factory):
    """metrics_host (default 127.0.0.1) decides where the page and /status.json are served, not
    the gRPC host (loopback addresses both, as tests bind)."""
    for _ in range(5):
        # (gRPC's port is the kernel's pick on 127.0.0.2, and may be the metrics port's number, bound on
        # 127.0.0.1 after it: then both addresses listen at that number and the check below cannot tell)
        b = broker_factory(env=SMALL, args=["--host", "127.0.0.2", "--metrics-port", str(free_port())])
        if b.port != b.metrics_port:
            break
        assert b.stop() == 0
    try:
        assert listening_on(b.metrics_port) == {"127.0.0.1"}
        assert listening_on(b.port) == {"127.0.0.2"}
        st = json.loads(get(b.metrics_port, "/status.json")[1])
        assert st["metrics_endpoint"] == f"127.0.0.1:{b.metrics_port}" and st["endpoint"] == f"127.0.0.2:{b.port}"
    finally:
        assert b.stop() == 0
    b = broker_factory(env=SMALL, args=["--metrics-host", "127.0.0.3", "--metrics-port", str(free_port())])
    try:
        assert listening_on(b.metrics_port) == {"127.0.0.3"}
    finally:
        assert b.stop() == 0


def test_a_protected_port_and_many_idle_connections(broker_factory):
    """With metrics_auth_token: Prometheus's bearer scrape works, no token is 401, /healthz stays open.
    1,000 idle connections against metrics_connections_max=32 cost the broker no thread each and no
    traceback, and the port answers again once they go."""
    import urllib.request
    b = broker_factory(env={**SMALL, "TIDEMQ_METRICS_AUTH_TOKEN": "scrape-token", "TIDEMQ_METRICS_CONNECTIONS_MAX": "32"},
                       args=["--metrics-port", str(free_port())])
    port = b.metrics_port

    def threads() -> int:
        with open(f"/proc/{b.proc.pid}/status") as f:
            return int(next(line for line in f if line.startswith("Threads:")).split()[1])
    try:
        assert get(port, "/metrics")[0] == 401 and get(port, "/healthz") == (200, "ok\n")
        req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": "Bearer scrape-token"})
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.status == 200 and b"tidemq_up 1.0" in r.read()
        before = threads()
        held = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(1000)]
        try:
            assert threads() <= before + 4, "no thread per connection"
        finally:
            for s in held:
                s.close()
        wait_until(lambda: _answers(port), "the port answers again")
    finally:
        assert b.stop() == 0
    err = b.proc.stderr.read()
    assert "Traceback" not in err and err.count("metrics_connections_max") <= 1, err[-3000:]


def _answers(port: int) -> bool | None:
    try:
        return get(port, "/healthz") == (200, "ok\n") or None
    except OSError:
        return None
