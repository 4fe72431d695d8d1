"""`tidemq archive` as a user runs it: a separate process with its own Spark."""

import json
import os
import subprocess
import sys

import pytest

from tidemq.io import OsFileIO
from tidemq.store import Message, MessageStore, StoreConfig
from tidemq.store.archive import read_manifest

pytestmark = pytest.mark.timeout(900)


def archive_cli(*args):
    return subprocess.run([sys.executable, "-m", "tidemq.cli.main", "archive", *args], capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))


def test_archive_writes_parquet_and_the_manifest(tmp_path):
    root = tmp_path / "data"
    s = MessageStore(StoreConfig(root_dir=str(root), auto_create_topics=True, segment_size_bytes=64 * 1024, index_enabled=False)).start()
    s.put_batch([Message(topic="T", body=b"x" * 1000, tags="a") for _ in range(200)])    # ~3 sealed segments
    s.shutdown()
    r = archive_cli("--root", str(root), "--json", "--master", "local[1]")
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert len(report["archived"]) >= 2 and report["dest"] == str(tmp_path / "archive")
    manifest = read_manifest(OsFileIO(), str(root))["segments"]
    assert sorted(manifest) == report["archived"]
    assert sum(e["rows"] for e in manifest.values()) == report["rows"]
    assert os.path.isdir(tmp_path / "archive" / f"run={report['run']}" / "topic=T")
    again = archive_cli("--root", str(root), "--master", "local[1]")
    assert again.returncode == 0 and "nothing to archive" in again.stdout
    for run in (r, again):               # Spark's banner and warnings go to a file, not the terminal
        assert "log4j" not in run.stderr and "NativeCodeLoader" not in run.stderr, run.stderr
    assert "log4j" in (root / "archive" / "spark.log").read_text()


def test_archive_of_a_missing_store_is_a_clear_error(tmp_path):
    r = archive_cli("--root", str(tmp_path / "nope"))
    assert r.returncode != 0 and "no store at" in r.stderr
