"""``tidemq archive``: sealed commit-log segments to Parquet, recorded in the store's manifest.

A Spark job reads every sealed segment the manifest does not hold yet (never the active
one: a segment is sealed when it ends with its BLANK record, is full, or was sealed early
by the store, config/sealed.json) and writes its records to
``<dest>/run=<id>/topic=<topic>/day=<yyyy-mm-dd>/`` as Parquet (the source's columns plus
``segment``), fsyncs it, and only then records each segment in
``<root>/archive/manifest.json`` (name, offsets, rows, crc32 of its bytes, run, dest), which is
what lets the cleaner delete it when archive_before_delete is on (store/archive.py). The
run id is written to ``<root>/archive/pending.json`` before any file: a run that dies
before its manifest entry is removed by the next run of the same store (never another
store's, if several share a destination), so a segment is never archived twice. Each segment is
walked (CRCs checked) once, by the executor that writes it, which reports its rows and checksum
in a small file the driver reads into the manifest; the driver only decides which segments are
sealed (walking at most the last one).
``spark.read.parquet(dest)`` reads it all back. The job reads the segment files, so it
runs next to the store (a local master or executors that see the store's disks) and
writes to a local destination.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
import time
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..record.crc import crc32
from ..io import FileIO, OsFileIO
from ..record import codec
from .. import checked, layout
from ..store.archive import read_manifest, write_manifest
from ..store.commit_log import read_sealed
from ..layout import segment_name
from .decode import SPARK_SCHEMA, decode
from .files import StoreFiles

BATCH_ROWS = 65536


class ArchiveError(RuntimeError):
    pass


def walk_segment(buf, limit: int) -> tuple[list[int], np.ndarray, int, bool, int]:
    """Every valid record of a segment, CRCs checked (codec.scan_run's tight loop): (positions,
    sizes, end position, ended by its BLANK record, corrupt records skipped)."""
    positions: list[int] = []
    pos = corrupt = 0
    blank = False
    head = codec.SIZE_MAGIC.unpack_from
    while pos < limit:
        pos, _n, _ = codec.scan_run(buf, pos, limit, positions)
        if pos >= limit:
            break
        kind, size = codec.check_record(buf, pos, limit)
        if kind == codec.REC_OK:                 # cannot happen (scan_run takes every valid record): a guard
            positions.append(pos)
            pos += size
            continue
        if kind == codec.REC_BLANK:
            blank = True
            break
        if kind == codec.REC_CORRUPT and pos + 8 <= limit:
            s, magic = head(buf, pos)
            if magic == codec.MAGIC and codec.FIXED_OVERHEAD <= s and pos + s <= limit:
                corrupt += 1                     # kept by recovery below the flushed offset: skip it
                pos += s
                continue
        break                                    # zeroes: the end of what was written
    at = np.asarray(positions, np.int64)
    arr = np.frombuffer(buf, np.uint8)
    sizes = arr[at[:, None] + np.arange(4)].view(">i4").ravel().astype(np.int64) if len(at) else at
    return positions, sizes, pos, blank, corrupt


class _Segments(DataSourceReader):
    def __init__(self, options) -> None:
        self.segments = json.loads(options["segments"])        # [[path, limit, name], ...]
        self.reports = options["reports"]
        self.dead = json.loads(options.get("dead") or "{}")    # deleted topic -> where its records end

    def partitions(self):
        return [InputPartition(i) for i in range(len(self.segments))] or [InputPartition(-1)]

    def read(self, partition):
        if partition.value < 0:
            return
        path, limit, name = self.segments[partition.value]
        data = _map(path)
        positions, sizes, end, _blank, corrupt = walk_segment(data, limit)
        buf = np.frombuffer(data, np.uint8)
        for lo in range(0, len(positions), BATCH_ROWS):
            # walk_segment checked every record's CRCs: decode does not again
            batch, _ = decode(buf, np.array(positions[lo:lo + BATCH_ROWS]), sizes[lo:lo + BATCH_ROWS], True)
            batch = _without_dead(batch, self.dead)
            day = pc.strftime(batch.column("store_timestamp"), format="%Y-%m-%d", locale="C")
            seg = pa.array([name] * batch.num_rows, pa.string())
            yield pa.RecordBatch.from_arrays(batch.columns + [day, seg], names=batch.schema.names + ["day", "segment"])
        # what the driver records in the manifest, from this one walk (a retried task writes the same)
        _write_json(os.path.join(self.reports, f"{name}.json"), {
            "rows": len(positions), "corrupt_skipped": corrupt, "stopped_at": end,
            "crc32": crc32(memoryview(data)[:end])})


def _without_dead(batch: pa.RecordBatch, dead: dict) -> pa.RecordBatch:
    """Records of deleted topics (store/topics.py: before where the topic ended) are not archived."""
    if not dead or not batch.num_rows:
        return batch
    topic, offset = batch.column("topic"), batch.column("commitlog_offset")
    keep = None
    for name, end in dead.items():
        gone = pc.and_(pc.equal(topic, name), pc.less(offset, end))
        keep = pc.invert(gone) if keep is None else pc.and_(keep, pc.invert(gone))
    return batch.filter(keep)


def _deleted_topics(root: str) -> dict:
    try:
        with open(layout.topics_path(root), "rb") as f:
            doc = checked.decode(f.read())       # (a checked document: store/topics.py)
        return {str(k): int(v) for k, v in doc.get("deleted", {}).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def _write_json(path: str, doc: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


class SegmentsSource(DataSource):
    """Internal to the archive job: whole commit-log segments as rows."""

    @classmethod
    def name(cls) -> str:
        return "tidemq_segments"

    def schema(self):
        return SPARK_SCHEMA + ", day string, segment string"

    def reader(self, schema):
        return _Segments(self.options)


def _map(path: str, fio: FileIO | None = None):
    """A read-only map of a segment (unmapped when the last array over it is gone)."""
    fio = fio or OsFileIO()
    h = fio.open(path, readonly=True)
    try:
        return fio.map(h, fio.size_of(h), readonly=True)
    finally:
        fio.close(h)


def _has_data(path: str, fio: FileIO) -> bool:
    """A segment whose first record has been written (a pre-made next segment is zeroes)."""
    try:
        h = fio.open(path, readonly=True)
    except FileNotFoundError:
        return False
    try:
        head = fio.pread(h, 8, 0)
    finally:
        fio.close(h)
    return len(head) == 8 and codec.SIZE_MAGIC.unpack(head)[1] == codec.MAGIC


def plan(root: str, commitlog_dirs: tuple[str, ...] = ()) -> tuple[list[dict], dict]:
    """The sealed segments not archived yet, and the manifest. A segment is sealed when the store
    sealed it early (config/sealed.json) or a later segment holds data; only the last segment with
    data is walked here (ended by its BLANK record, or full: sealed). Rows and checksums come from
    the executors' walk (run)."""
    files = StoreFiles(root, commitlog_dirs)
    manifest = read_manifest(OsFileIO(), root)
    seals = read_sealed(files.fio, root)
    todo = []
    listing = list(zip(files.segment_starts, files.segment_paths))
    for i, (start, path) in enumerate(listing):
        name = segment_name(start)
        if name in manifest["segments"]:
            continue
        try:
            size = files.fio.file_size(path)
        except FileNotFoundError:
            continue                     # deleted since the listing (cleanup without archive_before_delete)
        limit = seals.get(start, size)
        # a damaged header stops a walk early; it must not make the segment look active forever
        sealed = start in seals or any(_has_data(p, files.fio) for _, p in listing[i + 1:i + 3])
        if not sealed:
            try:
                _pos, _sizes, end, blank, _bad = walk_segment(_map(path, files.fio), limit)
            except FileNotFoundError:
                continue
            sealed = blank or end >= size
        if not sealed:
            break                        # the active segment, and nothing after it is sealed either
        # the store counts a sealed segment as written to its end (BLANK, full or early seal)
        todo.append({"name": name, "path": path, "limit": limit, "start_offset": start, "end_offset": start + size})
    return todo, manifest


