"""A store remembers the settings it ran with (config/store.json): commands on a stopped store
need only --root; a configuration file and TIDEMQ_* still win; Spark's file reader finds the
commit-log directories."""

import json
import os

from click.testing import CliRunner

from tidemq.cli.main import cli
from tidemq.config import StoreConfig
from tidemq.io import OsFileIO
from tidemq.spark.files import StoreFiles
from tidemq.store import Message, MessageStore, remembered

from ..support.store import small_config


def start(cfg):
    return MessageStore(cfg).start()


def test_commands_on_a_stopped_store_need_only_the_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    elsewhere = ["disk-a", "disk-b"]               # relative: remembered as absolute paths
    cfg = small_config(tmp_path / "root", commitlog_dirs=tuple(elsewhere), segment_size_bytes=32 * 1024)
    s = start(cfg)
    for i in range(100):
        assert s.put(Message("T", b"m%03d" % i + b"x" * 1000)).ok
    s.shutdown()
    got = remembered.recall(str(tmp_path / "root"))
    assert got["commitlog_dirs"] == [str(tmp_path / d) for d in elsewhere]
    assert got["segment_size_bytes"] == 32 * 1024 and "root_dir" not in got

    monkeypatch.chdir("/")                         # another directory, no --config
    r = CliRunner().invoke(cli, ["disk", "--root", str(tmp_path / "root"), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    paths = {d["path"] for d in json.loads(r.output)["directories"] if d["role"] == "commitlog"}
    assert paths == {str(tmp_path / d) for d in elsewhere}
    r = CliRunner().invoke(cli, ["verify", "--root", str(tmp_path / "root")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    files = StoreFiles(str(tmp_path / "root"))
    assert set(files.commitlog_dirs) == {str(tmp_path / d) for d in elsewhere} and files.segment_paths


def test_a_configuration_file_still_wins_over_what_is_remembered(tmp_path):
    root = tmp_path / "root"
    start(small_config(root, segment_size_bytes=32 * 1024)).shutdown()
    toml = tmp_path / "t.toml"
    toml.write_text("[store]\nsegment_size_bytes = 65536\n")
    base = remembered.recall(str(root))
    assert StoreConfig.load(str(toml), env={}, section="store", base=base).segment_size_bytes == 65536
    assert StoreConfig.load(None, env={"TIDEMQ_SEGMENT_SIZE_BYTES": "131072"}, base=base).segment_size_bytes == 131072
    assert StoreConfig.load(None, env={}, base=base).segment_size_bytes == 32 * 1024


def test_written_only_when_changed_and_an_unreadable_file_is_ignored(tmp_path):
    root = tmp_path / "root"
    cfg = small_config(root)
    start(cfg).shutdown()
    p = remembered.path(str(root))
    before = os.stat(p).st_mtime_ns, os.stat(p).st_ino
    start(cfg).shutdown()
    assert (os.stat(p).st_mtime_ns, os.stat(p).st_ino) == before, "same settings: not rewritten"
    start(cfg.replace(file_reserved_time_hours=1.0)).shutdown()
    assert remembered.recall(str(root))["file_reserved_time_hours"] == 1.0
    with open(p, "wb") as fh:
        fh.write(b"{not json")
    assert remembered.recall(str(root)) == {}
    start(cfg).shutdown()                          # the store starts and writes it again
    assert remembered.recall(str(root))["file_reserved_time_hours"] == cfg.file_reserved_time_hours
    assert OsFileIO().exists(p)


def test_a_start_without_a_directory_the_store_used_is_said(tmp_path, caplog):
    root = tmp_path / "root"
    start(small_config(root, commitlog_dirs=(str(tmp_path / "a"), str(tmp_path / "b")))).shutdown()
    with caplog.at_level("WARNING", logger="tidemq.store"):
        start(small_config(root, commitlog_dirs=(str(tmp_path / "a"),))).shutdown()
    said = [r.getMessage() for r in caplog.records if "last ran with" in r.getMessage()]
    assert len(said) == 1 and str(tmp_path / "b") in said[0] and str(tmp_path / "a") + "," not in said[0]
