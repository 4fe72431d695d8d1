"""Tiered reads by the JVM reader itself (ArchiveRangeReader, no hand-over to the Python reader):
through a real broker whose oldest segments are only in the archive, every message once and the
same rows as the Python reader, the archived ones served by the JVM (its counter); offsets in
neither tier fail the read under failOnDataLoss and are skipped otherwise; a live range whose head
was cleaned after planning reads that head from the archive (broker and file mode). (tests/spark/test_tiered.py runs its
batch and stream cases with both readers too.)"""

import json
import os
import shutil

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tidemq.spark import planner

from ..support.spark import archived_store, filled_and_archived, rewrite_archive_file, rows_by_position

pytestmark = pytest.mark.timeout(900)


def without_offsets(src: str, dst: str, queue: int, below: int) -> int:
    """A copy of the archive src at dst without queue ``queue``'s offsets below ``below`` (as if
    never archived); how many rows went."""
    shutil.copytree(src, dst)
    gone = 0
    for f in ds.dataset(dst, format="parquet").files:
        t = pq.read_table(f)
        keep = ~((t.column("queue_id").to_numpy() == queue) & (t.column("queue_offset").to_numpy() < below))
        gone += int((~keep).sum())
        rewrite_archive_file(f, t.filter(keep))
    return gone


def test_the_jvm_reader_reads_the_archive_then_the_log_once(spark, jvm, broker, tmp_path):
    small = {"TIDEMQ_SEGMENT_SIZE_BYTES": str(64 * 1024)}
    dest = str(tmp_path / "archive")
    b, n, report = filled_and_archived(spark, broker, dest, small)
    b1 = broker(root=b.root, env=small)                   # planned while the log holds everything:
    planned = planner.handle(json.dumps({"op": "batch", "options": {"endpoints": b1.endpoint, "topic": "Orders"}})
                             .encode())["partitions"]
    assert planned and all(p["archive"] and not p["archived"] for p in planned)   # ranges of the live log
    assert b1.stop() == 0
    for name in report["archived"]:                       # what cleanup deletes once archived
        os.remove(os.path.join(b.root, "commitlog", name))
    b2 = broker(root=b.root, env=small)
    before = jvm.archivedRowsServed()
    for p in planned:                                     # read after the clean: their heads from the archive
        p["source"]["endpoints"] = [b2.endpoint]
        assert list(jvm.queueOffsets(json.dumps(p))) == list(range(p["start"], p["end"]))
    assert jvm.archivedRowsServed() > before

    def read(reader, **options):
        return (spark.read.format("tidemq").option("endpoints", b2.endpoint).option("topic", "Orders")
                .option("reader", reader).options(**options).load())

    live = read("jvm", archivePath="").count()
    assert 0 < live < n
    before = jvm.archivedRowsServed()
    got = rows_by_position(read("jvm"))
    assert jvm.archivedRowsServed() - before == n - live  # the archived part, read by the JVM reader
    assert len(got) == n == len({(r["queue_id"], r["queue_offset"]) for r in got})
    before = jvm.archivedRowsServed()
    assert got == rows_by_position(read("python"))        # the same rows, column for column
    assert jvm.archivedRowsServed() == before             # (that one read by the Python reader)
    assert read("jvm").schema == read("jvm", archivePath="").schema

    q0 = got[0]["queue_id"]
    kept = str(tmp_path / "kept")
    gone = without_offsets(dest, kept, q0, 7)
    assert gone == 7
    with pytest.raises(Exception, match=r"DataLossError: 7 offsets of Orders queue %d .* in neither the store nor "
                                        r"the archive at %s" % (q0, kept)):
        read("jvm", archivePath=kept).count()
    skipped = rows_by_position(read("jvm", archivePath=kept, failOnDataLoss="false"))
    assert skipped == [r for r in got if not (r["queue_id"] == q0 and r["queue_offset"] < 7)]


def test_a_live_range_cleaned_after_planning_reads_its_head_from_the_archive(spark, jvm, tmp_path):
    root, report = archived_store(spark, tmp_path)

    def plan(**options):
        got = planner.handle(json.dumps({"op": "batch", "options": {"path": root, "topic": "T", **options}}).encode())
        assert got["ok"], got
        return got["partitions"]

    parts = plan()
    assert parts and all(p["archive"] and not p["archived"] for p in parts)   # all live when planned
    untiered = plan(archivePath="")
    for name in report["archived"]:
        os.remove(os.path.join(root, "commitlog", name))
    before = jvm.archivedRowsServed()
    assert [o for p in parts for o in jvm.queueOffsets(json.dumps(p))] == list(range(600))
    assert jvm.archivedRowsServed() > before
    with pytest.raises(Exception, match="DataLossError"):
        [jvm.queueOffsets(json.dumps(p)) for p in untiered]
