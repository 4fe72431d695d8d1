"""crash_files: the abort file and the checkpoint as a crash leaves them."""

import os

import pytest

from tidemq.testing.crash import crash_files


@pytest.mark.parametrize("abort", [True, False])
@pytest.mark.parametrize("checkpoint", ["valid", "empty", "random"])
def test_the_files_a_crash_leaves(tmp_path, abort, checkpoint):
    cp = tmp_path / "checkpoint"
    cp.write_bytes(b"written by the store")
    crash_files(str(tmp_path), abort, checkpoint)
    assert (tmp_path / "abort").exists() == abort
    got = cp.read_bytes()
    want = {"valid": b"written by the store", "empty": b""}
    if checkpoint == "random":
        assert len(got) == 4096 and got != b"written by the store"
    else:
        assert got == want[checkpoint]
    assert sorted(os.listdir(tmp_path)) == sorted(["checkpoint"] + (["abort"] if abort else []))
