"""R06: the cleaner unlinks head segments without fsyncing the directory. After a power
loss some deleted segments come back and others do not: the log has a hole and the store
refuses to start."""

import random

from tidemq.io import ManualClock
from tidemq.store import Message, StoreError
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import small_cfg


def test_store_starts_after_power_loss_following_a_cleanup(stores):
    cfg = small_cfg(segment_size_bytes=8 * 1024, flush_disk_type="SYNC_FLUSH")
    refused = {}
    for seed in range(6):
        fio, clock = FaultyFileIO(), ManualClock()
        s = stores(cfg, fio, clock)
        while len(s.segments) < 5:
            assert s.put(Message("T", b"x" * 1000)).ok
        clock.advance(73 * 3600)                      # every sealed segment expired
        s.trigger_delete_expired()
        s.clean()                                     # deletes the 4 sealed head segments
        assert len(s.segments) == 1
        s.kill()
        fio = fio.after_power_loss(random.Random(seed))
        try:
            stores(cfg, fio, clock).shutdown()
        except StoreError as e:
            refused[seed] = str(e)[:90]
    assert not refused, f"store refuses to start after a power loss: {refused}"
