"""Deleting a topic: its queues go at once, its records stay in the log but dead (never dispatched
again, not found by key), through a restart, a power loss with the whole log re-dispatched, and a
crash in the middle of the deletion; a topic created again with the name starts empty; other
topics are untouched."""

from tidemq.store import GetStatus, Message
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import MEMORY_ROOT, NothingUnsyncedSurvives, memory_config

GONE_DIR = MEMORY_ROOT + "/consumequeue/gone"


def fill(s, topic, n, tag=b""):
    for i in range(n):
        assert s.put(Message(topic, tag + b"%d" % i, keys=[f"k{i}"])).ok


def test_delete_then_restart_and_power_loss(stores):
    cfg = memory_config(topic_queues_default=2, flush_disk_type="SYNC_FLUSH")
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    fill(s, "gone", 20)
    fill(s, "kept", 10)
    rep = s.delete_topic("gone")
    assert rep["queues"] == 2 and rep["messages"] == 20
    assert s.queue_count("gone") == 0 and "gone" not in s.topic_names()
    assert not fio.exists(GONE_DIR)
    assert s.query_by_key("gone", "k1") == []
    assert s.delete_topic("gone") is None, "unknown now"
    s.shutdown()

    s = stores(cfg, fio)                                   # a normal restart
    assert "gone" not in s.topic_names() and sum(s.max_offset("kept", q) for q in range(2)) == 10
    s.kill()
    fio = fio.after_power_loss(NothingUnsyncedSurvives())
    fio.unlink(MEMORY_ROOT + "/checkpoint")                # no checkpoint and no queues:
    fio.rmtree(MEMORY_ROOT + "/consumequeue")              # the whole log is dispatched again
    s = stores(cfg, fio)
    assert "gone" not in s.topic_names() and not fio.exists(GONE_DIR), "a re-dispatch skips dead records"
    assert sum(s.max_offset("kept", q) for q in range(2)) == 10

    s.create_topic("gone", 1)                              # created again: starts empty
    assert s.max_offset("gone", 0) == 0 and s.get("g", "gone", 0, 0).status is not GetStatus.FOUND
    fill(s, "gone", 3, b"new")
    assert [m.body for m in s.get("g", "gone", 0, 0, 10).messages] == [b"new0", b"new1", b"new2"]
    assert [m.body for m in s.query_by_key("gone", "k1")] == [b"new1"], "the old topic's key is dead"


def test_a_crash_between_saving_the_deletion_and_deleting_the_queues(stores, monkeypatch):
    cfg = memory_config(flush_disk_type="SYNC_FLUSH")
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    fill(s, "gone", 5)
    monkeypatch.setattr(s.queues, "drop_topic", lambda topic: 0)   # the process dies before this
    s.delete_topic("gone")
    s.kill()
    assert fio.exists(GONE_DIR)
    s = stores(cfg, fio.after_power_loss(NothingUnsyncedSurvives()))
    assert "gone" not in s.topic_names() and not s.fio.exists(GONE_DIR)


def test_a_topic_created_again_is_rebuilt_without_the_deleted_ones_records(stores):
    cfg = memory_config(flush_disk_type="SYNC_FLUSH")
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    fill(s, "T", 10, b"old")
    s.delete_topic("T")
    s.create_topic("T", 1)
    fill(s, "T", 3, b"new")
    s.kill()
    fio = fio.after_power_loss(NothingUnsyncedSurvives())
    fio.unlink(MEMORY_ROOT + "/checkpoint")
    fio.rmtree(MEMORY_ROOT + "/consumequeue")              # rebuilt from the whole log
    s = stores(cfg, fio)
    assert [m.body for m in s.get("g", "T", 0, 0, 32).messages] == [b"new0", b"new1", b"new2"]
    assert s.max_offset("T", 0) == 3
