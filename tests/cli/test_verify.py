"""tidemq.cli.verify: `tidemq verify` on a stopped store: exit 1 with a report for a damaged record
(after a clean stop, and after a crash with an unreadable checkpoint), exit 2 for a store a broker
holds. (A healthy store: tests/cli/test_demo.py.)"""

import json
import os

from ..support.cli import SMALL_STORE, run


def test_verify_reports_corruption(tmp_path):
    root = str(tmp_path / "s")
    assert run("demo", "--root", root, "--count", "500", "--size", "100", env=SMALL_STORE).exit_code == 0
    seg = os.path.join(root, "commitlog", "0" * 20)
    with open(seg, "r+b") as f:        # flip a byte inside the body of the 10th record
        f.seek(10 * 250 + 120)
        b = f.read(1)
        f.seek(10 * 250 + 120)
        f.write(bytes([b[0] ^ 0xFF]))
    r = run("verify", "--root", root, env=SMALL_STORE)
    # the store was shut down cleanly: normal recovery keeps the log and verify finds the bad record
    assert r.exit_code == 1, r.output
    assert "problem" in r.output


def test_verify_after_a_crash_with_an_unreadable_checkpoint_reports_the_damage(tmp_path):
    """Issue 12: abort file, empty checkpoint, a flipped record in the first of several segments:
    nothing is cut, and verify names the damage (exit 1, never "OK")."""
    root = str(tmp_path / "s")
    assert run("demo", "--root", root, "--count", "4000", "--size", "400", env=SMALL_STORE).exit_code == 0
    assert len([n for n in os.listdir(os.path.join(root, "commitlog")) if n.isdigit()]) >= 2
    with open(os.path.join(root, "commitlog", "0" * 20), "r+b") as f:
        f.seek((1 << 19) + 7)
        old = f.read(64)
        f.seek((1 << 19) + 7)
        f.write(bytes(b ^ 0xFF for b in old))
    open(os.path.join(root, "abort"), "wb").close()
    open(os.path.join(root, "checkpoint"), "wb").close()
    r = run("verify", "--root", root, "--json", env=SMALL_STORE)
    assert r.exit_code == 1, r.output
    rep = json.loads(r.output)
    assert not rep["ok"] and rep["damaged_regions"] >= 1
    assert rep["records"] >= 4000 - 2, "every record after the damage is still in the log"


def test_verify_on_locked_store_fails_clearly(tmp_path):
    from tidemq.store import MessageStore, StoreConfig
    root = str(tmp_path / "s")
    s = MessageStore(StoreConfig(root_dir=root, segment_size_bytes=1 << 20, index_slots=100,
                                 index_entries=400)).start()
    try:
        r = run("verify", "--root", root, env=SMALL_STORE)
        assert r.exit_code == 2
        assert "in use by another process" in r.output
    finally:
        s.shutdown()
