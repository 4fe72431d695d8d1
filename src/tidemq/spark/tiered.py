"""Tiered reads: offsets below a queue's minimum come from the Parquet archive, the rest from the live log.

``tidemq archive`` keeps every record's queue offset, so a queue's history is its archived
rows below the live log's first offset, then the live log: one row per offset, nothing
twice. Where the archive is: the option ``archivePath``, or by default the destination the
store's manifest records (``<root>/archive/manifest.json``): read there in file mode, asked of
the broker in broker mode (its admin method Archive answers the manifest's destination, runs
and gaps file, paths on the broker's host; the default is used only where that destination is
a directory the driver sees: the executors must see it too, at the same path, e.g. a shared
mount). ``archivePath=""`` turns it off. Only the runs the manifest records are read (a run
that died before its manifest entry is never read); with ``archivePath`` where the store
records no run (another store's archive, a broker that does not answer Archive), every run
under it.

With tiering, "earliest" is offset 0 of each queue (queue offsets start at 0), and offsets
in neither the archive nor the log are a data loss (failOnDataLoss): typically segments
deleted before they were archived (on_unarchived_full=delete), recorded in
``<root>/archive/gaps.json`` (which the error names, on the broker's host in broker mode).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..io import OsFileIO
from .. import layout
from ..store.archive import archive_summary
from .backend import BrokerError
from .decode import SCHEMA
from .entry import load_module

log = logging.getLogger("tidemq.spark")

_PARTITIONS = pa.schema([("run", pa.string()), ("topic", pa.string()), ("day", pa.string())])


@dataclass(frozen=True)
class Archive:
    dest: str
    runs: tuple[str, ...] | None         # the run directories to read; None: every run under dest
    gaps_file: str | None                # the store's gaps.json, when the store's root is known


def archive_of(options) -> Archive | None:
    """The archive a read uses (None: no tiering), from the options and the store's archive
    summary: read from ``<path>/archive`` in file mode, asked of the broker (admin method
    Archive) in broker mode."""
    given = options.get("archivePath")
    if given is not None and not given.strip():
        return None
    root = options.get("path")
    endpoints = options.get("endpoints") or options.get("endpoint")
    summary, gaps = None, None
    if root:
        gaps = layout.gaps_path(root)
        if os.path.exists(layout.manifest_path(root)):
            summary = archive_summary(OsFileIO(), root)
    elif endpoints:
        summary, endpoint = _any_member_summary([e.strip() for e in endpoints.split(",") if e.strip()],
                                                float(options.get("timeoutSeconds", 30)), options)
        if summary is not None:
            gaps = f"{summary['gaps_file']} on the broker's host ({endpoint})"
    if given is not None:
        dest = os.path.abspath(given)
        runs = tuple(r for r in summary["runs"] if os.path.abspath(os.path.dirname(r)) == dest) if summary else ()
        return Archive(dest, runs or None, gaps)
    if summary is None or not summary.get("dest"):
        return None
    if endpoints and not root and not os.path.isdir(summary["dest"]):
        _say_once(f"tidemq: the broker's archive {summary['dest']} is not visible here: reads use the live log "
                  f"only (give the option archivePath, a path where the driver and executors see the archive)")
        return None
    return Archive(summary["dest"], tuple(summary["runs"]), gaps)


def _any_member_summary(members: list[str], timeout_s: float, options) -> tuple[dict | None, str]:
    """(_broker_summary of the first member that answers, that member): the members in turn, again
    after a pause while none answers (an election under way), for up to ``timeout_s``."""
    import time
    since, pause_s = time.monotonic(), 0.1
    while True:
        for endpoint in members:
            try:
                return _broker_summary(endpoint, timeout_s, options), endpoint
            except BrokerError as e:
                if not e.unreachable or time.monotonic() - since > timeout_s:
                    raise
        time.sleep(pause_s)
        pause_s = min(2.0, pause_s * 2)


def _broker_summary(endpoint: str, timeout_s: float, options=None) -> dict | None:
    """The broker's answer to the admin method Archive (signed and over TLS as the read's options
    say); None from a broker that has no such method (older) or refuses it (a user without the
    permission: no tiering); a broker that cannot be reached (TLS, an endpoint) raises BrokerError
    naming the option to change."""
    import time
    from ..protocol.signing import date_time, signed_metadata
    from .backend import Refused, connection, explain, unreachable
    admin = load_module("tidemq.client.admin")           # grpc: missing, the one-line error with the fix
    conn = connection(options or {})
    md = signed_metadata(conn["access_key"], conn["secret_key"], date_time(time.time())) if conn["access_key"] \
        else None
    try:
        got = admin.call(endpoint, load_module("tidemq.protocol.admin").ARCHIVE, timeout_s=timeout_s, metadata=md,
                         tls=conn["tls"], root_certificates=conn["root_certificates"])
    except admin.grpc.RpcError as e:
        better = explain(e, endpoint, options or {})
        if better is not None and e.code() != admin.grpc.StatusCode.UNIMPLEMENTED:
            better.unreachable = unreachable(e) and not isinstance(better, Refused)   # a refusal: at once
            raise better from None
        _say_once(f"tidemq: the broker at {endpoint} does not say where its archive is ({e.code().name}): "
                  f"tiered reads only with the option archivePath")
        return None
    return got if got.get("ok") else None


_said: set[str] = set()


def _say_once(text: str) -> None:
    if text not in _said:
        _said.add(text)
        log.warning(text)


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
