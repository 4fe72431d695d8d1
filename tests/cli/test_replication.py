"""tidemq.cli.replication: `tidemq replication status|promote|follow` against a broker in no group
(said, refused: exit 1), a broker that does not answer (exit 2), and a static group of two whose
follower is promoted by hand and whose old leader then follows it. (The cut of a diverged old
leader after a promotion: tests/broker/replication/test_static_e2e.py.)"""

import json

import pytest

from ..support.cli import run
from ..support.group import running_group
from ..support.wait import wait_until


def test_a_broker_in_no_group_says_so_and_refuses_a_failover(broker):
    ep = ("--endpoint", broker.endpoint)
    r = run("replication", "status", *ep)
    assert r.exit_code == 0 and "in no broker group" in r.output
    r = run("replication", "status", "--json", *ep)
    assert r.exit_code == 0 and json.loads(r.output) is None
    r = run("replication", "promote", *ep)
    assert r.exit_code == 1 and "in no broker group" in r.output
    r = run("replication", "follow", "--leader", "127.0.0.1:2", *ep)
    assert r.exit_code == 1 and "in no broker group" in r.output


def test_a_broker_cannot_be_told_to_follow_itself():
    r = run("replication", "follow", "--endpoint", "127.0.0.1:1", "--leader", "127.0.0.1:1")
    assert r.exit_code == 1 and "cannot follow itself" in r.output


@pytest.mark.parametrize("command", [["status"], ["promote"], ["follow", "--leader", "127.0.0.1:2"]])
def test_a_broker_that_does_not_answer_is_exit_2(command):
    r = run("replication", *command, "--endpoint", "127.0.0.1:1")
    assert r.exit_code == 2 and "UNAVAILABLE" in r.output, r.output


@pytest.fixture
def pair(tmp_path):
    with running_group(str(tmp_path), 2, mode="ASYNC") as g:
        yield g


def test_status_then_promote_the_follower_and_the_old_leader_follows(pair):
    g = pair
    st = json.loads(run("replication", "status", "--json", "--endpoint", g.endpoint(0)).output)
    assert st["role"] == "leader" and [f["member"] for f in st["followers"]] == ["g-1"]
    r = run("replication", "status", "--endpoint", g.endpoint(1))
    assert r.exit_code == 0 and "follower" in r.output, r.output

    r = run("replication", "promote", "--endpoint", g.endpoint(1), "--followers", g.endpoint(0))
    assert r.exit_code == 0, r.output
    epoch = st["epoch"] + 1
    assert f"{g.endpoint(1)} leads, epoch {epoch}" in r.output and f"{g.endpoint(0)} follows {g.endpoint(1)}" in r.output
    new = json.loads(run("replication", "status", "--json", "--endpoint", g.endpoint(1)).output)
    assert new["role"] == "leader" and new["epoch"] == epoch
    wait_until(lambda: g.status(0) and g.status(0)["role"] == "follower" and g.status(0)["leader"] == g.endpoint(1),
               "the old leader follows the new one")
    g.wait_in_sync(1, [0])