def run(spark, root: str, dest: str, commitlog_dirs: tuple[str, ...] = (), progress=None) -> dict:
    """Archive what is sealed and not archived yet; returns a report. ``progress(done, total)``:
    segments walked so far of those to archive, called as the executors finish them (from a
    thread of the driver) and once at the end."""
    os.makedirs(layout.archive_dir(root), exist_ok=True)
    lock = open(layout.archive_lock_path(root), "w")
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ArchiveError(f"another `tidemq archive` runs on {root}") from None
        return _run_locked(spark, root, dest, commitlog_dirs, progress)
    finally:
        lock.close()


class _Watch:
    """Counts the executors' segment reports as they appear (each task writes one when its
    segment is walked) and tells ``progress(done, total)`` when the count changes."""

    def __init__(self, reports: str, total: int, progress, interval_s: float = 0.5) -> None:
        self.reports, self.total, self.progress, self.interval_s = reports, total, progress, interval_s
        self._stop = threading.Event()
        self._seen = -1
        self._thread = threading.Thread(target=self._run, name="tidemq-archive-progress", daemon=True)

    def __enter__(self) -> "_Watch":
        if self.progress is not None:
            self.progress(0, self.total)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                done = sum(1 for n in os.listdir(self.reports) if n.endswith(".json"))
            except OSError:
                continue
            if done != self._seen:
                self._seen = done
                self.progress(min(done, self.total), self.total)


