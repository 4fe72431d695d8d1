"""Tiered reads: offsets below a queue's minimum come from the Parquet archive, the rest from the live log.

``tidemq archive`` keeps every record's queue offset, so a queue's history is its archived
rows below the live log's first offset, then the live log: one row per offset, nothing
twice. Where the archive is: the option ``archivePath``, or (file mode) the destination the
store's manifest records (``<root>/archive/manifest.json``); ``archivePath=""`` turns it off.
With a manifest, only the runs it records are read (a run that died before its manifest
entry is never read); without one (``archivePath`` with a broker), every run under it.

With tiering, "earliest" is offset 0 of each queue (queue offsets start at 0), and offsets
in neither the archive nor the log are a data loss (failOnDataLoss): typically segments
deleted before they were archived (on_unarchived_full=delete), recorded in
``<root>/archive/gaps.json``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..io import OsFileIO
from ..store import layout
from ..store.archive import read_manifest
from .decode import SCHEMA

_PARTITIONS = pa.schema([("run", pa.string()), ("topic", pa.string()), ("day", pa.string())])


@dataclass(frozen=True)
class Archive:
    dest: str
    runs: tuple[str, ...] | None         # the run directories to read; None: every run under dest
    gaps_file: str | None                # the store's gaps.json, when the store's root is known


def archive_of(options) -> Archive | None:
    """The archive a read uses (None: no tiering), from the options and the store's manifest."""
    given = options.get("archivePath")
    root = options.get("path")
    manifest = None
    if root and os.path.exists(layout.manifest_path(root)):
        manifest = read_manifest(OsFileIO(), root)
    gaps = layout.gaps_path(root) if root else None
    if given is not None:
        if not given.strip():
            return None
        dest = os.path.abspath(given)
        runs = _runs(manifest, dest) if manifest is not None else None
        return Archive(dest, runs or None, gaps)
    if manifest is None or not manifest.get("dest"):
        return None
    return Archive(manifest["dest"], _runs(manifest, None), gaps)


def _runs(manifest: dict, dest: str | None) -> tuple[str, ...]:
    """The run directories the manifest records (under ``dest`` only, when given)."""
    out = set()
    for e in manifest["segments"].values():
        d = e.get("dest") or manifest.get("dest")
        if e.get("run") and d and (dest is None or os.path.abspath(d) == dest):
            out.add(os.path.join(d, f"run={e['run']}"))
    return tuple(sorted(out))


def read(archive: Archive, topic: str, qid: int, start: int, end: int,
         batch_rows: int) -> Iterator[tuple[pa.RecordBatch, int]]:
    """The archived records of [start, end) of one queue as batches of SCHEMA, one per offset (a
    repeat is dropped), with how many offsets of the range the archive does not hold."""
    import pyarrow.dataset as ds
    runs = archive.runs
    if runs is not None:
        roots = list(runs)
        gone = [r for r in roots if not os.path.isdir(r)]
        if gone:
            raise FileNotFoundError(f"tidemq: archive runs the manifest records are missing: {', '.join(gone)}")
    else:
        roots = [archive.dest] if os.path.isdir(archive.dest) else []
    got = 0
    if roots:
        part = ds.partitioning(_PARTITIONS, flavor="hive")
        data = ds.dataset(archive.dest, format="parquet", partitioning=part) if runs is None else \
            ds.dataset([ds.dataset(r, format="parquet", partitioning=part, partition_base_dir=os.path.dirname(r))
                        for r in roots])
        cond = ((ds.field("topic") == topic) & (ds.field("queue_id") == qid) &
                (ds.field("queue_offset") >= start) & (ds.field("queue_offset") < end))
        table = data.to_table(filter=cond, columns=SCHEMA.names)
        if table.num_rows:
            table = table.take(pc.sort_indices(table, [("queue_offset", "ascending")]))
            offs = table.column("queue_offset").to_numpy()
            first = np.ones(len(offs), bool)
            first[1:] = offs[1:] != offs[:-1]                 # an offset archived twice: one row
            if not first.all():
                table = table.filter(pa.array(first))
            table = _as_schema(table)
            got = table.num_rows
            for b in table.to_batches(max_chunksize=batch_rows):
                yield b, 0
    if got < end - start:
        yield pa.RecordBatch.from_pylist([], schema=SCHEMA), end - start - got


def _as_schema(table: pa.Table) -> pa.Table:
    cols = []
    for f in SCHEMA:
        c = table.column(f.name)
        if pa.types.is_timestamp(f.type) and c.type != f.type:
            c = pc.cast(c if c.type.tz else pc.assume_timezone(c, "UTC"), f.type)
        elif c.type != f.type:
            c = c.cast(f.type)
        cols.append(c)
    return pa.Table.from_arrays(cols, schema=SCHEMA).combine_chunks()
