"""The archive manifest and the archive-before-delete guard (store/archive.py): a segment counts as
archived only when the manifest covers all of it; the manifest is re-read when another process
rewrites it; an unreadable one archives nothing; a gap is recorded; the cleaner deletes only
archived segments, or at the warning level with on_unarchived_full="delete"."""

from __future__ import annotations

import json

from tidemq.io import ManualClock
from tidemq.store import Message
from tidemq.store.archive import ArchiveGuard, manifest_path, read_gaps, read_manifest, write_manifest
from tidemq.store.mapped_file import segment_name
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import MEMORY_ROOT, memory_config

SEG = 8 * 1024


def entry(mf, end=None):
    return {"start_offset": mf.start_offset, "end_offset": mf.start_offset + mf.wrote_pos if end is None else end,
            "rows": 1, "crc32": 0, "run": "r1", "archived_at_ms": 0}


def archive(fio, segments, mtime_ms, **ends):
    """What `tidemq archive` writes for ``segments`` (another process: a new mtime)."""
    doc = read_manifest(fio, MEMORY_ROOT)
    for mf in segments:
        doc["segments"][segment_name(mf.start_offset)] = entry(mf, ends.get(mf.path))
    write_manifest(fio, MEMORY_ROOT, doc)
    fio.mtime_now_ms = mtime_ms


def store_with_segments(stores, n=4, **cfg):
    clock = ManualClock()
    s = stores(memory_config(segment_size_bytes=SEG, archive_before_delete=True, **cfg), FaultyFileIO(), clock)
    while len(s.segments) < n:
        assert s.put(Message("T", b"x" * 1000)).ok
    return s, clock


def test_no_manifest_reads_as_empty_and_a_written_one_reads_back():
    fio = FaultyFileIO()
    assert read_manifest(fio, MEMORY_ROOT) == {"segments": {}}
    write_manifest(fio, MEMORY_ROOT, {"segments": {"x": {"end_offset": 5}}})
    raw = fio.pread(fio.open(manifest_path(MEMORY_ROOT)), 1000, 0)
    assert json.loads(raw)["doc"] == {"segments": {"x": {"end_offset": 5}}}, "a checked document, still JSON"
    assert read_manifest(fio, MEMORY_ROOT)["segments"]["x"]["end_offset"] == 5


def test_archived_means_the_manifest_covers_the_whole_segment_and_it_is_reread_when_it_changes(stores):
    s, _ = store_with_segments(stores)
    fio, segs = s.fio, s.segments.segments
    guard = ArchiveGuard(fio, MEMORY_ROOT, "refuse")
    assert not guard.archived(segs[0]) and guard.unarchived_count(segs) == 3, "the active segment never counts"
    archive(fio, segs[:2], 1, **{segs[1].path: segs[1].start_offset + 10})     # the second only in part
    assert guard.archived(segs[0]) and not guard.archived(segs[1])
    assert guard.unarchived_count(segs) == 2
    archive(fio, segs[1:2], 2)                     # rewritten by the job: seen at the next look
    assert guard.archived(segs[1]) and guard.unarchived_count(segs) == 1


def test_an_unreadable_manifest_archives_nothing(stores, caplog):
    s, _ = store_with_segments(stores)
    fio, segs = s.fio, s.segments.segments
    archive(fio, segs[:3], 1)
    guard = ArchiveGuard(fio, MEMORY_ROOT, "refuse")
    assert guard.archived(segs[0])
    h = fio.open(manifest_path(MEMORY_ROOT))
    fio.truncate(h, 10)
    fio.mtime_now_ms = 2
    assert not guard.archived(segs[0]) and "archive manifest" in caplog.text and "no intact copy" in caplog.text


def test_a_damaged_manifest_falls_back_to_its_previous_version(stores):
    s, _ = store_with_segments(stores)
    fio, segs = s.fio, s.segments.segments
    archive(fio, segs[:1], 1)
    archive(fio, segs[1:2], 2)                     # the first version is kept as .bak
    h = fio.open(manifest_path(MEMORY_ROOT))
    fio.truncate(h, 10)
    guard = ArchiveGuard(fio, MEMORY_ROOT, "refuse")
    assert guard.archived(segs[0]) and not guard.archived(segs[1]), "the previous version: segment 1 waits for a run"


def test_the_cleaner_deletes_only_archived_segments_and_says_why(stores):
    s, clock = store_with_segments(stores, file_reserved_time_hours=0)
    segs = list(s.segments.segments)
    archive(s.fio, segs[:2], 1)
    s.trigger_delete_expired()
    s.clean()
    assert s.segments.segments[0] is segs[2], "the two archived ones went, then it stopped"
    assert "is not archived yet (archive_before_delete)" in s.cleaner.last.why_not


def test_a_gap_is_recorded_when_an_unarchived_segment_goes_at_the_warning_level(stores):
    s, clock = store_with_segments(stores, file_reserved_time_hours=0, on_unarchived_full="delete")
    fio = s.fio
    head = s.segments.segments[0]
    fio.capacity_bytes = int(fio.disk_usage("/").used_bytes / 0.95)     # above the warning ratio (90 %)
    s.check_disk()
    assert s.disk.refusal is not None
    s.clean()
    assert head.path in s.cleaner.last.deleted
    gaps = read_gaps(fio, MEMORY_ROOT)["gaps"]
    assert gaps[0]["segment"] == segment_name(head.start_offset) and gaps[0]["start_offset"] == head.start_offset
    assert "disk at the warning level" in gaps[0]["why"] and s.archive.gaps_recorded == len(gaps)
