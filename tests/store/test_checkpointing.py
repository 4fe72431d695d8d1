"""The checkpoint's rounds (store/checkpointing.py): a failed consume-queue or index fsync degrades
and loses nothing, through the FileIO seam (FaultyFileIO drops every page the failed fsync covered):
the checkpoint never again claims them flushed past what it claimed before, puts go on, what a
reader would find is checked against the log at once, and a power loss after it loses nothing.
(A follower's cut, which the checkpoint never claims: test_replica.py.)"""

from __future__ import annotations

import errno

import pytest

from tidemq.store import Message
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import NothingUnsyncedSurvives, memory_config, topic_messages


def bodies(store, topic="T") -> list[bytes]:
    return [b for _off, b in topic_messages(store, topic)]


@pytest.mark.parametrize("where", ["consumequeue", "index"])
def test_a_failed_consume_queue_or_index_fsync_degrades_and_loses_nothing(stores, where):
    fio = FaultyFileIO(seed=13)
    fio.drop_ratio = 1.0                             # the kernel drops every page it covered
    cfg = memory_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=600_000, segment_size_bytes=32 * 1024,
                        index_enabled=True)
    s = stores(cfg, fio)
    for i in range(20):
        assert s.put(Message("T", b"m%02d" % i, keys=["k%d" % i])).ok
    s.flush_queues()
    before = s.checkpoint.state.logics_offset, s.checkpoint.state.index_offset
    for i in range(20, 40):
        assert s.put(Message("T", b"m%02d" % i, keys=["k%d" % i])).ok
    fio.fail("fsync", errno.EIO, where)
    s.flush_queues()                                 # degrades: no error out of it
    cp = s.checkpoint.state
    assert (cp.logics_offset, cp.index_offset) == before, "never claims what the failed fsync covered"
    assert s.put_refusal() is None, "derived data: puts go on"
    d = {x["role"]: x for x in s.disk_status()["directories"]}
    assert d[where]["state"] == "failed"
    assert bodies(s) == [b"m%02d" % i for i in range(40)], "checked against the log at once: nothing lost"
    assert [m.body for m in s.query_by_key("T", "k33")] == [b"m33"]
    for i in range(40, 45):
        assert s.put(Message("T", b"m%02d" % i)).ok
    s.flush_queues()
    assert s.checkpoint.state.logics_offset == before[0]
    s.kill()
    s = stores(cfg, fio.after_power_loss(NothingUnsyncedSurvives()))
    assert bodies(s) == [b"m%02d" % i for i in range(45)] and s.check().ok
