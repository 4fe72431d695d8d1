"""R14: readonly_commitlog_dirs are 'read but never written', yet when the log's last segment
lies in one, append() keeps writing into it."""

from tidemq.store import Message
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import small_cfg


def test_last_segment_in_a_readonly_dir_is_not_written(stores):
    fio = FaultyFileIO()
    s = stores(small_cfg(commitlog_dirs=("/old",)), fio)
    assert s.put(Message("T", b"a")).ok
    s.shutdown()
    s = stores(small_cfg(commitlog_dirs=("/new",), readonly_commitlog_dirs=("/old",)), fio)
    r = s.put(Message("T", b"b"))
    assert r.ok
    assert s.segments.find(r.commitlog_offset).directory == "/new"
