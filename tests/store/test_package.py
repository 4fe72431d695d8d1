"""``tidemq.store``'s public names load on first use: importing the codec alone stays cheap, and
every name the package exported is still there."""

import json
import subprocess
import sys

import tidemq.store as store


def test_every_public_name_resolves():
    for name in store.__all__:
        assert getattr(store, name).__name__ == name
    assert set(store.__all__) <= set(dir(store))


def test_importing_the_codec_does_not_load_the_engine():
    code = "import json, sys, tidemq.store.codec; print(json.dumps(sorted(sys.modules)))"
    mods = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                     timeout=120).stdout)
    assert not [m for m in mods if m in ("tidemq.store.store", "tidemq.store.types", "numpy", "pyarrow")]
