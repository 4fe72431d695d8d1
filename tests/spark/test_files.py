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


def test_a_sync_group_members_files_are_read_up_to_what_the_group_confirmed(tmp_path):
    """A real SYNC group of two. The follower stopped (SIGSTOP, kept in the in-sync set), a send is
    written in the leader's log and not confirmed (SLAVE_PERSISTENCE_TIMEOUT): the broker does not
    serve it (a failover to the follower takes it back). File mode on the leader's store plans and
    reads what the broker serves, not that record (it read it: the files hold it); once the
    follower has it and the group's high watermark is past it, file mode reads it too. The same store
    under a broker without a group: no served end (it serves its whole log), read whole as before."""
    import signal

    from tidemq.client import Producer
    from tidemq.protocol.stubs import Code
    from tidemq.spark import planner
    from tidemq.spark.backend import FileBackend

    from ..support.group import Group
    from ..support.wait import wait_until

    def file_mode(root):
        """Bodies of topic T as Spark's file mode plans (the planner) and reads them (FileBackend)."""
        ans = planner.handle(json.dumps({"op": "batch", "options": {"path": root, "topic": "T"}}).encode())
        assert ans["ok"], ans
        fb = FileBackend(root)
        try:
            return sorted(bytes(r["body"]) for p in ans["partitions"]
                          for batch, _ in fb.read("T", p["queue"], p["start"], p["end"]) for r in batch.to_pylist())
        finally:
            fb.close()

    g = Group(str(tmp_path), 2, mode="SYNC", env={"TIDEMQ_REPLICATION_TIMEOUT_MS": "300",
                                                   "TIDEMQ_REPLICA_LAG_TIME_MAX_MS": "600000"})
    try:
        g.start(0, role="leader")
        g.start(1, leader=0)
        g.wait_in_sync(0, [1])
        sent = [b"a%02d" % i for i in range(20)]
        with Producer(g.endpoint(0), timeout_s=60) as p:
            assert all(r.ok for r in p.send_batch("T", sent))
            wait_until(lambda: file_mode(g.root(0)) == sorted(sent), "the served end past the confirmed sends")
            g.signal(1, signal.SIGSTOP)
            r = p.send_batch("T", [b"unconfirmed"])[0]
            assert r.code == Code.SLAVE_PERSISTENCE_TIMEOUT
            assert sorted(g.read_topic(0, "T")) == sorted(sent), "the broker does not serve it"
            assert file_mode(g.root(0)) == sorted(sent), "nor does file mode"
            g.signal(1, signal.SIGCONT)
            wait_until(lambda: file_mode(g.root(0)) == sorted(sent + [b"unconfirmed"]), "confirmed: read")
    finally:
        for i in range(g.n):
            if g.alive(i):
                g.signal(i, signal.SIGCONT)
        g.kill_all()
    from ..support.brokers import CLIENT_HOME, brokers
    with brokers(g.root(0), CLIENT_HOME) as start:       # the same store under a broker without a group
        b = start(env=g.env)
        b.stop()
    assert not os.path.exists(os.path.join(g.root(0), "config", "served_end.json")), "it serves its whole log"
    assert file_mode(g.root(0)) == sorted(sent + [b"unconfirmed"])


def test_queues_end_at_the_last_intact_record_below_the_served_end_whatever_a_damaged_unit_says(tmp_path):
    """A SYNC member's served end (config/served_end.json): each queue ends past its last record that
    ends at or before it. A damaged unit past it pointing low (or a hole) never moves the end past
    a record that is not served; its previous version (.bak) stands in for a damaged file; both
    damaged: StoreFilesError (never the whole log)."""
    from tidemq.broker.replication.served_end import ServedEnd
    from tidemq.io import OsFileIO
    from tidemq.layout import list_segments, queue_dir, served_end_path
    from tidemq.store.consume_queue import UNIT

    root = str(tmp_path / "store")
    s = MessageStore(StoreConfig(root_dir=root, segment_size_bytes=SEG, index_enabled=False)).start()
    try:
        s.create_topic("A", 1)
        rs = s.put_batch([Message("A", b"a%d" % i, queue_id=0) for i in range(10)])
    finally:
        s.shutdown()
    assert StoreFiles(root).queue_range("A", 0) == (0, 10), "no served end: the whole log (as before)"
    se = ServedEnd(OsFileIO(), root)
    se.open()
    assert StoreFiles(root).queue_range("A", 0) == (0, 0)
    se.save(lambda: rs[5].commitlog_offset + rs[5].size)                 # a0..a5 confirmed
    assert StoreFiles(root).queue_range("A", 0) == (0, 6)
    se.save(lambda: rs[3].commitlog_offset)                              # never lowered
    assert StoreFiles(root).queue_range("A", 0) == (0, 6)
    [(_, cq)] = list_segments(OsFileIO(), queue_dir(os.path.join(root, "consumequeue"), "A", 0))
    fd = os.open(cq, os.O_WRONLY)
    try:
        os.pwrite(fd, UNIT.pack(rs[0].commitlog_offset, rs[0].size, 0), 9 * UNIT.size)   # a9's: points at a0
        os.pwrite(fd, UNIT.pack(0, 0, 0), 8 * UNIT.size)                                  # a8's: a hole
    finally:
        os.close(fd)
    assert StoreFiles(root).queue_range("A", 0) == (0, 6), "a7 (past the served end) is not read"
    se.save(lambda: rs[7].commitlog_offset + rs[7].size)
    assert StoreFiles(root).queue_range("A", 0) == (0, 8)
    se.cut(rs[2].commitlog_offset)              # this log cut back there (a follower's divergent tail)
    assert StoreFiles(root).queue_range("A", 0) == (0, 2)
    se.save(lambda: rs[5].commitlog_offset + rs[5].size)
    se.save(lambda: rs[7].commitlog_offset + rs[7].size)
    assert StoreFiles(root).queue_range("A", 0) == (0, 8)
    path = served_end_path(root)
    with open(path, "r+b") as f:                                  # the file damaged: its .bak (lower) read
        f.seek(30)
        f.write(b"9")
    assert StoreFiles(root).queue_range("A", 0) == (0, 6)
    with open(path + ".bak", "wb") as f:
        f.write(b"garbage")
    with pytest.raises(StoreFilesError, match="served end"):
        StoreFiles(root).queue_range("A", 0)
