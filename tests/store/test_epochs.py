"""The epoch file: begin / truncate / prune follow the log; the divergence point of two logs."""

import json

import pytest

from tidemq.io import OsFileIO
from tidemq.store.epochs import EpochFile, divergence_point


def test_begin_truncate_prune_and_reload(tmp_path):
    f = EpochFile(OsFileIO(), str(tmp_path))
    f.begin(1, 0)
    f.begin(1, 0)                       # the same epoch again: nothing new
    f.begin(1, 40)                      # (a static leader restarted at its log's end: the same epoch goes on)
    f.begin(2, 100)
    f.begin(3, 100)                     # epoch 2 wrote nothing: replaced
    f.begin(4, 250)
    assert f.entries == [(1, 0), (3, 100), (4, 250)]
    with pytest.raises(ValueError):
        f.begin(2, 300)                 # backwards
    f.truncate_after(250)               # epoch 4 starts where the log now ends: it wrote nothing left
    assert f.entries == [(1, 0), (3, 100)]
    f.prune_before(120)                 # cleanup: epoch 1's records are all gone
    assert f.entries == [(3, 100)]
    g = EpochFile(OsFileIO(), str(tmp_path))
    g.load()
    assert g.entries == [(3, 100)] and g.last_epoch == 3


def test_a_damaged_file_falls_back_to_its_previous_version_then_to_none(tmp_path):
    f = EpochFile(OsFileIO(), str(tmp_path))
    f.begin(1, 0)
    f.begin(2, 100)                     # the version with (1, 0) alone is kept as .bak
    with open(f.path, "w") as fh:
        json.dump({"epochs": [[2, 0], [1, 10]]}, fh)          # out of order: not epochs
    g = EpochFile(OsFileIO(), str(tmp_path))
    g.load()
    assert g.entries == [(1, 0)], "the previous version"
    for p in (f.path, f.path + ".bak"):
        with open(p, "w") as fh:
            fh.write("{")
    h = EpochFile(OsFileIO(), str(tmp_path))
    h.load()
    assert h.entries == [], "none: the log counts as diverged and is copied again (never a refusal to start)"


@pytest.mark.parametrize("mine, my_end, leader, leader_end, leader_min, want", [
    # the old leader of epoch 1 wrote past where the new leader (epoch 2) took over
    ([(1, 0)], 500, [(1, 0), (2, 300)], 800, 0, 300),
    # a follower simply behind: nothing to cut
    ([(1, 0), (2, 300)], 400, [(1, 0), (2, 300)], 800, 0, 400),
    # two failovers: the returning broker led epoch 2 until 600, the leader took epoch 3 at 450
    ([(1, 0), (2, 300)], 600, [(1, 0), (2, 300), (3, 450)], 900, 0, 450),
    # no common epoch: everything diverged (down to the leader's first offset)
    ([(5, 0)], 500, [(6, 0)], 800, 0, 0),
    # an empty log needs no cut
    ([], 0, [(1, 0)], 800, 0, 0),
    # neither has epochs (static groups that never changed leader): a prefix
    ([], 500, [], 800, 0, 500),
    # the same epoch started elsewhere (a different history): not common
    ([(1, 0), (2, 100)], 500, [(1, 0), (2, 200)], 800, 0, 100),
])
def test_divergence_point(mine, my_end, leader, leader_end, leader_min, want):
    assert divergence_point(mine, my_end, leader, leader_end, leader_min) == want
