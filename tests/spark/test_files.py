"""spark/files.py: a store's files read directly, read-only, without a broker: topics (topics.json
and the queues on disk), each queue's range (its first unit whose record is still in the log),
consume-queue units, segments mapped read-only and the segment of a log offset, the log's end."""

import json
import os

import numpy as np
import pytest

from tidemq.spark.files import StoreFiles, StoreFilesError
from tidemq.store import Message, MessageStore, StoreConfig

SEG = 64 * 1024


def make(root, put=()):
    s = MessageStore(StoreConfig(root_dir=str(root), segment_size_bytes=SEG, index_enabled=False,
                                 file_reserved_time_hours=0, delete_when="")).start()
    try:
        for topic, queues, bodies in put:
            s.create_topic(topic, queues)
            assert s.put_batch([Message(topic, b) for b in bodies]).all_ok()
    finally:
        s.shutdown()


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    make(root, [("Old", 1, [b"m%05d" % i + b"." * 500 for i in range(300)]),
                ("A", 2, [b"a%d" % i for i in range(5)])])
    return root


def test_no_store_is_an_error(tmp_path):
    with pytest.raises(StoreFilesError, match="no store at"):
        StoreFiles(str(tmp_path / "nothing"))


def test_topics_queue_counts_and_ranges(store):
    f = StoreFiles(str(store))
    try:
        assert f.topics() == {"Old": 1, "A": 2}
        assert f.queue_count("A") == 2
        with pytest.raises(StoreFilesError, match="unknown topic 'B'"):
            f.queue_count("B")
        assert [f.queue_range("A", q) for q in (0, 1)] == [(0, 3), (0, 2)]
        assert f.queue_range("Old", 0) == (0, 300) and f.first_unit("Old", 0) == 0
    finally:
        f.close()


def test_queues_on_disk_count_though_topics_json_lags(store):
    (store / "config" / "topics.json").write_text(json.dumps({"topics": {"A": {"queue_count": 1}}}))
    f = StoreFiles(str(store))
    assert f.topics() == {"A": 2, "Old": 1}
    (store / "config" / "topics.json").write_text("{not json")
    with pytest.raises(StoreFilesError, match="topics.json is unreadable"):
        f.topics()


def test_units_point_at_the_records_in_the_mapped_segments(store):
    f = StoreFiles(str(store))
    try:
        u = f.units("A", 0, 0, 10)
        assert len(u) == 3 and list(u["offset"]) == sorted(u["offset"]) and (u["size"] > 0).all()
        assert len(f.units("A", 0, 1, 2)) == 1 and f.units("A", 0, 1, 2)["offset"][0] == u["offset"][1]
        assert len(f.units("A", 0, 3, 10)) == 0, "past the end: none"
        seg = f.locate(u["offset"])
        assert (seg == len(f.segment_starts) - 1).all(), "A was written last"
        i = int(seg[0])
        data = f.segment(i)
        at = int(u["offset"][0]) - f.segment_starts[i]
        record = bytes(data[at:at + int(u["size"][0])])
        assert b"a0" in record and b"A" in record
        assert f.locate(np.array([-1, 0, SEG - 1, SEG])).tolist() == [-1, 0, 0, 1]
        assert f.log_end() == f.segment_starts[-1] + SEG
    finally:
        f.close()


def test_a_queue_starts_at_its_first_record_still_in_the_log(store):
    segs = sorted(n for n in os.listdir(store / "commitlog") if n.isdigit())
    assert len(segs) >= 3
    f = StoreFiles(str(store))
    for name in segs[:2]:                        # what cleanup deletes while the reader is open
        os.remove(store / "commitlog" / name)
    f.refresh()
    try:
        first, end = f.queue_range("Old", 0)
        assert 0 < first < end == 300
        assert f.units("Old", 0, first, first + 1)["offset"][0] >= f.segment_starts[0]
        assert f.units("Old", 0, first - 1, first)["offset"][0] < f.segment_starts[0]
        assert f.first_unit("Old", 0) == 0, "its unit files still begin at 0"
        assert f.locate(np.array([0]))[0] == -1, "before the first segment left"
    finally:
        f.close()


def test_a_store_with_no_segments_and_no_queues(tmp_path):
    root = tmp_path / "empty"
    (root / "commitlog").mkdir(parents=True)
    f = StoreFiles(str(root))
    assert f.topics() == {} and f.log_end() == 0 and f.segment_starts == []
