"""Committed offsets of consumer groups: kept across a restart, a deleted topic forgotten, a
damaged file never read as offsets."""

import os

from tidemq.broker.consume.group_offsets import GroupOffsets
from tidemq.checked import Source
from tidemq.io import OsFileIO

from ...support.tmpfs import fill_to_last_page


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


def test_offsets_committed_while_the_disk_is_full_are_written_once_it_has_room(env):
    """A real full disk (a 1 MiB tmpfs): the flush fails, the version before it stays readable, and
    the offsets committed meanwhile are written by the next flush once there is room -- not only
    after another commit (a group that stopped committing replayed everything since at a restart)."""
    d = env.tmpfs("state", 1)
    g = opened(d)
    g.set("g", "T", 0, 10)
    g.flush()
    filler = fill_to_last_page(d, "filler")
    g.set("g", "T", 0, 20)
    try:
        g.flush()
        raise AssertionError("the disk is full: the flush must fail")
    except OSError:
        pass
    assert opened(d).get("g", "T", 0) == 10, "the version before the failed write"
    os.unlink(filler)
    g.flush()                                            # nothing committed since: still written
    assert opened(d).get("g", "T", 0) == 20


def test_an_offset_whose_last_record_is_another_one_now_is_cut_back_at_start_and_written(tmp_path):
    """The fingerprint (consume/reused.py): the record at offset - 1 as the file was written; at start
    another record there (a failure of the log took it, new messages took the offsets) cuts the
    offset back to the first record past the counted one; the same record leaves it; a file without
    fingerprints (an older one, a follower's copy) loads as before."""
    log = {("T", 0): [100, 200, 300, 400], ("U", 0): [100, 200]}
    unit_at = lambda t, q, o: log[(t, q)][o] if o < len(log[(t, q)]) else None    # noqa: E731
    g = GroupOffsets(OsFileIO(), str(tmp_path), unit_at)
    g.load()
    g.set("p", "T", 0, 4)
    g.set("p", "U", 0, 2)
    g.flush()
    log[("T", 0)] = [100, 200, 9000, 9100, 9200]            # 2 and 3 taken, their offsets taken again
    g = GroupOffsets(OsFileIO(), str(tmp_path), unit_at)
    g.load()
    assert g.cut_where_reused() == 1
    assert (g.get("p", "T", 0), g.get("p", "U", 0)) == (2, 2)
    assert opened(tmp_path).offsets == {("p", "T", 0): 2, ("p", "U", 0): 2}, "written at once"
    g = GroupOffsets(OsFileIO(), str(tmp_path), unit_at)
    g.load()
    assert g.cut_where_reused() == 0                        # fingerprinted anew: (1, 200)
    (tmp_path / "old").mkdir()
    plain = opened(tmp_path / "old")
    plain.set("p", "T", 0, 4)
    plain.flush()                                           # no unit_at: no fingerprint
    g = GroupOffsets(OsFileIO(), str(tmp_path / "old"), unit_at)
    g.load()
    assert g.cut_where_reused() == 0 and g.get("p", "T", 0) == 4
