"""R01: an out-of-range numeric field (flag, sys_flag, reconsume_times, born_timestamp_ms,
prepared_transaction_offset) or a non-int queue_id is not validated; the append raises in
the middle of a batch after advancing queue offsets, and the queue is broken for good."""

from tidemq.store import GetStatus, Message, PutStatus
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import small_cfg


def test_bad_flag_in_a_batch_gets_a_status_and_does_not_break_the_queue(stores):
    s = stores(small_cfg(), FaultyFileIO())
    assert s.put(Message("T", b"a", queue_id=0)).ok
    try:
        rs = s.put_batch([Message("T", b"b", queue_id=0), Message("T", b"c", queue_id=0, flag=1 << 31)])
    except Exception as e:          # noqa: BLE001
        raise AssertionError(f"put_batch raised {e!r} instead of answering MESSAGE_ILLEGAL") from e
    assert rs[0].status is PutStatus.PUT_OK and rs[1].status is PutStatus.MESSAGE_ILLEGAL
    # the queue keeps working and its offsets stay dense
    r = s.put(Message("T", b"d", queue_id=0))
    assert r.ok and r.queue_offset == 2
    g = s.get("g", "T", 0, 0)
    assert g.status is GetStatus.FOUND and [m.body for m in g.messages] == [b"a", b"b", b"d"]


def test_float_queue_id_is_message_illegal(stores):
    s = stores(small_cfg(topic_queues_default=2), FaultyFileIO())
    try:
        rs = s.put_batch([Message("T", b"a", queue_id=0), Message("T", b"b", queue_id=1.0)])
    except Exception as e:          # noqa: BLE001
        raise AssertionError(f"put_batch raised {e!r} instead of answering MESSAGE_ILLEGAL") from e
    assert rs[0].ok and rs[1].status is PutStatus.MESSAGE_ILLEGAL
    assert s.put(Message("T", b"c", queue_id=0)).queue_offset == 1
