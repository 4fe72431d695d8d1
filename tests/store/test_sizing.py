"""What a store preallocates must fit its disks: a segment that cannot fit twice below the
clean-forcibly ratio is a start-up error naming the setting; index files are sized to the disk.
For real: a 32 MiB tmpfs root on default settings (but 4 MiB segments) refuses writes only at its
warning ratio, for disk space, never for an index write (it used to at 25 %)."""

import os

import pytest

from tidemq.store import Message, MessageStore, PutReason, StoreConfig, StoreError
from tidemq.store.index_file import INDEX_DISK_SHARE, index_file_size
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import memory_config

MIB = 1 << 20


def test_a_segment_that_cannot_fit_is_a_start_up_error_naming_the_setting():
    fio = FaultyFileIO(capacity_bytes=32 * MIB)
    with pytest.raises(StoreError, match="segment_size_bytes=1073741824 does not fit.*lower segment_size_bytes"):
        MessageStore(memory_config(segment_size_bytes=1 << 30), fio=fio).start()


def test_index_files_are_sized_to_the_disk(caplog):
    fio = FaultyFileIO(capacity_bytes=32 * MIB)
    cfg = memory_config(segment_size_bytes=4 * MIB, index_slots=5_000_000, index_entries=20_000_000)
    with caplog.at_level("WARNING", logger="tidemq.store"):
        s = MessageStore(cfg, fio=fio).start()
    try:
        size = index_file_size(s.index.slots, s.index.entries)
        assert size <= 32 * MIB * INDEX_DISK_SHARE and s.index.slots < 5_000_000
        assert any("index files sized to" in r.getMessage() for r in caplog.records)
    finally:
        s.shutdown()


def test_a_32_mib_root_on_default_settings_fills_to_its_warning_ratio(env):
    root = env.tmpfs("root", 32)
    cfg = StoreConfig(root_dir=root, auto_create_topics=True, segment_size_bytes=4 * MIB)
    s = MessageStore(cfg).start()
    try:
        refused = None
        for i in range(20_000):                   # bounded: ~80 MiB would fill it twice over
            r = s.put(Message("T", b"x" * 4000, keys=[f"k{i}"]))
            if not r.ok:
                refused = r
                break
            if i % 64 == 0:
                s.check_disk()
        assert refused is not None, "a full disk must refuse writes"
        st = os.statvfs(root)
        used = 1 - st.f_bavail / st.f_blocks
        assert refused.reason is PutReason.DISK_FULL, (refused.reason, refused.error, used)
        assert used >= 0.80, f"refused at {used:.0%} used"
    finally:
        s.shutdown()