def _remove_unfinished(root: str, manifest: dict) -> list[str]:
    """The run this store started and never recorded: its files go (only this store's own run,
    so a destination shared by several stores is safe)."""
    path = layout.pending_path(root)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        pending = json.load(f)
    runs = {e.get("run") for e in manifest["segments"].values()}
    removed = []
    shutil.rmtree(os.path.join(pending["dest"], f"_reports-{pending['run']}"), ignore_errors=True)
    if pending["run"] not in runs:
        d = os.path.join(pending["dest"], f"run={pending['run']}")
        if os.path.isdir(d):
            shutil.rmtree(d)
            removed.append(f"run={pending['run']}")
    os.remove(path)
    return removed


def _topic_dirs_as_strings(out: str) -> None:
    """``topic=<name>`` directories whose name Spark's partition discovery would read as a number or
    a date (``42``, ``2024-01-01``, ``5d``, ``NaN``) get their first character %-escaped: Spark and
    pyarrow unescape it, and the value is a string (``spark.read.parquet(dest)`` gives topic as one)."""
    for name in os.listdir(out):
        if not name.startswith("topic="):
            continue
        value = name[len("topic="):]
        if value[:1].isdigit() or value[:1] in "+-." or value in ("NaN", "Infinity"):
            os.rename(os.path.join(out, name), os.path.join(out, f"topic=%{ord(value[0]):02X}{value[1:]}"))


def _fsync_tree(top: str) -> None:
    """The run's files and directories durable before the manifest says they exist."""
    for d, _dirs, files in os.walk(top, topdown=False):
        for name in files:
            fd = os.open(os.path.join(d, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _run_locked(spark, root, dest, commitlog_dirs, progress=None) -> dict:
    if "://" in dest:
        raise ArchiveError(f"the archive destination must be a local path (it is fsynced before the manifest "
                           f"records it), not {dest!r}")
    t0 = time.monotonic()
    todo, manifest = plan(root, commitlog_dirs)
    removed = _remove_unfinished(root, manifest)
    report = {"archived": [], "rows": 0, "removed_unfinished_runs": removed, "dest": dest}
    if not todo:
        report["seconds"] = round(time.monotonic() - t0, 3)
        return report
    run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
    with open(layout.pending_path(root), "w") as f:       # before any file of the run exists
        json.dump({"run": run_id, "dest": dest}, f)
        f.flush()
        os.fsync(f.fileno())
    spark.dataSource.register(SegmentsSource)
    out = os.path.join(dest, f"run={run_id}")
    reports = os.path.join(dest, f"_reports-{run_id}")            # not read as data ("_" prefix)
    os.makedirs(reports, exist_ok=True)
    segments = json.dumps([[s["path"], s["limit"], s["name"]] for s in todo])
    df = (spark.read.format("tidemq_segments").option("segments", segments).option("reports", reports)
          .option("dead", json.dumps(_deleted_topics(root))).load())
    with _Watch(reports, len(todo), progress):
        df.write.mode("append").partitionBy("topic", "day").parquet(out)
    try:
        for s in todo:
            with open(os.path.join(reports, f"{s['name']}.json")) as f:
                s.update(json.load(f))
    except FileNotFoundError as e:
        raise ArchiveError(f"an executor wrote no report for a segment ({e.filename}): the run is not recorded "
                           f"and is redone by the next run") from None
    finally:
        shutil.rmtree(reports, ignore_errors=True)
    _topic_dirs_as_strings(out)
    _fsync_tree(out)
    now_ms = int(time.time() * 1000)
    for s in todo:
        manifest["segments"][s["name"]] = {k: s[k] for k in ("start_offset", "end_offset", "rows", "crc32")} | {
            "run": run_id, "dest": dest, "archived_at_ms": now_ms, "corrupt_skipped": s["corrupt_skipped"]}
    manifest["dest"] = dest                               # where tiered reads find the archive
    write_manifest(OsFileIO(), root, manifest)
    os.remove(layout.pending_path(root))
    report.update(archived=[s["name"] for s in todo], rows=sum(s["rows"] for s in todo), run=run_id,
                  seconds=round(time.monotonic() - t0, 3))
    if progress is not None:
        progress(len(todo), len(todo))
    return report
