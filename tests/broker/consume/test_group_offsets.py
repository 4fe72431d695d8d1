"""Committed offsets of consumer groups: kept across a restart, a deleted topic forgotten, a
damaged file never read as offsets."""

import os

from tidemq.broker.consume.group_offsets import GroupOffsets
from tidemq.checked import Source
from tidemq.io import OsFileIO


def opened(d) -> GroupOffsets:
    g = GroupOffsets(OsFileIO(), str(d))
    g.load()
    return g


def test_offsets_survive_a_restart_and_a_deleted_topic_is_forgotten(tmp_path):
    g = opened(tmp_path)
    g.set("g1", "T", 0, 10)
    g.set("g1", "U", 3, 7)
    g.set("g2", "T", 0, 4)
    g.flush()
    g = opened(tmp_path)
    assert (g.get("g1", "T", 0), g.get("g1", "U", 3), g.get("g2", "T", 0), g.get("g1", "T", 1)) == (10, 7, 4, None)
    g.forget_topic("T")
    g.flush()
    assert opened(tmp_path).offsets == {("g1", "U", 3): 7}


def test_flush_writes_only_what_changed(tmp_path):
    g = opened(tmp_path)
    g.set("g", "T", 0, 1)
    g.flush()
    path = g.path
    before = os.stat(path).st_mtime_ns, os.stat(path).st_ino
    g.flush()                                            # nothing changed: no write
    assert (os.stat(path).st_mtime_ns, os.stat(path).st_ino) == before


def test_a_flipped_digit_is_never_read_as_an_offset(tmp_path):
    g = opened(tmp_path)
    g.set("g", "T", 0, 1000)
    g.flush()
    g.set("g", "T", 0, 2000)
    g.flush()
    raw = open(g.path, "rb").read()
    open(g.path, "wb").write(raw.replace(b"2000", b"9000"))   # skipping 7000 messages if believed
    g = opened(tmp_path)
    assert g.get("g", "T", 0) == 1000, "the previous version: its last second replayed, nothing skipped"
    assert g.loaded.source is Source.BACKUP


def test_both_copies_damaged_starts_without_offsets(tmp_path):
    g = opened(tmp_path)
    g.set("g", "T", 0, 5)
    g.flush()
    g.set("g", "T", 0, 6)
    g.flush()
    for p in (g.path, g.path + ".bak"):
        open(p, "wb").write(b"")
    g = opened(tmp_path)
    assert g.offsets == {} and g.loaded.source is Source.LOST
