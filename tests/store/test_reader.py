"""StoreReader (the read path) on its own, and how MessageStore answers reads when it is not running."""

from tidemq.store import GetStatus, Message, MessageStore
from tidemq.store.reader import StoreReader


def test_a_reader_built_from_the_parts_reads_what_the_store_reads(store):
    rs = store.put_batch([Message("T", b"m%d" % i, tags="a" if i % 2 else "b", keys=f"k{i}", queue_id=0)
                          for i in range(6)])
    running = [True]
    r = StoreReader(store.config, store.segments, store.commit_log, store.queues, store.topics, store.index,
                    1 << 30, lambda: running[0])
    assert [m.body for m in r.get("G", "T", 0, 0, tags=["a"]).messages] == [b"m1", b"m3", b"m5"]
    sizes, data = r.get_raw("T", 0, 2, max_count=2).records
    assert list(sizes) == [rs[2].size, rs[3].size] and len(data) == sum(sizes)
    assert r.get_by_commitlog_offset(rs[4].commitlog_offset).body == b"m4"
    assert [m.body for m in r.query_by_key("T", "k5")] == [b"m5"]
    assert r.offset_for_timestamp("T", 0, 0) == 0
    running[0] = False
    assert r.get("G", "T", 0, 0).status is GetStatus.SERVICE_NOT_AVAILABLE


def test_reads_before_start_and_after_shutdown_answer_service_not_available(make_config):
    s = MessageStore(make_config())
    assert s.get("G", "T", 0, 3).status is GetStatus.SERVICE_NOT_AVAILABLE
    assert s.get_raw("T", 0, 3).status is GetStatus.SERVICE_NOT_AVAILABLE
    s.start()
    s.put(Message("T", b"x", queue_id=0))
    s.shutdown()
    g = s.get_raw("T", 0, 0)
    assert g.status is GetStatus.SERVICE_NOT_AVAILABLE and g.next_offset == 0
