"""`tidemq archive` and archive_before_delete on a small real disk (a 16 MiB tmpfs).

Writers fill the commit log until the disk's warning level refuses them; with
on_unarchived_full=refuse nothing can be deleted before the archive job has copied the
segments out, so every acknowledged message is always in the store or in the archive.
"""

import json
import os

import pytest

from tidemq.io import OsFileIO
from tidemq.spark import archive
from tidemq.store.archive import read_gaps, read_manifest
from tidemq.store import Message, StoreConfig

from ..support.archive import PAD, archiving_store, config, fill

pytestmark = pytest.mark.timeout(900)


def store_bodies(spark, root, cl_dir):
    df = spark.read.format("tidemq").option("path", root).option("commitlogDirs", cl_dir).option("topic", "Arch").load()
    return [r.body[:9] for r in df.select("body").collect()]


def test_nothing_acknowledged_is_lost_and_cleanup_waits_for_the_archive(spark, env, tmp_path):
    s, root, dest, cl = archiving_store(env, tmp_path, 2)
    acked: list = []
    seq = 0
    for cycle in range(3):
        seq, refusals = fill(s, acked, seq, 200)          # 10,000 x 2 KiB: far more than the disk holds
        assert refusals, "the disk never filled"
        assert "tidemq archive" in refusals[-1] and "disk full" in refusals[-1]
        report = archive.run(spark, root, dest, (cl,))
        assert report["archived"] and report["rows"] > 0
        seq, _ = fill(s, acked, seq, 1)                   # the cleaner deletes what is archived ...
        assert len(os.listdir(cl)) < 12
        assert s.write_refusal() is None                  # ... and writes go on
    manifest = read_manifest(OsFileIO(), root)["segments"]
    in_archive = [r.body[:9] for r in spark.read.parquet(dest).where("topic = 'Arch'").select("body").collect()]
    assert len(in_archive) == len(set(in_archive)), "a segment was archived twice"
    assert sum(e["rows"] for e in manifest.values()) == spark.read.parquet(dest).count()
    everywhere = set(in_archive) | set(store_bodies(spark, root, cl))
    assert set(acked) <= everywhere
    assert len(acked) > 3 * 8 * 400                          # several disks' worth went through
    assert not os.path.exists(os.path.join(root, "archive", "gaps.json"))
    assert archive.run(spark, root, dest, (cl,))["archived"] == []     # the active segment never


def test_delete_mode_keeps_writing_and_records_the_gap(spark, env, tmp_path):
    cl = env.tmpfs("cl", 16)
    root = str(tmp_path / "root")
    s = env.open(config(root, cl, on_unarchived_full="delete"))
    s.create_topic("Arch", 2)
    acked: list = []
    fill(s, acked, 0, 300)
    assert s.write_refusal() is None
    gaps = read_gaps(OsFileIO(), root)["gaps"]
    assert gaps and all(g["end_offset"] > g["start_offset"] for g in gaps)
    assert s.segments.min_offset == gaps[-1]["end_offset"]


def test_an_unfinished_run_is_removed_and_redone_and_other_runs_are_kept(spark, env, tmp_path):
    cl = env.tmpfs("cl", 16)
    root, dest = str(tmp_path / "root"), str(tmp_path / "archive")
    s = env.open(config(root, cl))
    s.create_topic("Arch", 1)
    fill(s, [], 0, 40)                                      # ~4 sealed segments
    for run in ("crashed", "another-stores"):               # a shared destination: only ours is ours
        os.makedirs(os.path.join(dest, f"run={run}", "topic=Arch"))
        open(os.path.join(dest, f"run={run}", "topic=Arch", "part-0.parquet"), "wb").write(b"partial")
    os.makedirs(os.path.join(root, "archive"), exist_ok=True)
    json.dump({"run": "crashed", "dest": dest}, open(os.path.join(root, "archive", "pending.json"), "w"))
    report = archive.run(spark, root, dest, (cl,))
    assert report["removed_unfinished_runs"] == ["run=crashed"]
    assert os.path.isdir(os.path.join(dest, "run=another-stores"))
    assert not os.path.exists(os.path.join(root, "archive", "pending.json"))
    assert spark.read.parquet(os.path.join(dest, f"run={report['run']}")).count() == report["rows"]


