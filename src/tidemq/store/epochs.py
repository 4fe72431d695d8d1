"""The epoch file: which leader epoch wrote which stretch of the commit log (RocketMQ 5's
EpochFileCache, Kafka's leader-epoch checkpoint).

``<root>/config/epochs.json``, a checked document (tidemq/checked.py: CRC, the previous version
kept as ``.bak``)::

    {"epochs": [[epoch, start_offset], ...]}      ascending in both

A damaged file falls back to its previous version; with both damaged the broker starts without
epochs (ERROR in the log): no epoch is then common with another member, so the log counts as
diverged from its first offset and is copied again from the leader: slow, never wrong.

Entry ``(e, s)`` says: the records from log offset ``s`` up to the next entry's start (or the
log's end, for the last one) were written by the leader of epoch ``e``. A broker that becomes
leader appends ``(its epoch, its log end)``; a follower copies the leader's entries as it copies
the log. The file follows the log: when the log is cut (a diverged tail truncated) the entries
starting after the cut go; when cleanup deletes the log's head, entries wholly before the new
minimum go (the one covering it stays).

Divergence (:func:`divergence_point`): a broker that comes back after a failover compares its
entries with the new leader's. The largest epoch both know, with the same start, ends at the
earlier of its two ends (the next entry's start on either side); everything after that point in
the returning broker's log was never part of the leader's log and is truncated before it
follows. With no common epoch the whole log diverged: the point is the leader's first offset
(or 0).
"""

from __future__ import annotations

import os
import threading

from .. import checked
from ..io import FileIO
from .. import layout
from .types import StoreError


class EpochFile:
    def __init__(self, fio: FileIO, root: str) -> None:
        self.fio = fio
        self.path = layout.epochs_path(root)
        self.entries: list[tuple[int, int]] = []
        self._lock = threading.Lock()

    def load(self) -> None:
        doc = checked.load(self.fio, self.path, "epochs", check=_entries).doc
        self.entries = _entries(doc) if doc is not None else []

    def _save(self) -> None:
        self.fio.makedirs(os.path.dirname(self.path))
        checked.write(self.fio, self.path, {"epochs": [list(x) for x in self.entries]})

    @property
    def last_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def snapshot(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self.entries)

    def begin(self, epoch: int, start_offset: int) -> None:
        """Epoch ``epoch`` writes from ``start_offset`` on (a new leader at its log's end, or a follower
        copying the leader's entry). ValueError when it goes backwards."""
        with self._lock:
            if self.entries:
                e, s = self.entries[-1]
                if epoch == e:
                    return                     # the same epoch goes on (a leader restarted)
                if epoch < e or start_offset < s:
                    raise ValueError(f"epoch {epoch} from {start_offset} does not follow epoch {e} from {s}")
                if start_offset == s:          # the last epoch wrote nothing: replaced
                    self.entries.pop()
            self.entries.append((epoch, start_offset))
            self._save()

    def truncate_after(self, end_offset: int) -> None:
        """The log now ends at ``end_offset``: entries starting after it go (one starting exactly there
        wrote nothing that is left)."""
        with self._lock:
            keep = [x for x in self.entries if x[1] < end_offset or (x[1] == 0 and end_offset == 0)]
            if keep != self.entries:
                self.entries = keep
                self._save()

    def prune_before(self, min_offset: int) -> None:
        """Cleanup deleted the log before ``min_offset``: entries wholly before it go."""
        with self._lock:
            i = 0
            while i + 1 < len(self.entries) and self.entries[i + 1][1] <= min_offset:
                i += 1
            if i:
                self.entries = self.entries[i:]
                self._save()

    def replace(self, entries: list[tuple[int, int]]) -> None:
        """Take a leader's entries as they are (a follower that copies its log from scratch)."""
        check(entries)
        with self._lock:
            self.entries = list(entries)
            self._save()


def check(entries: list[tuple[int, int]]) -> None:
    for (e1, s1), (e2, s2) in zip(entries, entries[1:]):
        if e2 <= e1 or s2 < s1:
            raise StoreError(f"epoch entries out of order: ({e1}, {s1}) then ({e2}, {s2})")


def end_of(entries: list[tuple[int, int]], i: int, log_end: int) -> int:
    """Where the epoch of ``entries[i]`` ends: the next entry's start, or the log's end."""
    return entries[i + 1][1] if i + 1 < len(entries) else log_end


def divergence_point(mine: list[tuple[int, int]], my_end: int, leader: list[tuple[int, int]],
                     leader_end: int, leader_min: int = 0) -> int:
    """The offset up to which this broker's log agrees with the leader's (see the module doc):
    truncate there, then copy the leader's log from there."""
    if my_end == 0:
        return 0
    theirs = {e: i for i, (e, _s) in enumerate(leader)}
    for i in range(len(mine) - 1, -1, -1):
        e, s = mine[i]
        j = theirs.get(e)
        if j is None or leader[j][1] != s:
            continue
        return min(end_of(mine, i, my_end), end_of(leader, j, leader_end))
    if not mine and not leader:
        return min(my_end, leader_end)       # neither ever had a leader with an epoch: a plain prefix
    return min(leader_min, my_end)


def _entries(doc) -> list[tuple[int, int]]:
    """The entries a document holds, checked (ascending); raises on anything else."""
    entries = [(int(e), int(s)) for e, s in doc["epochs"]]
    check(entries)
    return entries
