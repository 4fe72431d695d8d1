"""The life of a commit-log segment: one state per segment, one table of the legal moves.

Every change of a segment's state goes through ``move()``; a move the table does not hold
raises ``IllegalTransition`` (always on: not an ``assert``, which ``python -O`` drops).

States (what the code does with a segment in each)::

    CREATED   made, preallocated and mapped (MappedFile.create), not part of the log yet:
              the segment made ahead of need (SegmentQueue's pre-made one), or one being added
    LOADED    opened at start from a file already there (MappedFile.open): recovery decides where
              its records end, then it becomes WRITABLE (the log's last, with room) or SEALED
    WRITABLE  the log's last segment: appends go here (one writer, under the put lock)
    SEALED    takes no more appends: full (it ends with a BLANK), or sealed early where its
              directory went offline or read-only, or sealed at its start because a segment before
              it failed (commit_log.seal_early; the seal is kept in config/sealed.json). Read until
              deleted
    FAILED    an fsync or a write of it failed: sealed where its durable data ends (the position of
              its last successful fsync; config/sealed.json). Readers and recovery read it up to
              there and go on at the next segment; nothing is written to it again
    DELETING  out of service (MappedFile.destroy): no new reader may hold it; its name is removed at
              once (the directory fsynced) while the readers that hold it read on through the
              mapping, so no later start loads it again; when they finish (or by force after
              destroy_mapped_file_interval_forcibly_ms) the next destroy() unmaps it and its space
              goes. This is "held by readers" of issue 28
    DELETED   unmapped, closed, unlinked. Final
    CLOSED    unmapped and closed, the file kept (shutdown, a start that failed; a reader still
              holding it unmaps it at its release). Final

Two names of issue 28 are not states here, on purpose:

* "held by readers" is a count (``hold()`` / ``release()``), not a state: readers hold segments
  in every state listed in ``HOLDABLE``, and the count changes on every read, which must stay a
  lock and an increment (bench/store_read.py). The count matters in one state only, DELETING,
  which is the state of a segment waiting for its readers.
* "archived" is a fact the archive job records in its manifest (store/archive.py), outside the
  process and beyond its life; it changes nothing the store does with the segment except whether
  the cleaner may delete it, which the cleaner asks ``ArchiveGuard.archived`` before SEALED ->
  DELETING. A state copied from the manifest could only drift from it.

``listeners``: callables ``(segment, from_state, to_state)`` told of every move (the seeded
store simulation records them and checks each against ``TRANSITIONS``); the list is for tests.
"""

from __future__ import annotations

import enum
from typing import Callable

from .types import StoreError


class SegmentState(enum.Enum):
    CREATED = "created"
    LOADED = "loaded"
    WRITABLE = "writable"
    SEALED = "sealed"
    FAILED = "failed"
    DELETING = "deleting"
    DELETED = "deleted"
    CLOSED = "closed"


S = SegmentState

TRANSITIONS: dict[SegmentState, frozenset[SegmentState]] = {
    # the pre-made segment becomes the log's last; or is dropped unused (its placement changed,
    # the store stops); or the store closes with it
    S.CREATED: frozenset({S.WRITABLE, S.DELETING, S.CLOSED}),
    # after recovery: the last one with room takes appends, the others are sealed; recovery cuts a
    # segment with nothing valid in it; a start that fails closes them
    S.LOADED: frozenset({S.WRITABLE, S.SEALED, S.DELETING, S.CLOSED}),
    # full and rolled, or sealed early; its fsync or write failed; cut away (a follower's
    # truncation, a log that diverged); shutdown
    S.WRITABLE: frozenset({S.SEALED, S.FAILED, S.DELETING, S.CLOSED}),
    # a cut back into it makes it the last again (recovery's or a follower's truncation); its
    # last fsync (after its BLANK) failed; deleted by the cleaner or a cut; shutdown
    S.SEALED: frozenset({S.WRITABLE, S.FAILED, S.DELETING, S.CLOSED}),
    # never written again: deleted (from the head, or a cut), or closed
    S.FAILED: frozenset({S.DELETING, S.CLOSED}),
    # the last reader released it and destroy() ran again (or the force interval passed); or the
    # store shut down while a reader still held it (its name is gone already: nothing comes back)
    S.DELETING: frozenset({S.DELETED, S.CLOSED}),
    S.DELETED: frozenset(),
    S.CLOSED: frozenset(),
}
assert set(TRANSITIONS) == set(SegmentState)

HOLDABLE = frozenset({S.CREATED, S.LOADED, S.WRITABLE, S.SEALED, S.FAILED})   # hold() succeeds

listeners: list[Callable[[object, SegmentState, SegmentState], None]] = []


class IllegalTransition(StoreError):
    """A segment was asked to move to a state the table does not allow from its state: a bug in the
    store (its caller's operation is refused, nothing is changed)."""

    def __init__(self, path: str, frm: SegmentState, to: SegmentState) -> None:
        super().__init__(f"segment {path}: {frm.value} -> {to.value} is not a legal transition "
                         f"(from {frm.value}: {', '.join(sorted(s.value for s in TRANSITIONS[frm])) or 'none'})")
        self.path = path
        self.frm = frm
        self.to = to


def legal(frm: SegmentState, to: SegmentState) -> bool:
    return to in TRANSITIONS[frm]


def move(segment, to: SegmentState) -> SegmentState:
    """Move ``segment`` (a MappedFile; the caller holds its lock where readers race) to ``to``;
    returns the state it left. IllegalTransition when the table does not allow it (nothing changed)."""
    frm = segment.state
    if to not in TRANSITIONS[frm]:
        raise IllegalTransition(segment.path, frm, to)
    segment.state = to
    segment.available = to in HOLDABLE
    for fn in listeners:
        fn(segment, frm, to)
    return frm
