"""R04: recovery re-indexes only records at or after the index header's end_phy_offset. After
a power loss the header page can be newer than the slot / entry pages, so entries of
acknowledged messages between the checkpoint and end_phy are lost and never put back."""

import random

from tidemq.store import Message
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import small_cfg


def test_keys_of_acknowledged_messages_survive_power_loss(stores):
    cfg = small_cfg(flush_disk_type="SYNC_FLUSH", index_slots=2048)   # slots span pages 0-1, entries page 2
    lost = {}
    for seed in range(10):
        fio = FaultyFileIO()
        s = stores(cfg, fio)
        for i in range(5):
            assert s.put(Message("T", b"m%d" % i, keys=[f"k{i}"])).ok
        s.flush_queues()                                      # checkpoint: index durable up to here
        for i in range(5, 10):
            assert s.put(Message("T", b"m%d" % i, keys=[f"k{i}"])).ok   # acknowledged, durable in the log
        s.kill()
        fio = fio.after_power_loss(random.Random(seed))
        s = stores(cfg, fio)
        assert len(s.get("g", "T", 0, 0).messages) == 10      # the messages themselves are there
        missing = [i for i in range(10) if not s.query_by_key("T", f"k{i}")]
        s.shutdown()
        if missing:
            lost[seed] = missing
    assert not lost, f"keys not found after power loss (seed: message numbers): {lost}"
