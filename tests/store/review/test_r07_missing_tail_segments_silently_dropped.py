"""R07: when the newest segments are missing at start (their directory is not mounted, a file
was lost), the store starts with a shorter log although the checkpoint says the log was
durable further: acknowledged messages vanish silently and their offsets are reused."""

import pytest

from tidemq.io import DiskUsage
from tidemq.store import Message, StoreError
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import small_cfg


class TwoDisks(FaultyFileIO):
    """/b reports more free space once prefer_b is set (placement then picks it)."""
    prefer_b = False

    def disk_usage(self, path):
        u = super().disk_usage(path)
        if self.prefer_b and path.startswith("/b"):
            return DiskUsage(u.total_bytes, u.used_bytes // 2, u.total_bytes - u.used_bytes // 2)
        return u


def test_start_with_missing_tail_directory_is_refused_or_keeps_acknowledged(stores):
    cfg = small_cfg(commitlog_dirs=("/a", "/b"), segment_size_bytes=8 * 1024, flush_disk_type="SYNC_FLUSH")
    fio = TwoDisks()
    s = stores(cfg, fio)
    acked = 0
    while len(s.segments) < 2:
        assert s.put(Message("T", b"x" * 1000)).ok
        acked += 1
    fio.prefer_b = True
    while len(s.segments) < 3:
        assert s.put(Message("T", b"y" * 1000)).ok
        acked += 1
    assert s.segments.last.directory == "/b"
    s.shutdown()
    fio.remove_tree("/b")                    # the disk behind /b is not mounted at the next start
    fio.prefer_b = False
    try:
        s = stores(cfg, fio)
    except StoreError:
        return                               # refusing to start with a clear error is fine
    assert s.max_offset("T", 0) == acked, (
        f"started silently with {s.max_offset('T', 0)} of {acked} acknowledged messages; "
        f"recovery: {s.recovery.summary()}")
