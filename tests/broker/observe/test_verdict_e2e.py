"""The one verdict when the store itself refuses writes, against a real broker on a real tmpfs
filled to the warning ratio (90 %): `disk --endpoint`, `alarms`, `status` say "refused" with the
reason and exit 1, `send` exits 1, /metrics has tidemq_writes_refused{reason=...} 1 and the
refused sends counted by status, the page shows the refusal, the forecast says "now" for 90 %;
space freed, writes are accepted again without a restart. Twice: a plain full disk (DISK_FULL),
and archive_before_delete with sealed segments the archive has not copied (ARCHIVE_PENDING)."""

import json
import os
import re

import pytest
from click.testing import CliRunner

from tidemq.cli.main import cli
from tidemq.client import Producer

from tests.support.brokers import SMALL, free_port
from tests.support.scrape import get, scrape
from tests.support.wait import wait_until

MIB = 1 << 20
T = "filling"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def used_percent(path: str) -> float:
    st = os.statvfs(path)
    return 100.0 * (st.f_blocks - st.f_bfree) / st.f_blocks


def fill_to(path: str, percent: float) -> str:
    ballast = os.path.join(path, "ballast")
    with open(ballast, "ab") as f:
        while used_percent(path) < percent:
            f.write(b"\0" * MIB)
            f.flush()
            os.fsync(f.fileno())
    return ballast


@pytest.mark.parametrize("reason", ["DISK_FULL", "ARCHIVE_PENDING"])
def test_a_store_refusal_is_one_verdict_in_every_view(env, can_mount, broker_factory, reason):
    root = env.tmpfs("root", 64)
    settings = {**SMALL, "TIDEMQ_CONSUME_QUEUE_UNITS_PER_SEGMENT": "1000", "TIDEMQ_CLEAN_RESOURCE_INTERVAL_MS": "200",
                "TIDEMQ_ALARM_CHECK_INTERVAL_MS_MAX": "200", "TIDEMQ_SEND_HOLD_MS_MAX": "200",
                "TIDEMQ_STATUS_SAMPLE_INTERVAL_S": "0.2"}
    if reason == "ARCHIVE_PENDING":
        settings["TIDEMQ_ARCHIVE_BEFORE_DELETE"] = "true"
    b = broker_factory(root, env=settings, args=["--auto-create-topics", "--metrics-port", str(free_port())])
    ep = ("--endpoint", b.endpoint)
    try:
        # ARCHIVE_PENDING: more than a segment (4 MiB), so one is sealed and waits for the archive
        n = 6000 if reason == "ARCHIVE_PENDING" else 50
        with Producer(b.endpoint) as p:
            for _ in range(0, n, 500):
                assert all(r.ok for r in p.send_batch(T, [b"x" * 1024] * min(500, n)))
        assert run("status", *ep).exit_code == 0
        ballast = fill_to(root, 90.5)

        def refused():
            st = json.loads(run("status", "--json", *ep).output)
            return st if st["verdict"]["writes"] == "refused" else None
        st = wait_until(refused, "the store to refuse writes")
        codes = [r["code"] for r in st["verdict"]["reasons"]]
        assert codes[0] == reason, codes
        assert st["disk"]["forecast"]["seconds_until_percent"]["90"] == 0
        assert st["disk"]["forecast"]["advice"].startswith("writes are refused now")

        for cmd in (["status"], ["alarms"], ["disk"]):
            r = run(*cmd, *ep)
            assert r.exit_code == 1, (cmd, r.output)
            assert "writes: refused" in r.output and f"{reason}: " in r.output, (cmd, r.output)
        r = run("disk", *ep)
        assert "90% now" in r.output and "writes are refused now" in r.output, r.output
        r = run("alarms", "--json", *ep)
        assert r.exit_code == 1 and json.loads(r.output)["verdict"]["reasons"][0]["code"] == reason
        r = run("disk", "--json", *ep)
        assert r.exit_code == 1 and json.loads(r.output)["flags"]["write_refusal"]

        r = run("send", T, "one more", *ep)
        assert r.exit_code == 1 and "TOO_MANY_REQUESTS" in r.output, r.output

        m = scrape(b.metrics_port)
        assert m[("tidemq_writes_refused", (("reason", reason),))] == 1
        assert ("tidemq_writes_refused", (("reason", ""),)) not in m
        assert m[("tidemq_messages_put_total", (("status", "TOO_MANY_REQUESTS"), ("topic", T)))] == 1
        assert m[("tidemq_disk_forecast_seconds", (("dir", "all"), ("ratio", "90")))] == 0

        code, page = get(b.metrics_port, "/")
        verdict = re.search(r'<div id="verdict" class="(\w+)">(.*?)</div>', page, re.S)
        assert code == 200 and verdict.group(1) == "refused" and "Writes refused" in verdict.group(2)
        assert f"{reason}: " in verdict.group(2)

        os.unlink(ballast)               # space again: writes come back by themselves, no restart
        wait_until(lambda: run("status", *ep).exit_code == 0, "writes to be accepted again")
        assert run("send", T, "after", *ep).exit_code == 0
    finally:
        assert b.stop() == 0
