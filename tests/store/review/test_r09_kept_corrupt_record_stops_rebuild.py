"""R09: redispatch (consume-queue rebuild, index rebuild, heal) walks the log with
iter_records, which ends at the first invalid record, even one that recovery kept because
it lies below the durable offset. Every message after it becomes unreachable."""

from tidemq.store import Message
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import ROOT, small_cfg


def test_lost_consume_queues_are_rebuilt_past_a_kept_corrupt_record(stores):
    cfg = small_cfg()
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    rs = [s.put(Message("T", b"m%02d" % i + b"x" * 200)) for i in range(30)]
    s.shutdown()
    fio.files[ROOT + "/commitlog/" + "0" * 20].data[rs[10].commitlog_offset + 4] ^= 0xFF   # MAGIC bit rot
    fio.remove_tree(ROOT + "/consumequeue")
    s = stores(cfg, fio)
    assert s.recovery.consume_queues_rebuilt_all
    assert s.commit_log.max_offset == rs[-1].commitlog_offset + rs[-1].size      # nothing was cut
    assert s.max_offset("T", 0) >= 29, (f"rebuilt queue ends at {s.max_offset('T', 0)}: messages after the "
                                        f"corrupt record 10 are unreachable")
