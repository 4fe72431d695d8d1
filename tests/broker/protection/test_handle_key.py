"""The receipt-handle key on disk (protection/handle_key.py): checked, mirrored, never used damaged."""

import os

from tidemq import checked
from tidemq.broker.protection import handle_key
from tidemq.io import OsFileIO


def test_a_legacy_key_is_kept_and_rewritten_checked(tmp_path):
    path = str(tmp_path / "secret")
    key = os.urandom(32).hex().encode()
    with open(path, "wb") as f:
        f.write(key + b"\n")                            # written before the checked format
    fio = OsFileIO()
    assert handle_key.load(fio, path) == key
    assert checked.decode(open(path, "rb").read()) == {"key": key.decode()}
    assert handle_key.load(fio, path) == key


def test_every_copy_damaged_makes_a_new_key_and_keeps_the_damage_aside(tmp_path, caplog):
    path = str(tmp_path / "secret")
    fio = OsFileIO()
    old = handle_key.load(fio, path)
    assert handle_key.valid(old)
    for p, junk in ((path, b"0123"), (path + ".bak", b'{"crc32":"00000000","doc":{"key":"' + old + b'"}}')):
        with open(p, "wb") as f:
            f.write(junk)                               # cut short; a CRC that fails
    new = handle_key.load(fio, path)
    assert handle_key.valid(new) and new != old
    assert os.path.exists(path + ".damaged") and os.path.exists(path + ".bak.damaged")
    assert any(r.levelname == "ERROR" and "receipt-handle key" in r.getMessage() for r in caplog.records)
    assert handle_key.load(fio, path) == new


def test_a_copied_key_is_written_only_when_it_changes_and_must_be_whole(tmp_path):
    import pytest
    path = str(tmp_path / "secret")
    fio = OsFileIO()
    key = handle_key.new_key()
    handle_key.store(fio, path, key)
    before = os.stat(path).st_mtime_ns, os.stat(path).st_ino
    handle_key.store(fio, path, key)
    assert (os.stat(path).st_mtime_ns, os.stat(path).st_ino) == before
    assert handle_key.load(fio, path) == key
    with pytest.raises(ValueError):
        handle_key.store(fio, path, b"")
