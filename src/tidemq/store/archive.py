"""What the archive job has copied out, and what cleanup deleted without it.

``<root>/archive/manifest.json`` is written by ``tidemq archive`` (tidemq.spark.archive),
one entry per archived commit-log segment::

    {"segments": {"<20-digit start offset>": {"start_offset", "end_offset", "rows",
                  "crc32", "run", "archived_at_ms"}}}

With ``archive_before_delete`` on, the commit-log cleaner deletes a segment only when
the manifest holds it (re-read whenever the file changes: the job is another process).
When the disk reaches the warning level anyway, ``on_unarchived_full`` decides: "refuse"
(the default: writes stay refused at the warning level, nothing is lost, the refusal says
to run the archive) or "delete" (the segment is deleted and the gap is recorded in
``<root>/archive/gaps.json``: segment, offsets, when, why).
"""

from __future__ import annotations

import logging
import os

from .. import checked
from ..io import FileIO
from ..layout import archive_dir, gaps_path, manifest_path, segment_name
from .mapped_file import MappedFile

log = logging.getLogger("tidemq.store")


def read_manifest(fio: FileIO, root: str) -> dict:
    """The manifest (a checked document, tidemq/checked.py: a damaged one falls back to its
    previous version; with both damaged no segment counts as archived, so none is deleted
    unarchived, and the next archive run copies them again: tiered reads drop the repeats)."""
    doc = checked.load(fio, manifest_path(root), "archive manifest", check=_is_manifest).doc
    if doc is None:
        return {"segments": {}}
    doc.setdefault("segments", {})
    return doc


def _is_manifest(doc) -> None:
    if not (isinstance(doc, dict) and isinstance(doc.get("segments", {}), dict)):
        raise checked.Damaged("not an archive manifest")


def recorded_runs(manifest: dict, dest: str | None = None) -> tuple[str, ...]:
    """The run directories (``<dest>/run=<id>``) the manifest records, under ``dest`` only when
    given (an absolute path): what a reader of the archive reads (a run that died before its
    manifest entry is not among them)."""
    out = set()
    for e in manifest["segments"].values():
        d = e.get("dest") or manifest.get("dest")
        if e.get("run") and d and (dest is None or os.path.abspath(d) == dest):
            out.add(os.path.join(d, f"run={e['run']}"))
    return tuple(sorted(out))


def archive_summary(fio: FileIO, root: str) -> dict:
    """Where the store's archive is, for readers (the Spark source's tiered reads; the broker's
    admin method Archive): {"manifest": its path, "dest": the destination of the last run (None
    before any), "runs": the run directories it records, "gaps_file": gaps.json's path, "gaps": how
    many segments it records as deleted before they were archived}."""
    manifest = read_manifest(fio, root)
    path = gaps_path(root)
    gaps = len(read_gaps(fio, root)["gaps"])
    return {"manifest": manifest_path(root), "dest": manifest.get("dest"), "runs": list(recorded_runs(manifest)),
            "gaps_file": path, "gaps": gaps}


def write_manifest(fio: FileIO, root: str, doc: dict) -> None:
    fio.makedirs(archive_dir(root))
    checked.write(fio, manifest_path(root), doc)


def read_gaps(fio: FileIO, root: str) -> dict:
    """``{"gaps": [...]}``: the segments deleted before they were archived (a checked document)."""
    doc = checked.load(fio, gaps_path(root), "archive gaps", check=_is_gaps).doc
    return doc if doc is not None else {"gaps": []}


def _is_gaps(doc) -> None:
    if not (isinstance(doc, dict) and isinstance(doc.get("gaps"), list)):
        raise checked.Damaged("not a list of gaps")


class ArchiveGuard:
    """The cleaner's ``can_delete`` and gap recording for archive_before_delete."""

    def __init__(self, fio: FileIO, root: str, on_unarchived_full: str) -> None:
        self.fio = fio
        self.root = root
        self.on_unarchived_full = on_unarchived_full
        self._mtime: int | None = None
        self._segments: dict = {}
        self.gaps_recorded = 0

    def _refresh(self) -> None:
        path = manifest_path(self.root)
        try:
            mtime = self.fio.mtime_ms(path) if self.fio.exists(path) else None
        except OSError:
            mtime = None
        if mtime != self._mtime:
            try:
                self._segments = read_manifest(self.fio, self.root)["segments"]
                self._mtime = mtime
            except (OSError, ValueError) as e:
                log.error("archive manifest %s is unreadable (%s): no segment counts as archived", path, e)
                self._segments = {}

    def archived(self, mf: MappedFile) -> bool:
        self._refresh()
        e = self._segments.get(segment_name(mf.start_offset))
        return e is not None and e.get("end_offset", 0) >= mf.start_offset + mf.wrote_pos

    def unarchived_count(self, segments: list[MappedFile]) -> int:
        self._refresh()
        return sum(1 for mf in segments[:-1] if not self.archived(mf))

    def record_gap(self, mf: MappedFile, now_ms: int, why: str) -> None:
        """A segment deleted before it was archived: its offsets are gone for good."""
        path = gaps_path(self.root)
        doc = read_gaps(self.fio, self.root)
        doc["gaps"].append({"segment": segment_name(mf.start_offset), "start_offset": mf.start_offset,
                            "end_offset": mf.start_offset + mf.wrote_pos, "deleted_at_ms": now_ms, "why": why})
        self.fio.makedirs(os.path.dirname(path))
        checked.write(self.fio, path, doc)
        self.gaps_recorded += 1
        log.error("segment %s deleted before it was archived (on_unarchived_full=delete, %s): commit-log offsets "
                  "[%d, %d) are lost; recorded in %s", mf.path, why, mf.start_offset, mf.start_offset + mf.wrote_pos,
                  path)
