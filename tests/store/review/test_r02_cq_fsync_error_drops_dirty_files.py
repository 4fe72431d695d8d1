"""R02: ConsumeQueue.flush() forgets every dirty file after the first one whose fsync fails;
the next round's checkpoint then claims units that were never fsynced. After a power loss
acknowledged (SYNC_FLUSH) messages are unreachable and their queue offsets are reused."""

import errno

from tidemq.store import Message
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import NothingUnsyncedSurvives, small_cfg


def test_cq_fsync_error_then_power_loss_keeps_acknowledged_messages(stores):
    cfg = small_cfg(flush_disk_type="SYNC_FLUSH")            # 16 units per consume-queue file
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    for i in range(10):
        assert s.put(Message("T", b"m%d" % i)).ok
    s.flush_queues()
    for i in range(10, 20):                                    # units 10..15 in file 0, 16..19 in file 1
        assert s.put(Message("T", b"m%d" % i)).ok              # acknowledged: durable in the log
    fio.fail("fsync", errno.EIO, "consumequeue/T/0/" + "0" * 20, times=1)
    try:
        s.flush_queues()                                       # the queue-flush round that meets the EIO
    except OSError:
        pass
    s.flush_queues()                                           # next round: succeeds, writes the checkpoint
    s.kill()
    fio = fio.after_power_loss(NothingUnsyncedSurvives())
    s = stores(cfg, fio)
    assert s.max_offset("T", 0) == 20, "units of acknowledged messages lost"
    g = s.get("g", "T", 0, 0, max_count=32)
    assert [m.body for m in g.messages] == [b"m%d" % i for i in range(20)]
