"""StoreReader (the read path) on its own, and how MessageStore answers reads when it is not running."""

from tidemq.record import codec
from tidemq.store import GetStatus, Message, MessageStore
from tidemq.store.reader import StoreReader
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import MEMORY_ROOT, memory_config


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


def _records(g):
    from tidemq.record import codec
    sizes, data = g.records
    out, pos = [], 0
    for size in sizes:
        out.append(codec.decode_record(data, pos, int(size)))
        pos += int(size)
    return out


def test_get_raw_reads_a_queue_scattered_in_the_log_across_segments(make_config, open_store):
    s = open_store(make_config(segment_size_bytes=8192))
    bodies = {q: [] for q in range(3)}
    for i in range(300):                                   # three queues interleaved: no two records of a queue adjacent
        body = b"q%d-%04d" % (i % 3, i) + b"." * (i % 50)
        s.put(Message("T", body, queue_id=i % 3))
        bodies[i % 3].append(body)
    assert len(s.segments.segments) > 5
    for q in range(3):
        got, at, answers = [], 0, 0
        while at < 100:
            g = s.get_raw("T", q, at, max_count=64)
            assert g.status is GetStatus.FOUND
            msgs = _records(g)
            assert [m.queue_offset for m in msgs] == list(range(at, at + len(msgs)))   # in order, none skipped
            got += [m.body for m in msgs]
            at = g.next_offset
            answers += 1
        assert got == bodies[q] and answers > 2            # one segment per answer
    assert s.get_raw("T", 0, 100).status is GetStatus.OFFSET_OVERFLOW_ONE


def test_get_raw_bounds_bytes_but_always_gives_one_record(store):
    store.put_batch([Message("T", b"x" * 1000, queue_id=0) for _ in range(10)])
    g = store.get_raw("T", 0, 0, max_bytes=3000)
    assert len(g.records[0]) == 2 and g.next_offset == 2
    g = store.get_raw("T", 0, 5, max_bytes=10)
    assert len(g.records[0]) == 1 and g.next_offset == 6


def test_get_raw_skips_what_cleanup_removed(make_config, open_store):
    s = open_store(make_config(segment_size_bytes=8192, file_reserved_time_hours=0, delete_when="",
                               delete_commit_log_files_interval_ms=0))
    s.put_batch([Message("T", b"y" * 500, queue_id=0) for _ in range(60)])
    s.trigger_delete_expired()
    s.clean()
    mn = s.min_offset("T", 0)
    assert mn > 0
    g = s.get_raw("T", 0, 0)
    assert g.status is GetStatus.OFFSET_TOO_SMALL and g.next_offset == mn
    g = s.get_raw("T", 0, mn)
    assert g.status is GetStatus.FOUND and _records(g)[0].queue_offset == mn


def test_get_over_a_kept_corrupt_record_answers_a_status(stores):
    """A record recovery kept although invalid (corruption below the durable offset): a get from
    before it answers with the messages around it, never a CodecError."""
    cfg = memory_config()
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    rs = [s.put(Message("T", b"m%02d" % i + b"x" * 200)) for i in range(30)]
    s.shutdown()
    fio.files[MEMORY_ROOT + "/commitlog/" + "0" * 20].data[rs[10].commitlog_offset + 4] ^= 0xFF   # MAGIC bit rot
    s = stores(cfg, fio)
    assert s.recovery.problems                   # kept and reported, as designed
    g = s.get("g", "T", 0, 0, max_count=32)
    assert len(g.messages) >= 10


def test_two_requested_tags_with_the_same_hash_are_both_served(stores):
    assert codec.tags_hash("Aa") == codec.tags_hash("BB")
    s = stores(memory_config(), FaultyFileIO())
    s.put(Message("T", b"1", tags="Aa"))
    s.put(Message("T", b"2", tags="BB"))
    g = s.get("g", "T", 0, 0, tags=["Aa", "BB"])
    assert [m.body for m in g.messages] == [b"1", b"2"]


# Damaged records are never served (issue 12) ------------------------------------------------

