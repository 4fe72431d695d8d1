"""The parent of `serve --processes N` on its own: whose root it takes, a member that exits during the
start, and a member that keeps dying (stand-in members: a small script that says the ready line and
exits when the test says so)."""

import os
import stat
import sys

import pytest

from tidemq.broker.multi import MEMBERS_FILE, multi_dir, supervisor
from tidemq.broker.multi.siblings import MultiError, read_json
from tidemq.broker.multi.supervisor import Supervisor, member_ports

# a stand-in for `python -m tidemq.cli.main serve ...`: says it is ready on port 4000 + its index (from
# --member I/N/PID), then exits with 3 once the file DIE exists next to it
FAKE = """#!{python}
import os, sys, time
i = int(sys.argv[sys.argv.index("--member") + 1].split("/")[0])
print(f"tidemq broker ready on 127.0.0.1:{{4000 + i}} (member)", flush=True)
while not os.path.exists({die!r}):
    time.sleep(0.01)
sys.exit(3)
"""


def fake_member(tmp_path, die: str) -> str:
    path = str(tmp_path / "fake-member")
    with open(path, "w") as fh:
        fh.write(FAKE.format(python=sys.executable, die=die))
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def test_a_root_holding_a_store_is_refused(tmp_path):
    os.makedirs(tmp_path / "root" / "commitlog")
    with pytest.raises(MultiError, match="one broker's store"):
        Supervisor(str(tmp_path / "root"), 2, "127.0.0.1", 0, 0, []).claim_root()


def test_one_parent_per_root_and_the_root_keeps_its_n(tmp_path):
    root = str(tmp_path / "root")
    first = Supervisor(root, 2, "127.0.0.1", 0, 0, [])
    first.claim_root()
    try:
        with pytest.raises(MultiError, match="another"):
            Supervisor(root, 2, "127.0.0.1", 0, 0, []).claim_root()
    finally:
        first.release_root()
    with open(os.path.join(multi_dir(root), MEMBERS_FILE), "w") as fh:
        fh.write('{"processes": 2, "members": []}')
    with pytest.raises(MultiError, match="--processes 2"):
        Supervisor(root, 3, "127.0.0.1", 0, 0, []).claim_root()
    Supervisor(root, 3, "127.0.0.1", 0, 0, []).release_root()


def test_a_member_exiting_during_the_start_stops_the_start(tmp_path):
    die = str(tmp_path / "die")
    open(die, "w").close()                      # members exit at once (maybe before or after their ready line)
    sup = Supervisor(str(tmp_path / "root"), 2, "127.0.0.1", 0, 0, [], [fake_member(tmp_path, die)], lambda s: None)
    sup.claim_root()
    try:
        started = sup.start()
        if started:                             # both said ready before either exit was seen: then they die
            assert sup.watch() == 1             # in watch, over and over: stopped after RESTARTS_MAX
    finally:
        sup.stop()
        sup.release_root()
    assert all(m.proc.poll() is not None for m in sup.members)


def test_a_member_that_keeps_dying_is_restarted_then_everything_stops(tmp_path, monkeypatch):
    monkeypatch.setattr(supervisor, "RESTART_WINDOW_S", 1e9)     # every restart counts, however slow
    die = str(tmp_path / "die")
    root = str(tmp_path / "root")
    sup = Supervisor(root, 2, "127.0.0.1", 0, 0, [], [fake_member(tmp_path, die)], lambda s: None)
    sup.claim_root()
    try:
        assert sup.start()
        doc = read_json(os.path.join(multi_dir(root), MEMBERS_FILE))
        assert [m["endpoint"] for m in doc["members"]] == ["127.0.0.1:4000", "127.0.0.1:4001"]
        first = [m.proc.pid for m in sup.members]
        open(die, "w").close()
        assert sup.watch() == 1
        # both die over and over: whichever died RESTARTS_MAX + 1 times first stopped everything
        worst = max(sup.members, key=lambda m: len(m.restarts))
        assert len(worst.restarts) == supervisor.RESTARTS_MAX + 1
        assert worst.proc.pid != first[worst.index]
    finally:
        sup.stop()
        sup.release_root()
    assert all(m.proc.poll() is not None for m in sup.members)



def test_member_ports_keep_metrics_off_the_members_ports():
    assert member_ports(8081, 8082, 2) == (8081, 8083)        # the defaults: metrics after 8081, 8082
    assert member_ports(8081, 9000, 4) == (8081, 9000)
    assert member_ports(0, 8082, 2) == (0, 8082)              # any free ports: nothing to keep apart
    assert member_ports(8081, 0, 2) == (8081, 0)
    with pytest.raises(MultiError, match="65535"):
        member_ports(65535, 0, 2)
