"""R20: ConsumeQueue._write adds to ``_dirty`` without the lock flush() swaps it under. If the
queue-flush thread swaps the set between the writer's load of ``self._dirty`` and its
``add``, the file is marked dirty in a discarded set and never fsynced, while the next
checkpoint covers the batch. After a power loss the acknowledged message is unreachable."""

from tidemq.store import Message
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import NothingUnsyncedSurvives, small_cfg


def test_dirty_mark_racing_the_queue_flush_is_not_lost(stores):
    cfg = small_cfg(flush_disk_type="SYNC_FLUSH")
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    for i in range(16):                                # units 0..15 fill consume-queue file 0
        assert s.put(Message("T", b"m%d" % i)).ok
    cq = s.queues.get("T", 0)
    assert cq._dirty == {0}                            # file 0 waits for the next queue flush

    class MustHoldTheLock(set):
        """flush() swaps the set under cq._lock: a mark made without it can land in a set the
        flush already took (and be lost). Every mark must be made holding the lock."""
        def add(self, x):
            assert cq._lock.locked(), "dirty mark made outside the lock flush() swaps the set under"
            super().add(x)

    cq._dirty = MustHoldTheLock({0})
    assert s.put(Message("T", b"m16")).ok              # unit 16 opens file 1; acknowledged (SYNC_FLUSH)
    s.flush_queues()                                   # next round: the checkpoint covers m16
    s.kill()
    fio = fio.after_power_loss(NothingUnsyncedSurvives())
    s = stores(cfg, fio)
    assert s.max_offset("T", 0) == 17, "the unit of an acknowledged message was never fsynced"