def _damaged_store(stores, where: int, n: int = 30, victims=(10,)):
    """A stopped store of ``n`` messages (one queue) whose records ``victims`` have one byte
    flipped ``where`` bytes into the record (88+: the body; 20: QUEUEOFFSET; -15: properties)."""
    cfg = memory_config()
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    rs = s.put_batch([Message("T", b"m%02d" % i + b"x" * 200, tags="a") for i in range(n)])
    s.shutdown()
    seg = fio.files[MEMORY_ROOT + "/commitlog/" + "0" * 20].data
    for v in victims:
        at = rs[v].commitlog_offset + (where if where >= 0 else rs[v].size + where)
        seg[at] ^= 0x01
    return stores(cfg, fio), rs


def test_get_skips_a_damaged_record_counts_it_and_serves_the_rest(stores, caplog):
    for where in (100, 20, -15):                        # body, header, properties
        s, rs = _damaged_store(stores, where)
        got, off = [], 0
        while off < s.max_offset("T", 0):
            g = s.get("g", "T", 0, off, max_count=4)
            assert g.next_offset > off
            got += [m.body[:3] for m in g.messages]
            off = g.next_offset
        assert got == [b"m%02d" % i for i in range(30) if i != 10], where
        assert s.stats()["records_damaged"] == 1
        assert s.get_by_commitlog_offset(rs[10].commitlog_offset) is None
        assert s.get_by_commitlog_offset(rs[11].commitlog_offset).body[:3] == b"m11"
        only = s.get("g", "T", 0, 10, max_count=1)
        assert only.status is GetStatus.MESSAGE_DAMAGED and only.next_offset == 11 and not only.messages
        s.shutdown()


def test_get_raw_never_returns_a_record_that_fails_its_crc(stores):
    s, rs = _damaged_store(stores, 150, victims=(3, 4, 17))
    got, off = [], 0
    while off < 30:
        g = s.get_raw("T", 0, off, max_count=5)
        assert g.next_offset > off
        if g.status is GetStatus.FOUND:
            msgs = _records(g)
            assert all(m.intact() for m in msgs)
            got += [m.queue_offset for m in msgs]
        else:
            assert g.status is GetStatus.MESSAGE_DAMAGED and g.records is None
        off = g.next_offset
    assert got == [i for i in range(30) if i not in (3, 4, 17)]
    assert s.stats()["records_damaged"] == 3
    g = s.get_raw("T", 0, 3, max_count=2)
    assert g.status is GetStatus.MESSAGE_DAMAGED and g.next_offset == 5



def test_get_raw_lays_the_records_out_once_after_the_room(stores):
    """The frame: the room (zero, or the header ``head`` answers, written as the frame is made), the
    sizes, the records (what ``records`` are views of); with a damaged record among them, the frame
    holds the others only (and the header is for them)."""
    import zlib
    for victims in ((), (4,)):
        s, rs = _damaged_store(stores, 150, n=12, victims=victims)
        g = s.get_raw("T", 0, 2, max_count=6, room=64)
        frame, room, headed = g.frame
        assert headed is False
        asked = []
        h = s.get_raw("T", 0, 2, max_count=6, room=64,
                      head=lambda *a: asked.append(a) or b"H" * 10)
        assert h.frame[2] is True and bytes(h.frame[0][:10]) == b"H" * 10 and bytes(h.frame[0][10:64]) == bytes(54)
        (nxt, lo, hi, count, crc), = asked
        assert (nxt, count) == (h.next_offset, len(h.records[0])) and crc == zlib.crc32(bytes(h.frame[0][64:]))
        sizes, data = g.records
        n = len(sizes)
        assert room == 64 and bytes(frame[:room]) == bytes(room) and n == 6 - len(victims)
        assert bytes(frame[room:room + 4 * n]) == sizes.astype("<i4").tobytes()
        assert bytes(frame[room + 4 * n:]) == bytes(data) and len(data) == sum(sizes)
        assert [m.queue_offset for m in _records(g)] == [i for i in range(2, 8) if i not in victims]
        s.shutdown()
