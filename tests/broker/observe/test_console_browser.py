"""The cluster console through real parts: three broker processes electing their leader on a real
ZooKeeper, under a chroot and with digest credentials (--coordinator digest:USER@HOST/chroot, the
password in TIDEMQ_COORDINATOR_PASSWORD), their status pages read in a real headless Chromium
(Debian's chromium). Before the kill a follower's page is neutral (writes go to the leader) and the
group healthy; after the leader is killed with SIGKILL a survivor's page shows the killed member
down (red, with when it was last seen), the new leader and since when, the coordinator's session
with the timeout it granted; its metrics count the member down (member_up 0, members{state="down"}
1) and the leader change; `tidemq status --cluster` lists the member down and exits 1. The group's
nodes in ZooKeeper are closed to a client without the credentials. A screenshot of the new leader's
page is written (with CLUSTER_CONSOLE_SCREENSHOT=<path> copied there: docs/cluster-console.png)."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tidemq.client import Producer

from tests.support import browser
from tests.support.brokers import REPO, free_ports
from tests.support.group import Group
from tests.support.scrape import scrape
from tests.support.wait import wait_until
from tests.support.zookeeper import zookeeper  # noqa: F401  (fixture)

SCREENSHOT_TO = "CLUSTER_CONSOLE_SCREENSHOT"
PASSWORD = "console-secret"


def page(exe: str, port: int) -> str:
    return browser.dom(exe, f"http://127.0.0.1:{port}/")


def test_a_three_member_group_after_a_kill(tmp_path, zookeeper):  # noqa: F811
    exe = browser.chromium_path()
    metrics = free_ports(3)
    g = Group(str(tmp_path), 3, coordinator=f"digest:tidemq@{zookeeper}/console", mode="SYNC",
              env={"TIDEMQ_COORDINATOR_PASSWORD": PASSWORD, "TIDEMQ_STATUS_SAMPLE_INTERVAL_S": "0.2"})
    try:
        for i in range(3):
            g.start(i, env={"TIDEMQ_METRICS_PORT": str(metrics[i])})
        leader = g.wait_all_in_sync()
        others = [i for i in range(3) if i != leader]
        with Producer(g.endpoint(leader)) as p:
            assert all(r.ok for r in p.send_batch("Console", [b"m%d" % i for i in range(50)]))
        follower = others[0]
        before = wait_until(lambda: (lambda d: d if d.count('<tr class="follower">') == 2 else None)(
            page(exe, metrics[follower])), "the follower's page to list both followers")
        assert re.search(r'<div id="verdict" class="following">Follower: writes go to the leader', before)
        assert 'id="group-health" class="ok"' in before
        assert f'<tr class="leader"><td>g-{leader}</td>' in before
        assert "timeout granted 1500 ms (asked 1500 ms)" in before

        g.kill(leader)
        new = g.wait_leader(exclude={leader})
        survivor = next(i for i in others if i != new)
        after = wait_until(lambda: (lambda d: d if 'class="member_down"' in d and f'<tr class="leader"><td>g-{new}'
                                    in d else None)(page(exe, metrics[new])),
                           "the new leader's page to show the member killed down")
        assert re.search(rf'<tr class="down"><td>g-{leader}</td><td>127\.0\.0\.1:{g.ports[leader]}</td><td>down</td>',
                         after)
        assert re.search(r'<div id="verdict" class="accepted">', after)
        assert re.search(r"leader since [\d.]+ (s|min) ago; [1-9]\d* leader change", after)
        assert f"g-{leader} down" in after
        shot = str(tmp_path / "cluster-console.png")
        browser.screenshot(exe, f"http://127.0.0.1:{metrics[new]}/", shot, size="1100,1500")
        with open(shot, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        if os.environ.get(SCREENSHOT_TO):
            shutil.copyfile(shot, os.environ[SCREENSHOT_TO])

        m = wait_until(lambda: (lambda s: s if s.get(("tidemq_replication_member_up",
                                                       (("group", "g"), ("member", f"g-{leader}")))) == 0 else None)(
            scrape(metrics[survivor])), "the survivor's metrics to count the member down")
        assert m[("tidemq_replication_members", (("group", "g"), ("state", "down")))] == 1
        assert m[("tidemq_replication_members", (("group", "g"), ("state", "leader")))] == 1
        assert m[("tidemq_replication_leader_changes_total", (("group", "g"),))] >= 1
        assert m[("tidemq_coordinator_connected", (("group", "g"),))] == 1
        assert m[("tidemq_coordinator_session_timeout_seconds", (("group", "g"), ("kind", "granted")))] == 1.5

        r = subprocess.run([sys.executable, "-m", "tidemq.cli.main", "status", "--cluster", "--json", "--endpoint",
                            g.endpoint(survivor)], capture_output=True, text=True, cwd=REPO, timeout=120,
                           env={**os.environ, "TIDEMQ_METRICS_PORT": "0"})
        assert r.returncode == 1, r.stderr
        c = json.loads(r.stdout)
        console = c["consoles"]["g"]
        assert console["health"] == "member_down" and console["down"] == [f"g-{leader}"]
        assert console["seen_by"] == f"g-{new}", "asked of the group's leader"
        assert console["coordinator_session"]["session_timeout_ms_granted"] == 1500

        # the group's nodes are the credentials' only: a client without them is refused
        from kazoo.client import KazooClient
        from kazoo.exceptions import NoAuthError
        zk = KazooClient(hosts=zookeeper, timeout=10)
        zk.start(timeout=60)
        try:
            assert zk.exists("/console/groups/g/epoch") is not None
            with pytest.raises(NoAuthError):
                zk.get("/console/groups/g/epoch")
        finally:
            zk.stop()
            zk.close()
    finally:
        g.kill_all()
