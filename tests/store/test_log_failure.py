"""A failed commit-log fsync (or write) is final for what it covered (store/log_failure.py), through
the FileIO seam: FaultyFileIO fails the fsync as Linux does (the dirty pages it covered are marked
clean, kept or dropped), and the store never acknowledges what it covered, cuts the log back to its
durable end, goes on in another directory or refuses writes, and a restart finds every
acknowledged message and none of the failed ones. (Consume-queue and index fsync errors degrade:
test_checkpointing.py.)
(The same with a real broker and a real fdatasync failing: test_log_failure_e2e.py.)"""

from __future__ import annotations

import errno
import threading

from tidemq.store import Message, PutReason, PutStatus
from tidemq.store.segment_state import SegmentState
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import NothingUnsyncedSurvives, memory_config, topic_messages
from ..support.wait import PATIENCE_S, patience, wait_until

SEG = 32 * 1024
TWO_DIRS = ("/r/a", "/r/b")


def sync_config(**kw):
    return memory_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=600_000, segment_size_bytes=SEG, **kw)


def bodies(store, topic="T") -> list[bytes]:
    return [b for _off, b in topic_messages(store, topic)]


def test_a_failed_fsync_is_never_acknowledged_and_the_log_goes_on_in_another_directory(stores):
    fio = FaultyFileIO(seed=3)
    cfg = sync_config(commitlog_dirs=TWO_DIRS)
    s = stores(cfg, fio)
    seen = []
    s.on_log_failed(seen.append)
    ok = [s.put(Message("T", b"ok%d" % i + b"x" * 500)) for i in range(5)]
    assert all(r.status is PutStatus.PUT_OK for r in ok)
    assert s.segments.last.directory == "/r/a"
    fio.fail("fsync", errno.EIO, "/r/a/")           # once: the next fsync would succeed (and prove nothing)
    r = s.put(Message("T", b"failed" + b"x" * 500))
    assert r.status is PutStatus.FLUSH_DISK_FAILED and r.reason is PutReason.FLUSH_FAILED and "store it again" in r.error
    end = r.commitlog_offset + r.size
    assert s.confirm(end) is PutReason.FLUSH_FAILED, "a resend's question: final, never OK"
    assert s.confirm(ok[-1].commitlog_offset + ok[-1].size) is None
    [f] = s.log_failures
    assert seen == [f]
    assert (f.directory, f.durable_end, f.resume_offset) == ("/r/a", ok[-1].commitlog_offset + ok[-1].size, SEG)
    assert f.covers(end) and not f.covers(f.durable_end)
    assert f.queue_ends == {("T", 0): 5}, "where each queue goes on (broker/server.py brings consumers back to it)"
    assert s.segments.segments[0].state is SegmentState.FAILED
    after = s.put(Message("T", b"after"))
    assert after.status is PutStatus.PUT_OK and after.commitlog_offset == SEG, "a new segment..."
    assert s.segments.last.directory == "/r/b", "...in the other directory"
    assert s.confirm(end) is PutReason.FLUSH_FAILED, "still final after later fsyncs succeeded"
    assert [b[:3] for b in bodies(s)] == [b"ok0", b"ok1", b"ok2", b"ok3", b"ok4", b"aft"], "never served"
    st = s.disk_status()
    d = {x["path"]: x for x in st["directories"]}
    assert d["/r/a"]["state"] == "failed" and "not durable" in d["/r/a"]["offline_reason"]
    assert d["/r/b"]["state"] == "writable"
    assert st["flags"]["log_failures"][0]["durable_end"] == f.durable_end and st["flags"]["write_refusal"] is None
    s.kill()
    s = stores(cfg, fio.after_power_loss(NothingUnsyncedSurvives()))
    assert [b[:3] for b in bodies(s)] == [b"ok0", b"ok1", b"ok2", b"ok3", b"ok4", b"aft"]
    assert s.check().ok


def test_every_put_waiting_on_the_failed_fsync_is_answered_flush_failed(stores):
    """Eight puts append while one fsync is held; that fsync fails: all eight answer FLUSH_FAILED,
    none OK, none the retryable FLUSH_DISK_TIMEOUT."""
    fio = GatedFaultyFileIO(seed=5)
    s = stores(sync_config(commitlog_dirs=TWO_DIRS), fio)
    assert s.put(Message("T", b"first")).ok
    fio.hold.clear()
    results: list = []
    blocker = threading.Thread(target=lambda: results.append(s.put(Message("T", b"b0"))))
    blocker.start()
    assert fio.entered.wait(patience())             # its fsync is held
    threads = [threading.Thread(target=lambda i=i: results.append(s.put(Message("T", b"w%d" % i))))
               for i in range(7)]
    for t in threads:
        t.start()
    wait_until(lambda: s.segments.max_offset > 0 and len(s.group_commit._waiters) >= 7, "the puts to wait")
    fio.fail("fsync", errno.EIO, "/r/a/")           # the held fsync fails once released
    fio.hold.set()
    for t in [blocker, *threads]:
        t.join(patience())
    assert len(results) == 8
    assert {r.status for r in results} == {PutStatus.FLUSH_DISK_FAILED}, [r.status for r in results]
    assert bodies(s) == [b"first"]
    assert s.put(Message("T", b"later")).ok


