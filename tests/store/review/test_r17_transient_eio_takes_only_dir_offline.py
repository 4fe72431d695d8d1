"""R17: one transient EIO while creating a segment marks the (only) commit-log directory
offline for the rest of the run: every later put is refused with 'disk full' although the
disk is healthy again and the directory passes the disk check."""

import errno

from tidemq.store import Message
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import small_cfg


def test_one_transient_eio_does_not_refuse_writes_until_restart(stores):
    fio = FaultyFileIO()
    s = stores(small_cfg(segment_size_bytes=8 * 1024), fio)
    while True:
        fio.fail("fsync_dir", errno.EIO, "/r/commitlog", times=1)   # armed for the next segment creation
        r = s.put(Message("T", b"x" * 1000))
        fio.clear_faults()
        if not r.ok:
            break
    for _ in range(3):
        s.check_disk()                          # the disk-check service runs: the directory is fine
    r = s.put(Message("T", b"y"))
    assert r.ok, r.error
