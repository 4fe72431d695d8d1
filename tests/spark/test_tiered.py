"""Tiered reads: a topic's history across the Parquet archive and the live log, each message once.

A small real disk (tmpfs) goes through several fill / archive / clean cycles (archive_before_delete),
so a queue's oldest offsets are only in the archive; reads from "earliest" must give every
acknowledged message exactly once, in a batch and in a stream restarted from its checkpoint after
more of the log was archived and deleted under it."""

import json
import os
import shutil

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tidemq.io import OsFileIO
from tidemq.spark import archive
from tidemq.spark.tiered import archive_of
from tidemq.store.archive import read_manifest

from ..support.archive import archiving_store, fill
from ..support.spark import archived_store, filled_and_archived, rewrite_archive_file

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("reader")]


def tiered(spark, root, cl, **options):
    r = spark.read.format("tidemq").option("path", root).option("commitlogDirs", cl).option("topic", "Arch")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def cycle(spark, s, root, dest, cl, acked, seq):
    seq, refusals = fill(s, acked, seq, 200)             # until the disk's warning level refuses writes
    assert refusals, "the disk never filled"
    assert archive.run(spark, root, dest, (cl,))["archived"]
    seq, _ = fill(s, acked, seq, 1)                      # the cleaner deletes what is archived
    return seq


def live_min(spark, root, cl):
    return tiered(spark, root, cl, archivePath="").groupBy("queue_id").min("queue_offset").collect()


def check_once(rows, acked):
    """Every acknowledged body once; per queue, offsets 0..n-1 each once."""
    bodies = [r[2] for r in rows]
    assert len(bodies) == len(set(bodies)) and set(bodies) == set(acked)
    per: dict = {}
    for q, o, _ in rows:
        per.setdefault(q, []).append(o)
    for q, offs in per.items():
        assert sorted(offs) == list(range(len(offs))), f"queue {q}: offsets missing or twice"


def test_batch_and_restarted_stream_read_the_archive_then_the_log(spark, env, tmp_path):
    s, root, dest, cl = archiving_store(env, tmp_path, 2)
    out, ck = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    acked: list = []
    seq = cycle(spark, s, root, dest, cl, acked, 0)

    def stream():
        q = (spark.readStream.format("tidemq").option("path", root).option("commitlogDirs", cl)
             .option("topic", "Arch").option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "4000")
             .load().selectExpr("queue_id", "queue_offset", "substring(body, 1, 9) AS b")
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
             .trigger(availableNow=True).start())
        assert q.awaitTermination(600) and q.exception() is None
        return q

    stream()                                              # what is there after one cycle
    first_end = len(acked)
    read_up_to = dict(spark.read.parquet(out).groupBy("queue_id").max("queue_offset").collect())
    for _ in range(2):
        seq = cycle(spark, s, root, dest, cl, acked, seq)
    mins = dict(live_min(spark, root, cl))
    assert all(mins[q] > read_up_to[q] + 1 for q in (0, 1)), "the restart must begin below the live log"
    q = stream()                                          # restarted: its start is now below the live log
    assert sum(p["numInputRows"] for p in q.recentProgress) == len(acked) - first_end
    check_once([(r.queue_id, r.queue_offset, r.b) for r in spark.read.parquet(out).collect()], acked)

    df = tiered(spark, root, cl)                          # the archive the manifest records, by default
    rows = [(r.queue_id, r.queue_offset, r.body[:9]) for r in df.select("queue_id", "queue_offset", "body").collect()]
    check_once(rows, acked)
    assert df.schema == tiered(spark, root, cl, archivePath="").schema
    assert len(rows) > tiered(spark, root, cl, archivePath="").count()      # the archive mattered
    archived = tiered(spark, root, cl, archivePath=dest, endingOffsets=json.dumps({"Arch": {"0": 5, "1": 5}}))
    got = archived.collect()
    assert sorted((r.queue_id, r.queue_offset) for r in got) == [(q, o) for q in (0, 1) for o in range(5)]
    assert all(r.msg_id and r.store_timestamp and r.topic == "Arch" for r in got)


def test_offsets_in_neither_tier_are_a_data_loss(spark, env, tmp_path):
    s, root, dest, cl = archiving_store(env, tmp_path, 1)
    acked: list = []
    cycle(spark, s, root, dest, cl, acked, 0)
    manifest = read_manifest(OsFileIO(), root)
    run = next(iter(manifest["segments"].values()))["run"]
    lost = spark.read.parquet(os.path.join(dest, f"run={run}")).where("queue_offset < 100").count()
    assert lost == 100
    kept = str(tmp_path / "kept")
    shutil.copytree(dest, kept)                          # as if the first offsets were never archived
    for f in ds.dataset(os.path.join(kept, f"run={run}"), format="parquet").files:
        t = pq.read_table(f)
        rewrite_archive_file(f, t.filter(t.column("queue_offset").to_numpy() >= 100))
    with pytest.raises(Exception, match="DataLossError"):
        tiered(spark, root, cl, archivePath=kept).count()
    skipped = tiered(spark, root, cl, archivePath=kept, failOnDataLoss="false")
    offs = sorted(r.queue_offset for r in skipped.select("queue_offset").collect())
    assert offs == list(range(100, len(acked)))


