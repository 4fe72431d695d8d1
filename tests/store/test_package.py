"""``tidemq.store``'s public names load on first use: importing tidemq.store alone stays
cheap, every name the package exported is still there, and the record format (tidemq.record) needs no
part of the store."""

import json
import subprocess
import sys

import tidemq.store as store


def test_every_public_name_resolves():
    for name in store.__all__:
        assert getattr(store, name).__name__ == name
    assert set(store.__all__) <= set(dir(store))


def loaded_after(statement: str) -> list[str]:
    code = f"import json, sys; {statement}; print(json.dumps(sorted(sys.modules)))"
    return json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                     timeout=120).stdout)


def test_the_record_codec_needs_no_part_of_the_store():
    mods = loaded_after("import tidemq.record.codec")
    assert not [m for m in mods if m.startswith("tidemq.store") or m in ("numpy", "pyarrow")]


def test_the_config_loads_the_layout_not_the_store():
    mods = loaded_after("import tidemq.config")
    assert "tidemq.layout" in mods
    assert not [m for m in mods if m.startswith("tidemq.store") or m in ("numpy", "pyarrow")]
