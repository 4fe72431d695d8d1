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


def journal_bytes(d) -> bytes:
    with open(os.path.join(str(d), "journal"), "rb") as f:
        return f.read()


def test_a_damaged_line_with_intact_lines_after_it_is_skipped_not_cut(tmp_path, caplog):
    state = {}
    j, _ = open_journal(tmp_path, state)
    for k, v in (("a", 1), ("b", 2), ("c", 3)):
        j.append({"k": k, "v": v})
    j.flush()
    raw = journal_bytes(tmp_path)
    at = raw.index(b'"b"')
    damaged = raw[:at] + b'"x"' + raw[at + 3:]         # a flipped byte that still parses as JSON
    with open(os.path.join(str(tmp_path), "journal"), "wb") as f:
        f.write(damaged)
    state = {}
    with caplog.at_level("WARNING", "tidemq.broker"):
        j2, n = open_journal(tmp_path, state)
    assert n == 2 and state == {"a": 1, "c": 3}, "the damaged change is never applied, the later one is"
    assert j2.damaged_lines == 1 and "not a torn tail" in caplog.text
    assert journal_bytes(tmp_path) == damaged, "nothing cut"
    j2.append({"k": "d", "v": 4})
    state = {}
    _, n = open_journal(tmp_path, state)
    assert state == {"a": 1, "c": 3, "d": 4}


def test_a_damaged_last_line_is_a_torn_tail_and_cut(tmp_path):
    state = {}
    j, _ = open_journal(tmp_path, state)
    j.append({"k": "a", "v": 1})
    j.append({"k": "b", "v": 2})
    j.flush()
    raw = journal_bytes(tmp_path)
    first = raw.index(b"\n") + 1
    with open(os.path.join(str(tmp_path), "journal"), "wb") as f:
        f.write(raw[:first] + b"\x00" * (len(raw) - first - 1) + b"\n")   # a write that never reached the disk
    state = {}
    j2, n = open_journal(tmp_path, state)
    assert n == 1 and state == {"a": 1} and j2.damaged_lines == 0
    assert journal_bytes(tmp_path) == raw[:first]


def test_lines_written_before_the_crc_are_replayed(tmp_path):
    with open(os.path.join(str(tmp_path), "journal"), "wb") as f:
        f.write(b'{"k":"a","v":1}\n{"k":"b","v":2}\n')
    state = {}
    _, n = open_journal(tmp_path, state)
    assert n == 2 and state == {"a": 1, "b": 2}


def test_a_damaged_snapshot_falls_back_to_the_previous_one_and_the_journal_replays(tmp_path):
    state = {}
    j, _ = open_journal(tmp_path, state)
    j.compact({"a": 1})
    j.append({"k": "b", "v": 2})
    j.compact({"a": 1, "b": 2})
    j.append({"k": "c", "v": 3})
    j.flush()
    with open(os.path.join(str(tmp_path), "snapshot.json"), "wb") as f:
        f.write(os.urandom(30))
    state = {}
    j2, n = open_journal(tmp_path, state)
    assert state == {"a": 1, "c": 3}, "the previous snapshot plus the journal since the last one"
    assert j2.loaded.source.value == "backup"


def test_a_journal_whose_directory_was_removed_is_written_again_at_the_next_flush(tmp_path):
    """Removed while open (rm -rf of the state directory): appends went to a file no name reaches.
    The next flush sees it, the owner compacts (wants_compaction), and the snapshot and a new journal
    are in the directory made again (state/layout.remake, the broker's flush): what was appended
    since survives a restart."""
    import shutil
    d = tmp_path / "broker" / "pop"
    os.makedirs(d)
    state = {}
    j, _ = open_journal(d, state)
    j.append({"k": "a", "v": 1})
    j.flush()
    shutil.rmtree(tmp_path / "broker")
    j.append({"k": "b", "v": 2})
    j.flush()
    assert j.wants_compaction
    os.makedirs(d)                                       # (layout.remake)
    j.compact({"a": 1, "b": 2})
    j.append({"k": "c", "v": 3})
    j.flush()
    assert not j.wants_compaction
    state = {}
    _, n = open_journal(d, state)
    assert state == {"a": 1, "b": 2, "c": 3} and n == 1


def test_a_full_disk_never_fails_a_change_and_the_snapshot_catches_up_once_it_has_room(tmp_path):
    """A journal write the disk refuses (ENOSPC) does not fail the change (consumers drain a full
    disk): the journal is behind, the owner compacts at its next flush, which fails while the disk is
    full and succeeds once it has room; then every change is on disk."""
    import errno

    from tidemq.testing.faulty_io import FaultyFileIO
    fio = FaultyFileIO()
    state = {}
    j = Journal(fio, "/s")
    j.open(lambda doc: state.update(doc), lambda rec: state.__setitem__(rec["k"], rec["v"]))
    j.append({"k": "a", "v": 1})
    fio.fail("pwrite", errno.ENOSPC, path_contains="/s/", times=10)
    j.append({"k": "b", "v": 2})                          # no exception: kept in memory
    j.append({"k": "c", "v": 3})
    assert j.behind and j.wants_compaction
    try:
        j.compact({"a": 1, "b": 2, "c": 3})
        raise AssertionError("the disk is full: the snapshot cannot be written")
    except OSError:
        pass
    assert j.behind, "still behind"
    fio.clear_faults()
    j.flush()
    j.compact({"a": 1, "b": 2, "c": 3})
    assert not j.behind and not j.wants_compaction
    j.append({"k": "d", "v": 4})
    j.flush()
    state = {}
    j2 = Journal(fio, "/s")
    j2.open(lambda doc: state.update(doc), lambda rec: state.__setitem__(rec["k"], rec["v"]))
    assert state == {"a": 1, "b": 2, "c": 3, "d": 4}
