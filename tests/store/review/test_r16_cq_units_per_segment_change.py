"""R16: consume_queue_units_per_segment changed between runs: consume-queue files whose
names are not multiples of the new file size are silently ignored (segment_size_bytes, by
contrast, is checked and refused): messages become unreachable."""

from tidemq.store import GetStatus, Message, StoreError
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import small_cfg


def test_changed_units_per_segment_is_refused_or_keeps_every_message(stores):
    fio = FaultyFileIO()
    s = stores(small_cfg(consume_queue_units_per_segment=16), fio)
    for i in range(40):
        assert s.put(Message("T", b"m%d" % i)).ok
    s.shutdown()
    try:
        s = stores(small_cfg(consume_queue_units_per_segment=32), fio)
    except StoreError:
        return                                  # a clear refusal is fine
    got, off = [], 0
    while off < s.max_offset("T", 0):
        g = s.get("g", "T", 0, off, max_count=32)
        got += [m.body for m in g.messages]
        if g.next_offset <= off:
            break
        off = g.next_offset
    assert got == [b"m%d" % i for i in range(40)], f"{40 - len(got)} messages unreachable"
