"""R19: get() after shutdown (a broker still draining) answers MESSAGE_WAS_REMOVING with a
next_offset past every message (a consumer would skip them) and re-opens a consume-queue
file through the closed handle cache (a descriptor nobody closes)."""

import os

from tidemq.io import ManualClock, OsFileIO
from tidemq.store import GetStatus, Message, MessageStore

from .conftest import small_cfg


def test_get_after_shutdown_neither_skips_nor_leaks(tmp_path):
    s = MessageStore(small_cfg(root_dir=str(tmp_path / "store")), fio=OsFileIO(), clock=ManualClock()).start()
    try:
        for i in range(5):
            assert s.put(Message("T", b"m%d" % i)).ok
    finally:
        s.shutdown()
    fds = len(os.listdir("/proc/self/fd"))
    g = s.get("g", "T", 0, 0)
    leaked = len(os.listdir("/proc/self/fd")) - fds
    assert not (g.status is GetStatus.MESSAGE_WAS_REMOVING and g.next_offset > 0), \
        f"a stopped store tells the consumer to skip to {g.next_offset}: {g}"
    assert leaked == 0, f"{leaked} descriptor(s) opened by a get on a stopped store"
