"""The snapshot + JSON-lines journal: replay, a torn last line, compaction."""

import os

from tidemq.broker.state.journal import Journal
from tidemq.io import OsFileIO


def open_journal(d, state):
    j = Journal(OsFileIO(), str(d))
    n = j.open(lambda doc: state.update(doc), lambda rec: state.__setitem__(rec["k"], rec["v"]))
    return j, n


def test_replay_stops_at_a_torn_line_and_new_lines_do_not_follow_it(tmp_path):
    state = {}
    j, _ = open_journal(tmp_path, state)
    j.append({"k": "a", "v": 1})
    j.append({"k": "b", "v": 2})
    j.flush()
    with open(os.path.join(str(tmp_path), "journal"), "ab") as f:
        f.write(b'{"k":"c","v"')                   # the process died mid-write
    state = {}
    j2, n = open_journal(tmp_path, state)
    assert n == 2 and state == {"a": 1, "b": 2}
    j2.append({"k": "d", "v": 4})
    state = {}
    _, n = open_journal(tmp_path, state)
    assert n == 3 and state == {"a": 1, "b": 2, "d": 4}


def test_compaction_keeps_the_state_in_the_snapshot(tmp_path):
    state = {}
    j, _ = open_journal(tmp_path, state)
    j.append({"k": "a", "v": 1})
    j.compact({"a": 1, "z": 26})
    j.append({"k": "b", "v": 2})
    j.close({"a": 1, "b": 2, "z": 26})
    state = {}
    _, n = open_journal(tmp_path, state)
    assert n == 0 and state == {"a": 1, "b": 2, "z": 26}
