"""Cleanup on real files, in a process of its own: a head segment a reader still holds when the
cleaner takes it out of service loses its name at once (the reader reads on through its mapping),
so neither a kill -9 nor a clean shutdown with the reader still holding it brings it back at the
next start, its records under queues that had moved past them."""

import json
import os
import signal
import subprocess
import sys

import pytest

from tidemq.store import GetStatus, MessageStore

from ..support.held_segment_child import TOPIC, config
from ..support.wait import PATIENCE_S

ROOT_OF_TESTS = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_segment_held_when_the_process_ends_does_not_come_back(tmp_path, sig):
    root = str(tmp_path / "store")
    p = subprocess.Popen([sys.executable, "-m", "tests.support.held_segment_child", root],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT_OF_TESTS,
                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        line = p.stdout.readline()
        assert line, f"the child ended: {p.stderr.read()}"
        said = json.loads(line)
        assert said["out_of_service"] == [said["path"]]
        assert not os.path.exists(said["path"]), "a segment out of service keeps its name while held"
        assert said["reads_on"], "the reader holding the segment no longer reads its records"
        with open(f"/proc/{p.pid}/maps") as f:
            assert f"{said['path']} (deleted)" in f.read(), "the holder's mapping of the segment is gone"
    finally:
        p.send_signal(sig)
        err = p.stderr.read()
        p.wait(timeout=PATIENCE_S)
    assert p.returncode == (-signal.SIGKILL if sig is signal.SIGKILL else 128 + signal.SIGTERM), err
    store = MessageStore(config(root)).start()
    try:
        assert store.recovery.abnormal is (sig is signal.SIGKILL)
        assert said["path"] not in [m.path for m in store.segments.segments], "the segment came back"
        assert not os.path.exists(said["path"])
        assert store.commitlog_min_offset >= said["end_offset"]
        for q, mn in said["queue_min"].items():
            assert store.min_offset(TOPIC, int(q)) == mn, f"queue {q}: minimum {mn} -> {store.min_offset(TOPIC, int(q))}"
            g = store.get("g", TOPIC, int(q), mn)
            assert g.status is GetStatus.FOUND and g.messages[0].queue_offset == mn
        report = store.check()
        assert report.ok, report.problems[:5]
    finally:
        store.shutdown()
