"""Importing the client loads the protocol and the record format only: never the broker, the
store (not even a module of it), numpy or pyarrow (a fresh interpreter, so nothing else was imported before)."""

import json
import os
import subprocess
import sys

FORBIDDEN = ("tidemq.broker", "tidemq.store", "numpy", "pyarrow")


def loaded_after(tmp_path, statement: str) -> list[str]:
    code = f"import json, sys; {statement}; print(json.dumps(sorted(sys.modules)))"
    env = dict(os.environ, HOME=str(tmp_path))           # the official client package logs under ~/logs
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_client_loads_neither_broker_nor_engine(tmp_path):
    mods = loaded_after(tmp_path, "import tidemq.client")
    bad = [m for m in mods if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert bad == []
    assert "tidemq.protocol.stubs" in mods and "tidemq.record.codec" in mods


def test_the_protocol_loads_neither_side(tmp_path):
    mods = loaded_after(tmp_path, "import tidemq.protocol.admin, tidemq.protocol.pull_frame, "
                                  "tidemq.protocol.send_frame, tidemq.protocol.signing, tidemq.protocol.stubs")
    assert [m for m in mods if m.startswith(("tidemq.broker", "tidemq.client", "tidemq.store"))] == []
