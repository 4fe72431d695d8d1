"""PopState on its own: the journal across restarts, a torn last line (kill -9 mid-write)."""

import os

from tidemq.broker.consume.pop_state import PopState
from tidemq.io import OsFileIO


def opened(root):
    ps = PopState(OsFileIO(), root)
    ps.open()
    return ps


def test_an_ack_written_after_a_torn_line_holds_across_the_next_restart(tmp_path):
    root = str(tmp_path)
    ps = opened(root)
    h0 = ps.deliver("g", "T", 0, 0, 1, 10_000)
    h1 = ps.deliver("g", "T", 0, 1, 1, 10_000)
    ps.flush()
    with open(os.path.join(root, "pop", "journal"), "ab") as f:
        f.write(b'{"op":"pop","g":"g","t":"T","q":0,"o":2,"a"')    # killed mid-write: no newline
    # no close(): a kill -9 leaves the journal as it is; the next start reads it
    ps = opened(root)
    assert sorted(ps.state("g", "T", 0).inflight) == [0, 1], "the torn line was never answered"
    ps.ack("g", h0)
    ps.flush()
    ps = opened(root)                                  # killed again: the ack must be replayed
    assert sorted(ps.state("g", "T", 0).inflight) == [1], "the ack after the torn line holds"
    ps.ack("g", h1)
    ps.close()
    ps = opened(root)
    assert ps.state("g", "T", 0).inflight == {} and ps.state("g", "T", 0).cursor == 2
    ps.close()


def test_the_handles_secret_is_readable_by_the_broker_only(tmp_path):
    ps = opened(str(tmp_path))
    assert os.stat(os.path.dirname(ps.secret_path)).st_mode & 0o077 == 0, "no one else may list or read the secret"
    ps.close()
