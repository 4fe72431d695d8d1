"""tidemq.cli.demo: `tidemq demo` writes and reads messages through the embedded store and says
what it did; the store it leaves is whole."""

import json

from ..support.cli import SMALL_STORE, run


def test_demo_then_verify_ok(tmp_path):
    root = str(tmp_path / "s")
    r = run("demo", "--root", root, "--count", "2000", "--size", "100", "--json", env=SMALL_STORE)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output[r.output.index("{"):])
    assert doc["written"] == doc["read_back"] == 2000
    assert doc["found_by_key"] == 1
    r = run("verify", "--root", root, "--json", env=SMALL_STORE)
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["ok"] and rep["records"] == 2000 and rep["units"] == 2000
