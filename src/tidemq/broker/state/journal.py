"""A snapshot plus an append-only journal of JSON lines: broker state that must survive kill -9.

Layout under a directory: ``snapshot.json`` (the whole state, a checked document:
checked.py, its previous version kept as ``snapshot.json.bak``) and ``journal`` (one change
per line, written before the broker answers, fsynced by :meth:`flush`, which the broker
calls every second). A line is ``<compact JSON>\t<crc32, 8 hex digits>\n``: the CRC-32 of
the JSON's bytes (compact JSON never holds a raw tab). Lines without the tab were written
before the CRC and are read as plain JSON.

At open the snapshot is loaded and the journal replayed through the owner's ``apply``. A
line that fails its CRC or does not parse is one of two things:
- a torn tail: no intact line follows it (the process died mid-write; its change was never
  answered). It is cut, so new lines never follow it;
- damage in the middle: intact lines follow. It is skipped, counted and logged, the lines
  after it are replayed, and nothing is cut (the next compaction drops it). Cutting there
  would lose every later change, as a recovery that cuts the log at a bad record would.
Replaying a change twice must change nothing, so a crash between a snapshot and the
journal's truncation is harmless. A damaged snapshot falls back to its previous version
(the journal since then still replays; the changes folded in between are lost: WARNING),
or to nothing when both are damaged (ERROR); :attr:`Journal.loaded` says which.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Callable

from ...record.crc import crc32
from ...io import FileIO, read_whole
from ... import checked

log = logging.getLogger("tidemq.broker")

JOURNAL_FILE = "journal"
SNAPSHOT_FILE = "snapshot.json"
COMPACT_BYTES = 16 << 20        # journal bytes beyond which the owner compacts it into the snapshot


class Journal:
    def __init__(self, fio: FileIO, directory: str, compact_bytes: int = COMPACT_BYTES) -> None:
        """``compact_bytes``: a journal longer than this wants compaction into the snapshot."""
        self.fio = fio
        self.compact_bytes = compact_bytes
        self.dir = directory
        self.path = os.path.join(directory, JOURNAL_FILE)
        self.snapshot_path = os.path.join(directory, SNAPSHOT_FILE)
        self._h = None
        self._size = 0
        self._dirty = False
        self.loaded = checked.Loaded(None, checked.Source.NONE, "")   # where the snapshot came from
        self.damaged_lines = 0                 # lines skipped at open: damaged, with intact lines after them
        self.gone = False                      # the open file's name was removed (flush looks)
        self.behind = False                    # a write failed: changes since are in memory only (append)
        self.behind_writes = 0

    def open(self, load: Callable[[dict], None], apply: Callable[[dict], None], what: str = "journal") -> int:
        """Load the snapshot (``load``), replay the journal (``apply`` per line); lines replayed.
        ``what`` names the state in the log ("pop state")."""
        self.fio.makedirs(self.dir)
        self.loaded = checked.load(self.fio, self.snapshot_path, f"{what} snapshot", check=_is_object)
        if self.loaded.doc is not None:
            load(self.loaded.doc)
        replayed = 0
        good = 0                               # bytes up to the end of the last intact line
        bad: list[int] = []                    # byte positions of damaged lines not (yet) known to be a tail
        if self.fio.exists(self.path):
            raw = read_whole(self.fio, self.path)
            pos = 0
            for line in raw.split(b"\n")[:-1]:    # the part after the last newline is torn
                rec = decode_line(line)
                if rec is _DAMAGED:
                    bad.append(pos)
                elif rec is not None:
                    apply(rec)
                    replayed += 1
                pos += len(line) + 1
                if rec is not _DAMAGED:
                    good = pos
            middle = [p for p in bad if p < good]
            if middle:
                self.damaged_lines = len(middle)
                log.warning("%s: %d damaged line(s) in %s (at byte %s) skipped: intact lines follow, so it is "
                            "not a torn tail and nothing is cut; the changes they held are lost", what,
                            len(middle), self.path, ", ".join(map(str, middle[:5])))
        self._h = self.fio.open(self.path, create=True)
        self._size = good
        self.fio.truncate(self._h, good)       # new lines never follow a torn one
        return replayed

    def append(self, rec: dict) -> None:
        """Write one change (before the broker answers). A write the disk refuses (full, failing)
        does not fail the call that made the change: the owner's state in memory has it, the
        journal is ``behind`` and the owner compacts at its next flush (wants_compaction) once the
        disk takes the snapshot; until then a crash loses those changes (the pop state: messages
        delivered again; never a message lost), and a full disk never stops consumers draining it."""
        body = json.dumps(rec, separators=(",", ":")).encode()
        line = b"%s\t%08x\n" % (body, crc32(body))
        if not self.behind:
            try:
                self.fio.pwrite(self._h, line, self._size)
                self._size += len(line)
                self._dirty = True
                return
            except OSError as e:
                self.behind = True
                self.behind_writes = 0
                log.warning("%s cannot be written (%s): changes are kept in memory and written with the "
                            "next snapshot once the disk takes it (a crash meanwhile loses them)", self.path, e)
        self.behind_writes += 1

    def flush(self) -> None:
        if self._h is not None and not self.gone and not self.fio.exists(self.path):
            # the file (or its directory) was removed while open: what is appended reaches no name and
            # is lost at the next start. The owner compacts now (wants_compaction): the snapshot is
            # written (its directory made again) and the journal opened anew beside it
            self.gone = True
            log.warning("%s is gone (removed while the broker ran?): the state is written again there",
                        self.path)
        if self._dirty and self._h is not None:
            self._dirty = False
            self.fio.fsync(self._h)

    @property
    def wants_compaction(self) -> bool:
        return self._size > self.compact_bytes or self.gone or self.behind

    def compact(self, snapshot: dict) -> None:
        """Write the whole state atomically, then empty the journal (a journal whose file is gone:
        a new one)."""
        checked.write(self.fio, self.snapshot_path, snapshot)
        if self.gone:
            old, self._h = self._h, self.fio.open(self.path, create=True)
            self.fio.close(old)
            self.fio.fsync_dir(os.path.dirname(self.path))
            self.gone = False
        self.fio.truncate(self._h, 0)
        self.fio.fsync(self._h)
        self._size = 0
        self._dirty = False
        if self.behind:
            log.warning("%s: written again (%d change(s) kept in memory meanwhile are in the snapshot)",
                        self.path, self.behind_writes)
            self.behind = False

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


def write_state(fio: FileIO, directory: str, snapshot: dict) -> None:
    """Make ``snapshot`` the whole state of the journal in ``directory``, the journal emptied:
    what a broker opening it finds after a compaction (a follower writes its leader's state
    with it: replication/state.py). The snapshot's previous version is kept as its ``.bak``."""
    _is_object(snapshot)
    fio.makedirs(directory)
    checked.write(fio, os.path.join(directory, SNAPSHOT_FILE), snapshot)
    path = os.path.join(directory, JOURNAL_FILE)
    if fio.exists(path):
        h = fio.open(path, create=True)
        try:
            fio.truncate(h, 0)
            fio.fsync(h)
        finally:
            fio.close(h)


_DAMAGED = object()


def records(raw: bytes) -> list[dict]:
    """The intact changes of a journal's bytes, in order (for readers outside the broker: tools
    and tests); damaged lines and a torn tail are left out."""
    out = []
    for line in raw.split(b"\n")[:-1]:
        rec = decode_line(line)
        if rec is not None and rec is not _DAMAGED:
            out.append(rec)
    return out


def decode_line(line: bytes):
    """The change a journal line holds; None for an empty line; _DAMAGED when it fails its CRC
    or does not parse."""
    if not line:
        return None
    tab = line.rfind(b"\t")
    if tab >= 0:
        body, digits = line[:tab], line[tab + 1:]
        try:
            if len(digits) != 8 or crc32(body) != int(digits, 16):
                return _DAMAGED
        except ValueError:
            return _DAMAGED
        line = body
    try:
        rec = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return _DAMAGED
    return rec if isinstance(rec, dict) else _DAMAGED


def _is_object(doc) -> None:
    if not isinstance(doc, dict):
        raise checked.Damaged(f"a snapshot is a JSON object, not {type(doc).__name__}")