class GatedFaultyFileIO(FaultyFileIO):
    """fsync of a segment in /r/a waits while ``hold`` is clear (``entered`` says one does), then
    goes on as FaultyFileIO's (which fails it when the test injected that meanwhile)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed=seed)
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()

    def fsync(self, handle) -> None:
        if "/r/a/" in handle.path and not self.hold.is_set():
            self.entered.set()
            assert self.hold.wait(2 * PATIENCE_S), "the test never released the fsync"
        super().fsync(handle)


def test_with_no_other_directory_puts_are_refused_until_a_restart(stores):
    fio = FaultyFileIO(seed=7)
    cfg = sync_config()
    s = stores(cfg, fio)
    assert s.put(Message("T", b"ok")).ok
    fio.fail("fsync", errno.EIO, "commitlog")
    assert s.put(Message("T", b"failed")).status is PutStatus.FLUSH_DISK_FAILED
    r = s.put(Message("T", b"refused"))
    assert r.reason is PutReason.WRITE_ERROR and r.status is PutStatus.CREATE_MAPPED_FILE_FAILED
    reason, text = s.put_refusal()
    assert reason is PutReason.WRITE_ERROR and "failed" in text
    assert bodies(s) == [b"ok"]
    s.kill()
    s = stores(cfg, fio.after_crash())               # the restart: recovery reads what is on disk
    assert bodies(s) == [b"ok"] and s.check().ok
    assert s.put(Message("T", b"again")).ok and bodies(s) == [b"ok", b"again"]


def test_a_failed_write_of_the_log_freezes_it_at_its_last_flush(stores):
    """ASYNC_FLUSH: a pwrite that fails with EIO is a failure of the log like an fsync: what was
    acknowledged after the last flush is taken out (a crash's promise in this mode), the batch is
    refused, the log goes on in a new segment of the other directory."""
    fio = FaultyFileIO(seed=9)
    cfg = memory_config(segment_size_bytes=SEG, commitlog_dirs=TWO_DIRS)
    s = stores(cfg, fio)
    flushed = s.put_batch([Message("T", b"f%d" % i) for i in range(3)])
    durable = s.commit_log.flush()
    unflushed = s.put_batch([Message("T", b"u%d" % i) for i in range(3)])
    assert flushed.all_ok() and unflushed.all_ok()
    fio.fail("pwrite", errno.EIO, "/r/a/")
    rs = s.put_batch([Message("T", b"n%d" % i) for i in range(4)])
    assert [r.reason for r in rs] == [PutReason.WRITE_ERROR] * 4
    [f] = s.log_failures
    assert f.durable_end == durable and f.resume_offset == SEG
    u = unflushed[-1]
    assert s.confirm(u.commitlog_offset + u.size) is PutReason.FLUSH_FAILED
    assert bodies(s) == [b"f0", b"f1", b"f2"] and s.max_offset("T", 0) == 3, "their queue offsets are free again"
    r = s.put(Message("T", b"next"))
    assert r.ok and r.commitlog_offset == SEG and r.queue_offset == 3 and s.segments.last.directory == "/r/b"
    s.kill()
    s = stores(cfg, fio.after_crash())
    assert bodies(s) == [b"f0", b"f1", b"f2", b"next"] and s.check().ok


def test_when_the_seal_cannot_be_recorded_the_log_stops_and_readers_stop_at_its_durable_end(stores):
    fio = FaultyFileIO(seed=11)
    cfg = sync_config(commitlog_dirs=TWO_DIRS)
    s = stores(cfg, fio)
    assert s.put(Message("T", b"ok")).ok
    durable = s.commit_log.flushed_offset
    fio.fail("pwrite", errno.ENOSPC, "sealed.json")
    fio.fail("fsync", errno.EIO, "/r/a/")
    r = s.put(Message("T", b"failed"))
    assert r.status is PutStatus.FLUSH_DISK_FAILED
    [f] = s.log_failures
    assert f.resume_offset is None and s.commit_log.frozen
    assert s.readable_end() == durable and bodies(s) == [b"ok"]
    assert s.put_refusal()[0] is PutReason.WRITE_ERROR
    assert s.put(Message("T", b"x")).reason is PutReason.WRITE_ERROR
    s.kill()
    s = stores(cfg, fio.after_crash())
    got = bodies(s)
    assert got[:1] == [b"ok"] and set(got[1:]) <= {b"failed"}, "without the seal the next start may find it"
    assert s.check().ok
