"""A snapshot plus an append-only journal of JSON lines: broker state that must survive kill -9.

Layout under a directory: ``snapshot.json`` (the whole state, written atomically)
and ``journal`` (one JSON object per line, each change written before the
broker answers, fsynced by :meth:`flush`, which the broker calls every second).
At open the snapshot is loaded and the journal replayed through the owner's
``apply``; a torn last line (the process died mid-write) ends the replay: its
change was never answered. Replaying a change twice must change nothing, so a
crash between a snapshot and the journal's truncation is harmless.
"""

from __future__ import annotations

import json
import os
from typing import Callable

from ...io import FileIO, read_whole, write_atomic

COMPACT_BYTES = 16 << 20        # journal bytes beyond which the owner compacts it into the snapshot


class Journal:
    def __init__(self, fio: FileIO, directory: str, compact_bytes: int = COMPACT_BYTES) -> None:
        """``compact_bytes``: a journal longer than this wants compaction into the snapshot."""
        self.fio = fio
        self.compact_bytes = compact_bytes
        self.dir = directory
        self.path = os.path.join(directory, "journal")
        self.snapshot_path = os.path.join(directory, "snapshot.json")
        self._h = None
        self._size = 0
        self._dirty = False

    def open(self, load: Callable[[dict], None], apply: Callable[[dict], None]) -> int:
        """Load the snapshot (``load``), replay the journal (``apply`` per line); lines replayed."""
        self.fio.makedirs(self.dir)
        if self.fio.exists(self.snapshot_path):
            load(json.loads(read_whole(self.fio, self.snapshot_path)))
        replayed = 0
        good = 0                               # bytes of whole, parsed lines
        if self.fio.exists(self.path):
            raw = read_whole(self.fio, self.path)
            for line in raw.split(b"\n")[:-1]:    # the part after the last newline is torn
                try:
                    rec = json.loads(line) if line else None
                except ValueError:
                    break                      # a torn line: what follows was never answered
                if rec is not None:
                    apply(rec)
                    replayed += 1
                good += len(line) + 1
        self._h = self.fio.open(self.path, create=True)
        self._size = good
        self.fio.truncate(self._h, good)       # new lines never follow a torn one
        return replayed

    def append(self, rec: dict) -> None:
        line = json.dumps(rec, separators=(",", ":")).encode() + b"\n"
        self.fio.pwrite(self._h, line, self._size)
        self._size += len(line)
        self._dirty = True

    def flush(self) -> None:
        if self._dirty and self._h is not None:
            self._dirty = False
            self.fio.fsync(self._h)

    @property
    def wants_compaction(self) -> bool:
        return self._size > self.compact_bytes

    def compact(self, snapshot: dict) -> None:
        """Write the whole state atomically, then empty the journal."""
        write_atomic(self.fio, self.snapshot_path, json.dumps(snapshot).encode())
        self.fio.truncate(self._h, 0)
        self.fio.fsync(self._h)
        self._size = 0
        self._dirty = False

    def abandon(self) -> None:
        """Close the file without writing anything (a follower's copy of a leader's journal)."""
        if self._h is not None:
            self.fio.close(self._h)
            self._h = None

    def close(self, snapshot: dict) -> None:
        if self._h is not None:
            self.compact(snapshot)
            self.fio.close(self._h)
            self._h = None
