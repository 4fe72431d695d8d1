"""R05: IndexFile.flush() clears ``dirty`` before the fsync; when the fsync fails the file is
never fsynced again until the next put, yet the next checkpoint claims the index durable."""

import errno

from tidemq.store import Message
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import ROOT, NothingUnsyncedSurvives, small_cfg


def test_index_fsync_error_then_power_loss_keeps_keys(stores):
    cfg = small_cfg(flush_disk_type="SYNC_FLUSH")
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    for i in range(5):
        assert s.put(Message("T", b"m%d" % i, keys=[f"k{i}"])).ok
    s.flush_queues()
    for i in range(5, 10):
        assert s.put(Message("T", b"m%d" % i, keys=[f"k{i}"])).ok
    fio.fail("fsync", errno.EIO, ROOT + "/index/", times=1)
    try:
        s.flush_queues()
    except OSError:
        pass
    s.flush_queues()                                  # succeeds: checkpoint says the index is durable
    s.kill()
    fio = fio.after_power_loss(NothingUnsyncedSurvives())
    s = stores(cfg, fio)
    assert [i for i in range(10) if not s.query_by_key("T", f"k{i}")] == []