def test_broker_mode_reads_the_archive_the_broker_names_or_the_one_it_is_given(spark, broker, tmp_path):
    small = {"TIDEMQ_SEGMENT_SIZE_BYTES": str(64 * 1024)}
    dest = str(tmp_path / "archive")
    b, n, report = filled_and_archived(spark, broker, dest, small)
    for name in report["archived"]:                       # what cleanup deletes once archived
        os.remove(os.path.join(b.root, "commitlog", name))
    b2 = broker(root=b.root, env=small)
    read = lambda **o: spark.read.format("tidemq").option("endpoints", b2.endpoint).option("topic", "Orders") \
        .options(**o).load()                              # noqa: E731
    every = sorted(b"order-%d" % i * (1 + i % 250 % 5) for i in range(n))
    for options in ({"archivePath": dest}, {}):          # given, or the one the broker's manifest records
        rows = read(**options).select("queue_id", "queue_offset", "body").collect()
        assert sorted(r.body for r in rows) == every
        assert len({(r.queue_id, r.queue_offset) for r in rows}) == n
    assert read(archivePath="").count() < n              # without the archive: what the log still holds
    from tidemq.client.admin import call
    from tidemq.protocol import admin
    got = call(b2.endpoint, admin.ARCHIVE)
    assert got["ok"] and got["dest"] == dest and got["gaps"] == 0 and got["runs"] == [f"{dest}/run={report['run']}"]
    a = archive_of({"endpoints": b2.endpoint})
    assert (a.dest, a.runs) == (dest, (f"{dest}/run={report['run']}",))
    assert a.gaps_file == f"{b.root}/archive/gaps.json on the broker's host ({b2.endpoint})"


def test_broker_mode_without_the_brokers_archive_in_sight(monkeypatch, tmp_path, caplog):
    """The broker names an archive the driver cannot see (another machine's disk): no tiering by
    default, said once; a broker that cannot say (older): tiering only with archivePath."""
    from tidemq.spark import tiered
    summary = {"dest": str(tmp_path / "elsewhere"), "runs": [str(tmp_path / "elsewhere" / "run=1")],
               "gaps_file": "/srv/tidemq/archive/gaps.json", "gaps": 0}
    monkeypatch.setattr(tiered, "_broker_summary", lambda endpoint, timeout_s, options=None: summary)
    with caplog.at_level("WARNING", logger="tidemq.spark"):
        assert archive_of({"endpoints": "127.0.0.1:1"}) is None
        assert archive_of({"endpoints": "127.0.0.1:1"}) is None
    assert len([r for r in caplog.records if "not visible here" in r.getMessage()]) == 1
    given = archive_of({"endpoints": "127.0.0.1:1", "archivePath": str(tmp_path / "elsewhere")})
    assert given.runs == tuple(summary["runs"]) and given.gaps_file.startswith("/srv/tidemq/archive/gaps.json on")
    monkeypatch.setattr(tiered, "_broker_summary", lambda endpoint, timeout_s, options=None: None)
    assert archive_of({"endpoints": "127.0.0.1:1"}) is None
    assert archive_of({"endpoints": "127.0.0.1:1", "archivePath": "/a"}) == tiered.Archive("/a", None, None)


def test_a_live_range_cleaned_after_planning_is_read_from_the_archive(spark, tmp_path):
    """Planned while the log held everything; the archived head deleted before the executor reads it."""
    from tidemq.spark.backend import DataLossError
    from tidemq.spark.source import TidemqReader, read_partition
    root, report = archived_store(spark, tmp_path)
    reader = TidemqReader({"path": root, "topic": "T"})
    parts = reader.partitions()
    assert all(not p.value[-1] for p in parts)               # nothing planned from the archive yet
    without = TidemqReader({"path": root, "topic": "T", "archivePath": ""})
    untiered = without.partitions()
    for name in report["archived"]:
        os.remove(os.path.join(root, "commitlog", name))
    rows = [b for p in parts for batch in read_partition(reader.options, p) for b in batch.column("body").to_pylist()]
    assert [b[:5] for b in rows] == [b"%05d" % i for i in range(600)]
    with pytest.raises(DataLossError):
        [b for p in untiered for b in read_partition(without.options, p)]


def test_segments_deleted_unarchived_are_reported_as_lost(spark, env, tmp_path):
    """on_unarchived_full=delete: the head went before any archive ran (gaps.json); the archive
    taken afterwards and the log hold the rest."""
    s, root, dest, cl = archiving_store(env, tmp_path, 1, on_unarchived_full="delete")
    acked: list = []
    fill(s, acked, 0, 300)
    assert os.path.exists(os.path.join(root, "archive", "gaps.json"))
    assert archive.run(spark, root, dest, (cl,))["archived"]
    with pytest.raises(Exception, match="gaps.json"):
        tiered(spark, root, cl).count()
    kept = tiered(spark, root, cl, failOnDataLoss="false").select("queue_offset", "body").collect()
    offs = sorted(r.queue_offset for r in kept)
    assert offs == list(range(offs[0], offs[0] + len(offs))) and offs[0] > 0        # one stretch, each once
    assert [r.body[:9] for r in sorted(kept, key=lambda r: r.queue_offset)] == acked[offs[0]:]   # 1 queue: in order
