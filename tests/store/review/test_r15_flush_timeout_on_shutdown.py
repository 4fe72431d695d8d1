"""R15: GroupCommitService.wait_durable() gives up as soon as stop() is called, before the
group commit it waits for (and shutdown's own flush) has finished: the put answers
FLUSH_DISK_TIMEOUT long before sync_flush_timeout_ms although the record is durable."""

import threading
import time

from tidemq.store import Message, PutStatus
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import small_cfg


class SlowFsync(FaultyFileIO):
    gate: threading.Event | None = None
    entered: threading.Event | None = None

    def fsync(self, handle):
        if self.gate is not None and "commitlog" in handle.path:
            self.entered.set()
            self.gate.wait(5)
        return super().fsync(handle)


def test_put_durable_during_shutdown_is_put_ok(stores):
    fio = SlowFsync()
    s = stores(small_cfg(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=5_000), fio)
    fio.entered, fio.gate = threading.Event(), threading.Event()
    res = []
    a = threading.Thread(target=lambda: res.append(s.put(Message("T", b"hello"))))
    a.start()
    assert fio.entered.wait(5)                  # the group commit's fsync is on its way
    b = threading.Thread(target=s.shutdown)
    b.start()
    time.sleep(0.3)
    fio.gate.set()
    a.join(10)
    b.join(10)
    assert not fio.exists("/r/abort")           # shutdown was clean: the record is durable
    assert res[0].status is PutStatus.PUT_OK, res[0]
