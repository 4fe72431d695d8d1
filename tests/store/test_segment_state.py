"""segment_state: the states of a commit-log segment, the table of legal moves, and the places
that move a segment (MappedFile, SegmentQueue, CommitLog, the store's start)."""

from __future__ import annotations

import pytest

from tidemq.io import OsFileIO
from tidemq.store import Message, segment_state
from tidemq.store.mapped_file import MappedFile
from tidemq.store.segment_queue import SegmentQueue
from tidemq.store.segment_state import HOLDABLE, TRANSITIONS, IllegalTransition, SegmentState
from tidemq.store.types import StoreError

S = SegmentState
SIZE = 64 * 1024


@pytest.fixture
def seen():
    """Every transition made while the test runs: [(path, from, to)]."""
    out: list = []

    def saw(segment, frm, to):
        out.append((segment.path, frm, to))

    segment_state.listeners.append(saw)
    yield out
    segment_state.listeners.remove(saw)


def test_the_table_names_every_state_and_final_states_go_nowhere():
    assert set(TRANSITIONS) == set(SegmentState)
    assert TRANSITIONS[S.DELETED] == TRANSITIONS[S.CLOSED] == frozenset()
    assert S.WRITABLE not in TRANSITIONS[S.FAILED]        # a failed segment is never written again
    assert HOLDABLE.isdisjoint({S.DELETING, S.DELETED, S.CLOSED})


def test_an_illegal_move_is_a_typed_error_and_changes_nothing(tmp_path, seen):
    mf = MappedFile.create(OsFileIO(), str(tmp_path), 0, SIZE)
    mf.set_state(S.WRITABLE)
    mf.set_state(S.FAILED)
    with pytest.raises(IllegalTransition) as e:
        mf.set_state(S.WRITABLE)
    assert isinstance(e.value, StoreError)
    assert (e.value.frm, e.value.to) == (S.FAILED, S.WRITABLE)
    assert mf.state is S.FAILED and mf.available        # a failed segment is still read (up to its seal)
    assert [(f, t) for _p, f, t in seen] == [(S.CREATED, S.WRITABLE), (S.WRITABLE, S.FAILED)]
    mf.close()
    assert mf.state is S.CLOSED


def test_destroy_goes_through_deleting_while_a_reader_holds_it(tmp_path, seen):
    mf = MappedFile.create(OsFileIO(), str(tmp_path), 0, SIZE)
    mf.set_state(S.WRITABLE)
    mf.set_state(S.SEALED)
    assert mf.hold()
    assert mf.destroy(now_ms=0, force_after_ms=10_000) is False
    assert mf.state is S.DELETING and not mf.hold()       # out of service: no new reader
    mf.release()
    assert mf.destroy(now_ms=1, force_after_ms=10_000) is True
    assert mf.state is S.DELETED
    assert mf.destroy(now_ms=2, force_after_ms=10_000) is True      # twice: nothing more
    assert [t for _p, _f, t in seen] == [S.WRITABLE, S.SEALED, S.DELETING, S.DELETED]


def test_a_loaded_segment_is_loaded_until_the_queue_settles(tmp_path):
    fio = OsFileIO()
    q = SegmentQueue(fio, [str(tmp_path)], SIZE, preallocate=False)
    q.new_segment(0)
    q.new_segment(SIZE)
    assert [m.state for m in q.segments] == [S.SEALED, S.WRITABLE]      # a roll seals the one before
    segs = list(q.segments)
    q.close()
    assert all(m.state is S.CLOSED for m in segs)
    q2 = SegmentQueue(fio, [str(tmp_path)], SIZE, preallocate=False)
    q2.load()
    assert [m.state for m in q2.segments] == [S.LOADED, S.LOADED]
    q2.segments[-1].wrote_pos = 100
    q2.settle()
    assert [m.state for m in q2.segments] == [S.SEALED, S.WRITABLE]
    q2.truncate(50)                                      # a cut into the sealed one reopens it
    assert [m.state for m in q2.segments] == [S.WRITABLE]
    q2.close()


def test_a_cut_refuses_to_reopen_a_failed_segment(tmp_path):
    q = SegmentQueue(OsFileIO(), [str(tmp_path)], SIZE, preallocate=False)
    q.new_segment(0).wrote_pos = 1000
    q.segments[0].set_state(S.FAILED)
    with pytest.raises(IllegalTransition):
        q.truncate(10)
    q.close()


def test_a_store_moves_its_segments_through_legal_states_only(make_config, open_store, seen):
    """A store's life (appends across rolls, a restart) makes only moves of the table, and each of
    the expected ones."""
    cfg = make_config(segment_size_bytes=64 * 1024, preallocate_next_segment=True)
    s = open_store(cfg)
    for i in range(300):
        assert s.put(Message("T", b"x" * 700)).ok
    s.shutdown()
    s2 = open_store(cfg)
    assert {m.state for m in s2.segments.segments[:-1]} == {S.SEALED}
    assert s2.segments.last.state is S.WRITABLE
    s2.shutdown()
    moves = {(f, t) for _p, f, t in seen}
    assert all(segment_state.legal(f, t) for f, t in moves)
    assert {(S.CREATED, S.WRITABLE), (S.WRITABLE, S.SEALED), (S.LOADED, S.SEALED), (S.LOADED, S.WRITABLE),
            (S.WRITABLE, S.CLOSED), (S.SEALED, S.CLOSED)} <= moves
