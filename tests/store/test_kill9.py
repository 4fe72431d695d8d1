"""kill -9 of a process writing with SYNC_FLUSH: every acknowledged message survives,
exactly once, and the store recovers by itself. Also SIGTERM: a clean shutdown.

Each kill comes after the child has acknowledged a seeded random number of messages (its
writers still writing), not after a time: the point in the writing where it lands varies, the
amount acknowledged does not depend on the machine's speed."""

import os
import random
import signal
import subprocess
import sys

from tidemq.store import GetStatus, MessageStore

from ..support.kill9_child import config
from ..support.wait import patience

KILLS = 10


def start_child(root, first_id, threads=4):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen([sys.executable, "-m", "tests.support.kill9_child", root, str(first_id), str(threads)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    line = p.stdout.readline()
    if line.strip() != "ready":
        p.kill()
        raise AssertionError(f"child did not start: {line!r} {p.stderr.read()}")
    return p


def read_acked(p, n: int) -> list[str]:
    """The child's first ``n`` lines (acknowledged puts), read as it prints them."""
    lines = []
    while len(lines) < n:
        line = p.stdout.readline()
        assert line, f"the child ended after {len(lines)} acknowledged puts: {p.stderr.read()}"
        lines.append(line)
    return lines


def end_child(p, sig, lines: list[str]) -> tuple[dict[int, int], str]:
    """Signal the child, read the rest of what it printed (through the same buffered stream the
    first lines came from: communicate() would read the pipe beneath it and lose, or cut, what
    readline() had buffered already); {id: commit-log offset} of every whole line, and stderr."""
    p.send_signal(sig)
    rest = p.stdout.read()
    err = p.stderr.read()
    p.wait(timeout=patience())
    acked = {}
    for line in (*lines, *rest.splitlines(keepends=True)):
        if line.endswith("\n") and line.strip():        # a put's line is written whole, or not at all
            i, off = line.split()
            acked[int(i)] = int(off)
    return acked, err


def read_all(root, keyed=()):
    """All messages of topic Kill9: id -> list of commit-log offsets (exactly once means one); each id
    of ``keyed`` found by its key through the index, at that offset, once."""
    store = MessageStore(config(root)).start()
    try:
        seen: dict[int, list[int]] = {}
        for q in range(store.queue_count("Kill9")):
            off = store.min_offset("Kill9", q)
            while True:
                g = store.get("t", "Kill9", q, off, max_count=32)
                if g.status is not GetStatus.FOUND:
                    assert g.status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE), g
                    break
                for m in g.messages:
                    seen.setdefault(int(m.body.split(b"|")[0]), []).append(m.commitlog_offset)
                off = g.next_offset
        report = store.check()
        assert report.ok, report.problems[:5]
        by_key = {i: [m.commitlog_offset for m in store.query_by_key("Kill9", f"id{i}")] for i in keyed}
        assert {i: offs for i, offs in by_key.items() if offs != seen.get(i)} == {}, "the index lost or moved some"
        return seen, store.recovery
    finally:
        store.shutdown()


def test_kill9_loses_no_acknowledged_message(tmp_path):
    root = str(tmp_path / "store")
    rng = random.Random(20261121)
    acked: dict[int, int] = {}
    next_id = 0
    recoveries = []
    for k in range(KILLS):
        p = start_child(root, next_id)
        try:
            lines = read_acked(p, rng.randint(20, 400))
        finally:
            got, _err = end_child(p, signal.SIGKILL, lines)
        acked.update(got)                            # every line was printed after its put returned PUT_OK
        seen, rec = read_all(root, acked)
        recoveries.append(rec)
        assert rec.abnormal, "a killed process leaves the abort file: recovery must be abnormal"
        lost = [i for i in acked if i not in seen]
        assert not lost, f"kill {k}: {len(lost)} acknowledged message(s) lost, e.g. {lost[:5]}"
        dup = [i for i, offs in seen.items() if len(offs) > 1]
        assert not dup, f"kill {k}: messages present more than once: {dup[:5]}"
        moved = [i for i in acked if seen[i][0] != acked[i]]
        assert not moved, f"kill {k}: messages at other offsets than acknowledged: {moved[:5]}"
        next_id = max(seen, default=0) + 100_000_000
    assert len(acked) >= 20 * KILLS


def test_sigterm_shuts_down_cleanly(tmp_path):
    """SIGTERM while the writers write: a clean shutdown keeps everything acknowledged."""
    root = str(tmp_path / "store")
    p = start_child(root, 0, threads=2)
    try:
        lines = read_acked(p, 50)
    finally:
        got, err = end_child(p, signal.SIGTERM, lines)
    assert p.returncode == 128 + signal.SIGTERM, err
    assert not os.path.exists(os.path.join(root, "abort")), "clean shutdown removes the abort file"
    acked = set(got)
    assert len(acked) >= 50
    seen, rec = read_all(root)
    assert not rec.abnormal
    assert acked <= set(seen)
