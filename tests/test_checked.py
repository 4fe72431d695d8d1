"""Checked state documents: CRC, the previous version kept, damage set aside, never a crash."""

import json
import logging
import os
import random

import pytest

from tidemq import checked
from tidemq.checked import Source
from tidemq.io import NotDurable, OsFileIO
from tidemq.testing.faulty_io import FaultyFileIO

FIO = OsFileIO()


def test_a_document_round_trips_and_stays_json(tmp_path):
    path = str(tmp_path / "s.json")
    checked.write(FIO, path, {"a": [1, 2], "b": "x"})
    raw = open(path, "rb").read()
    assert json.loads(raw)["doc"] == {"a": [1, 2], "b": "x"}        # jq can read it
    assert checked.load(FIO, path, "state") == checked.Loaded({"a": [1, 2], "b": "x"}, Source.FILE, "")


def test_no_file_is_a_new_state(tmp_path):
    assert checked.load(FIO, str(tmp_path / "none.json"), "state").source is Source.NONE


def test_plain_json_written_before_the_format_is_read(tmp_path):
    path = tmp_path / "old.json"
    path.write_bytes(b'{"k": 1}')
    assert checked.load(FIO, str(path), "state").doc == {"k": 1}


@pytest.mark.parametrize("damage", ["flipped digit", "random", "empty", "cut short"])
def test_damage_falls_back_to_the_previous_version(tmp_path, caplog, damage):
    path = str(tmp_path / "s.json")
    checked.write(FIO, path, {"offset": 1000})
    checked.write(FIO, path, {"offset": 2000})
    raw = open(path, "rb").read()
    bad = {"flipped digit": raw.replace(b"2000", b"9000"), "random": os.urandom(40), "empty": b"",
           "cut short": raw[:-5]}[damage]
    open(path, "wb").write(bad)
    with caplog.at_level(logging.WARNING, "tidemq"):
        got = checked.load(FIO, path, "offsets")
    assert (got.doc, got.source) == ({"offset": 1000}, Source.BACKUP), "a flipped digit is never read as a value"
    assert "offsets" in caplog.text and "previous version" in caplog.text
    assert open(path + ".damaged", "rb").read() == bad, "the damaged file is kept aside"
    assert not os.path.exists(path)


def test_both_damaged_is_lost_said_at_error_and_the_next_write_starts_over(tmp_path, caplog):
    path = str(tmp_path / "s.json")
    checked.write(FIO, path, {"v": 1})
    checked.write(FIO, path, {"v": 2})
    for p in (path, path + ".bak"):
        open(p, "wb").write(b"\x00garbage")
    with caplog.at_level(logging.ERROR, "tidemq"):
        got = checked.load(FIO, path, "timer progress")
    assert (got.doc, got.source) == (None, Source.LOST) and "timer progress" in caplog.text
    checked.write(FIO, path, {"v": 3})
    assert checked.load(FIO, path, "timer progress").doc == {"v": 3}


def test_a_crash_between_the_two_renames_reads_the_previous_version(tmp_path):
    path = str(tmp_path / "s.json")
    checked.write(FIO, path, {"v": 1})
    checked.write(FIO, path, {"v": 2})
    os.unlink(path)                            # renamed to .bak, the new one never renamed in
    assert checked.load(FIO, path, "state") == checked.Loaded({"v": 1}, Source.BACKUP, "")


def test_a_document_of_the_wrong_shape_is_damage(tmp_path):
    path = str(tmp_path / "s.json")
    checked.write(FIO, path, {"v": 1})
    checked.write(FIO, path, [1, 2, 3])

    def must_be_object(doc):
        if not isinstance(doc, dict):
            raise checked.Damaged("not an object")
    assert checked.load(FIO, path, "state", check=must_be_object).doc == {"v": 1}


def test_decode_refuses_every_single_flipped_byte():
    raw = checked.encode({"g": {"T": 12345}})
    for i in range(len(raw)):
        bad = bytearray(raw)
        bad[i] ^= 0x04
        try:
            doc = checked.decode(bytes(bad))
        except checked.Damaged:
            continue
        assert doc == {"g": {"T": 12345}}, f"byte {i} flipped gave {doc}"


@pytest.mark.parametrize("first", [True, False])
def test_a_directory_fsync_failing_after_the_rename_takes_the_new_version_back_and_says_not_durable(tmp_path, first):
    """The rename was made, its directory's fsync failed: whether it survives a crash is not known.
    The write raises NotDurable (neither OK nor "nothing changed": an OSError the owner would take
    for the latter), and what a read finds now is the version in effect (the one before, or none);
    after a power loss, either. Before: a plain OSError, the new version left in place -- the owner
    kept the old one in memory while every read and the next start found the new one."""
    fio = FaultyFileIO()
    path = str(tmp_path / "s.json")
    fio.makedirs(str(tmp_path))
    if first:
        checked.write(fio, path, {"v": 1})
    fio.fail("fsync_dir", times=1)
    with pytest.raises(NotDurable):
        checked.write(fio, path, {"v": 2})
    assert checked.load(fio, path, "state").doc == ({"v": 1} if first else None), "the version in effect"
    after = fio.after_power_loss(random.Random(7))
    assert checked.load(after, path, "state").doc in (({"v": 1}, {"v": 2}) if first else (None, {"v": 2}))
    checked.write(after, path, {"v": 2})                     # the same change again: written, durable
    assert checked.load(after.after_power_loss(random.Random(7)), path, "state").doc == {"v": 2}


def test_a_mirrored_document_whose_copy_cannot_be_written_stands(tmp_path):
    """write_mirrored: the document is written and durable, its .bak copy fails: the change stands
    (an OSError would tell the owner "nothing changed" while the next start reads the new version), and
    the stale copy is removed: the version before never comes back."""
    fio = FaultyFileIO()
    path = str(tmp_path / "s.json")
    fio.makedirs(str(tmp_path))
    checked.write_mirrored(fio, path, {"v": 1})
    fio.fail("open", path_contains=".bak.tmp")
    checked.write_mirrored(fio, path, {"v": 2})
    after = fio.after_crash()
    assert checked.load(after, path, "state").doc == {"v": 2}
    after.unlink(path)                                  # damage (here: gone) never brings back v1
    assert checked.load(after, path, "state").doc is None
