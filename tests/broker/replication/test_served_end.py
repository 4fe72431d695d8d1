"""The served end on disk (broker/replication/served_end.py): a lower bound of the high watermark
that readers of a SYNC member's files stop at. Written 0 at start, raised only, lowered only by a
cut of the log (its .bak too), removed by a broker that serves its whole log; a damaged file falls
back to a version that is still a lower bound."""

from __future__ import annotations

import os

from tidemq import checked, layout
from tidemq.broker.replication.served_end import ServedEnd, check, forget
from tidemq.io import OsFileIO


def on_disk(root: str) -> int | None:
    doc = checked.load(OsFileIO(), layout.served_end_path(root), "served end", check=check).doc
    return None if doc is None else doc["end"]


def test_it_starts_at_zero_is_raised_only_and_a_cut_lowers_it_and_its_backup(tmp_path):
    root = str(tmp_path)
    s = ServedEnd(OsFileIO(), root)
    s.open()
    assert on_disk(root) == 0, "there before anything is copied or led"
    s.save(lambda: 500)
    s.save(lambda: 300)                       # a high watermark read lower (a new leader's): not written
    s.save(lambda: None)                      # none known
    assert on_disk(root) == 500
    s.save(lambda: 900)
    s.cut(700)                                # this log cut back: never past the cut, the .bak neither
    assert on_disk(root) == 700
    os.unlink(layout.served_end_path(root))   # (what a reader falls back to)
    assert on_disk(root) == 700
    s.cut(800)                                # above what it says: nothing to lower
    assert on_disk(root) == 700


def test_a_restart_reads_what_was_saved_and_a_damaged_file_falls_back_to_a_lower_bound(tmp_path):
    root = str(tmp_path)
    s = ServedEnd(OsFileIO(), root)
    s.open()
    s.save(lambda: 100)
    s.save(lambda: 200)
    again = ServedEnd(OsFileIO(), root)
    again.open()
    assert again.saved == 200
    with open(layout.served_end_path(root), "r+b") as f:       # damaged: its CRC fails
        f.write(b"garbage")
    assert on_disk(root) == 100, "the version before, below the high watermark too"


def test_a_broker_serving_its_whole_log_removes_it(tmp_path):
    root = str(tmp_path)
    s = ServedEnd(OsFileIO(), root)
    s.open()
    s.save(lambda: 100)
    s.save(lambda: 200)                       # (a .bak now)
    forget(OsFileIO(), root)
    path = layout.served_end_path(root)
    assert not os.path.exists(path) and not os.path.exists(path + ".bak")
    assert on_disk(root) is None
