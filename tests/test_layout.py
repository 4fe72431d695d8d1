"""tidemq/layout.py: the store root's paths and file names, and that the store, its config and
the tools that read its files (tidemq.spark) all use them."""

from __future__ import annotations

import os

from tidemq.io import OsFileIO
from tidemq.spark.files import StoreFiles
from tidemq import layout
from tidemq.store import Message, MessageStore
from tidemq.store.commit_log import read_sealed
from tidemq.testing.faulty_io import FaultyFileIO

from .support.store import small_config


def test_segment_names_are_20_digits_and_parse_back():
    assert layout.segment_name(0) == "0" * 20
    assert layout.segment_name(1 << 30) == "00000000001073741824"
    for n in (0, 1, 1 << 30, 10 ** 19):
        assert layout.parse_segment_name(layout.segment_name(n)) == n
    for other in ("", "lock", "0" * 19, "0" * 21, "0000000000000000000x", "0" * 19 + ".", ".tidemq-dir"):
        assert layout.parse_segment_name(other) is None


def test_list_segments_through_the_fileio_seam():
    fio = FaultyFileIO()
    fio.makedirs("/s/commitlog")
    for name in (layout.segment_name(2048), layout.segment_name(0), layout.segment_name(1024), layout.DIR_MARKER,
                 "00000000000000000000.tmp"):
        fio.close(fio.open(os.path.join("/s/commitlog", name), create=True))
    fio.makedirs("/s/commitlog/" + layout.segment_name(4096))     # a directory is listed too: the name decides
    assert layout.list_segments(fio, "/s/commitlog") == [
        (0, "/s/commitlog/" + "0" * 20), (1024, "/s/commitlog/" + layout.segment_name(1024)),
        (2048, "/s/commitlog/" + layout.segment_name(2048)), (4096, "/s/commitlog/" + layout.segment_name(4096))]
    assert layout.list_segments(fio, "/s/nothing") == []


def test_list_segments_of_a_missing_directory_or_a_file_is_empty(tmp_path):
    (tmp_path / "f").write_bytes(b"")
    assert layout.list_segments(OsFileIO(), str(tmp_path / "missing")) == []
    assert layout.list_segments(OsFileIO(), str(tmp_path / "f")) == []


def test_paths_under_a_root():
    r = "/data"
    assert layout.lock_path(r) == "/data/lock"
    assert layout.checkpoint_path(r) == "/data/checkpoint"
    assert layout.abort_path(r) == "/data/abort"
    assert layout.commitlog_dir(r) == "/data/commitlog"
    assert layout.consumequeue_dir(r) == "/data/consumequeue"
    assert layout.topic_dir(layout.consumequeue_dir(r), "T") == "/data/consumequeue/T"
    assert layout.queue_dir(layout.consumequeue_dir(r), "T", 3) == "/data/consumequeue/T/3"
    assert layout.index_dir(r) == "/data/index"
    assert layout.config_dir(r) == "/data/config"
    assert layout.topics_path(r) == "/data/config/topics.json"
    assert layout.sealed_path(r) == "/data/config/sealed.json"
    assert layout.archive_dir(r) == "/data/archive"
    assert layout.manifest_path(r) == "/data/archive/manifest.json"
    assert layout.gaps_path(r) == "/data/archive/gaps.json"
    assert layout.pending_path(r) == "/data/archive/pending.json"
    assert layout.archive_lock_path(r) == "/data/archive/.lock"


def test_the_config_derives_its_paths_from_the_layout(tmp_path):
    cfg = small_config(tmp_path / "s")
    root = cfg.root_dir
    assert cfg.commitlog_paths == (layout.commitlog_dir(root),)
    assert cfg.consumequeue_path == layout.consumequeue_dir(root)
    assert cfg.index_path == layout.index_dir(root)
    assert cfg.config_path == layout.config_dir(root)
    assert cfg.checkpoint_path == layout.checkpoint_path(root)
    assert cfg.abort_path == layout.abort_path(root)
    other = small_config(tmp_path / "s", commitlog_dirs=(str(tmp_path / "d1"), str(tmp_path / "d2")))
    assert other.commitlog_paths == (str(tmp_path / "d1"), str(tmp_path / "d2"))


def test_a_running_store_holds_what_the_layout_says(tmp_path):
    cfg = small_config(tmp_path / "s")
    root = cfg.root_dir
    s = MessageStore(cfg).start()
    try:
        assert s.put(Message("T", b"x", keys="k", queue_id=1)).ok
        s.flush_queues()
        assert os.path.exists(layout.lock_path(root)) and os.path.exists(layout.abort_path(root))
        assert os.path.exists(layout.checkpoint_path(root)) and os.path.exists(layout.topics_path(root))
        assert os.path.exists(os.path.join(layout.commitlog_dir(root), layout.DIR_MARKER))
        assert [start for start, _ in layout.list_segments(OsFileIO(), layout.commitlog_dir(root))] == [0]
        cq = layout.queue_dir(layout.consumequeue_dir(root), "T", 1)
        assert [start for start, _ in layout.list_segments(OsFileIO(), cq)] == [0]
        assert os.path.exists(os.path.join(layout.index_dir(root), layout.INDEX_MARKER))
        assert len(layout.list_segments(OsFileIO(), layout.index_dir(root))) == 1
    finally:
        s.shutdown()
    assert not os.path.exists(layout.abort_path(root))          # a clean shutdown removes it


def test_early_seals_are_read_from_the_layouts_file(tmp_path):
    fio = FaultyFileIO()
    assert read_sealed(fio, "/s") == {}
    fio.makedirs(layout.config_dir("/s"))
    h = fio.open(layout.sealed_path("/s"), create=True)
    fio.pwrite(h, b'{"1024": 512}', 0)
    fio.close(h)
    assert read_sealed(fio, "/s") == {1024: 512}


def test_store_files_read_a_store_through_fileio_and_the_layout():
    # the Spark source's file mode on the in-memory file system: nothing goes around the seam
    fio = FaultyFileIO()
    cfg = small_config("/s")
    s = MessageStore(cfg, fio=fio).start()
    try:
        s.create_topic("T", 2)
        for i in range(5):
            assert s.put(Message("T", b"m%d" % i, queue_id=i % 2)).ok
        s.flush_queues()
        files = StoreFiles("/s", fio=fio)
        assert files.topics() == {"T": 2}
        assert files.segment_starts == [0] and files.segment_paths == [os.path.join(layout.commitlog_dir("/s"),
                                                                                      "0" * 20)]
        assert files.queue_range("T", 0) == (0, 3) and files.queue_range("T", 1) == (0, 2)
        units = files.units("T", 0, 0, 3)
        seg = files.segment(0)
        bodies = []
        for u in units:
            pos, size = int(u["offset"]), int(u["size"])
            bodies.append(bytes(seg[pos:pos + size][codec_body_slice(seg, pos)]))
        assert bodies == [b"m0", b"m2", b"m4"]
        files.close()
    finally:
        s.shutdown()


def codec_body_slice(seg, pos: int) -> slice:
    from tidemq.record import codec
    blen = int.from_bytes(bytes(seg[pos + codec.OFF_BODYLEN:pos + codec.OFF_BODY]), "big")
    return slice(codec.OFF_BODY, codec.OFF_BODY + blen)