def test_several_topics_in_one_segment_keep_their_topics(spark, tmp_path):
    from tidemq.store import MessageStore
    root, dest = str(tmp_path / "root"), str(tmp_path / "archive")
    s = MessageStore(StoreConfig(root_dir=root, auto_create_topics=True, segment_size_bytes=64 * 1024, index_enabled=False)).start()
    s.put_batch([Message(topic="Orders" if i % 2 else "Refund", body=b"%s-%d" % (b"o" if i % 2 else b"r", i))
                 for i in range(3000)])
    s.shutdown()
    said: list = []
    report = archive.run(spark, root, dest, progress=lambda done, total: said.append((done, total)))
    assert report["archived"]
    n = len(report["archived"])           # how far it got, as the executors finish segments
    assert said[0] == (0, n) and said[-1] == (n, n) and all(t == n for _, t in said)
    assert [d for d, _ in said] == sorted(d for d, _ in said)
    rows = spark.read.parquet(dest).select("topic", "body").collect()
    assert rows and all(r.body.startswith(b"o" if r.topic == "Orders" else b"r") for r in rows)


def test_records_of_a_deleted_topic_are_not_archived(spark, tmp_path):
    from tidemq.store import MessageStore
    root, dest = str(tmp_path / "root"), str(tmp_path / "archive")
    s = MessageStore(StoreConfig(root_dir=root, auto_create_topics=True, segment_size_bytes=64 * 1024,
                                 index_enabled=False)).start()
    s.put_batch([Message(topic="Gone" if i % 2 else "Kept", body=b"old-%d" % i) for i in range(2000)])
    s.delete_topic("Gone")
    s.put_batch([Message(topic="Gone", body=b"new-%d" % i) for i in range(1000)])   # created again
    s.shutdown()
    assert archive.run(spark, root, dest)["archived"]
    rows = spark.read.parquet(dest).select("topic", "body").collect()
    gone = [r.body for r in rows if r.topic == "Gone"]
    assert rows and all(b.startswith(b"new-") for b in gone), "the deleted topic's records were archived"
    assert sum(1 for r in rows if r.topic == "Kept") > 0


def test_numeric_topic_names_read_back_as_strings(spark, tmp_path):
    from tidemq.store import MessageStore
    root, dest = str(tmp_path / "root"), str(tmp_path / "archive")
    s = MessageStore(StoreConfig(root_dir=root, auto_create_topics=True, segment_size_bytes=64 * 1024, index_enabled=False)).start()
    names = ("42", "007")                         # partition discovery alone would read 42 and 7 (int)
    s.put_batch([Message(topic=names[i % 2], body=b"%d" % i + PAD) for i in range(300)])
    s.shutdown()
    report = archive.run(spark, root, dest)
    df = spark.read.parquet(dest)
    assert dict(df.dtypes)["topic"] == "string"
    got = {r.topic: r["count"] for r in df.groupBy("topic").count().collect()}
    assert set(got) == set(names) and sum(got.values()) == report["rows"]
    for name in report["archived"]:                                    # what cleanup would delete
        os.remove(os.path.join(root, "commitlog", name))
    assert tidemq_rows(spark, root, dest) == 300                       # the tiered reader finds them too
    assert tidemq_rows(spark, root, "") == 300 - report["rows"]


def tidemq_rows(spark, root, dest):
    return sum(spark.read.format("tidemq").option("path", root).option("topic", t).option("archivePath", dest)
               .load().count() for t in ("42", "007"))


def test_an_early_sealed_segment_counts_as_archived(spark, tmp_path):
    from tidemq.store import MessageStore
    from tidemq.store.archive import ArchiveGuard
    from tidemq.io import OsFileIO
    root, dest = str(tmp_path / "root"), str(tmp_path / "archive")
    s = MessageStore(StoreConfig(root_dir=root, auto_create_topics=True, segment_size_bytes=64 * 1024, index_enabled=False)).start()
    s.put_batch([Message(topic="T", body=b"x" * 100) for _ in range(50)])
    first = s.segments.segments[0]
    s.commit_log.seal_early(first) if hasattr(s.commit_log, "seal_early") else pytest.skip("no early seal here")
    s.put_batch([Message(topic="T", body=b"y" * 100) for _ in range(50)])
    report = archive.run(spark, root, dest)
    assert segment_name_of(first) in report["archived"]
    assert ArchiveGuard(OsFileIO(), root, "refuse").archived(first)
    s.shutdown()


def segment_name_of(mf):
    from tidemq.store.mapped_file import segment_name
    return segment_name(mf.start_offset)
