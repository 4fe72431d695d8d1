"""said.py: expected failures of a retrying loop said once per condition, counted, said again with
the counts when things work again; the kind never from the text (an offset that moves each retry)."""

import errno
import logging

from tidemq.broker.replication.follower import LocalWriteError
from tidemq.said import KINDS_MAX, Conditions, kind_of

log = logging.getLogger("tidemq.test_said")


def disk_refused(offset: int, err: int) -> LocalWriteError:
    e = LocalWriteError(f"this member's disk refused the leader's bytes at {offset}: [Errno {err}]")
    e.error = OSError(err, "refused")
    return e


def test_a_wrapped_disk_error_whose_text_moves_is_one_condition(caplog):
    caplog.set_level("WARNING", log.name)
    c = Conditions(log, "replication from 127.0.0.1:1")
    for off in range(0, 5000, 1000):                     # the follower's retries: a new offset each time
        e = disk_refused(off, errno.ENOSPC)
        c.failed(kind_of(e), str(e))
    c.failed(kind_of(disk_refused(9, errno.EIO)), "an I/O error")       # another condition: said too
    c.failed(kind_of(ConnectionError("gone")), "gone")
    c.recovered("copying again")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 and all(r.exc_info is None for r in caplog.records), lines
    assert "at 0:" in lines[0] and "an I/O error" in lines[1] and "gone" in lines[2]
    assert lines[3].endswith("copying again after 7 failed attempt(s) (LocalWriteError ENOSPC: 5, "
                             "LocalWriteError EIO: 1, ConnectionError: 1)"), lines[3]
    c.recovered()
    assert len(caplog.records) == 4, "nothing to say when nothing failed"


def test_kinds_are_bounded():
    c = Conditions(log, "x")
    for i in range(3 * KINDS_MAX):
        c.failed(f"kind {i}", "t")
    assert len(c.counts) == KINDS_MAX + 1 and c.counts["other"] == 2 * KINDS_MAX
