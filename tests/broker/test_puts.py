"""broker/puts.py: every broker put runs where the store's one rule says (MessageStore.puts_may_wait):
on a put thread when it may wait on followers (SYNC replication); appended inline on the event loop,
its fsync awaited there, when it waits on the disk only (SYNC_FLUSH); inline otherwise."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tidemq.broker.puts import StorePuts
from tidemq.broker.replication.acks import ReplicaAcks
from tidemq.store import Message, MessageStore, PutStatus
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import memory_config

WAIT_S = 60.0


class GatedFileIO(FaultyFileIO):
    """FaultyFileIO whose commit-log fsyncs wait for ``gate`` (set: they pass), saying when one is
    waiting (``entered``) and counting them."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.log_fsyncs = 0

    def fsync(self, handle) -> None:
        if "commitlog" in handle.path:
            self.entered.set()
            assert self.gate.wait(WAIT_S)
            self.log_fsyncs += 1
        super().fsync(handle)


def _store(flush: str, fio=None, **kw) -> MessageStore:
    return MessageStore(memory_config(flush_disk_type=flush, sync_flush_timeout_ms=60_000, **kw),
                        fio or FaultyFileIO()).start()


def test_an_async_flush_put_runs_inline():
    s = _store("ASYNC_FLUSH")
    puts = StorePuts(s, 2)
    where = []

    def put(m):
        where.append(threading.current_thread())
        return s.put(m)

    async def main():
        return await puts.run(put, Message("T", b"x")), threading.current_thread()

    try:
        r, loop_thread = asyncio.run(main())
    finally:
        puts.close()
        s.shutdown()
    assert r.ok
    assert where[0] is loop_thread
    assert puts.inline


def test_a_sync_replication_put_runs_on_a_thread():
    s = _store("ASYNC_FLUSH")
    s.writer.replicas = ReplicaAcks(sync=True, min_in_sync=0, timeout_ms=60_000, lag_time_ms=60_000, clock=s.clock,
                                    leader_end=lambda: s.commit_log.flushed_offset)
    puts = StorePuts(s, 2)
    where = []

    def put(m):
        where.append(threading.current_thread())
        return s.put(m)

    async def main():
        return await puts.run(put, Message("T", b"x")), threading.current_thread()

    try:
        assert s.puts_may_wait and not s.puts_wait_for_disk_only and not puts.inline
        r, loop_thread = asyncio.run(main())
    finally:
        s.writer.replicas = None
        puts.close()
        s.shutdown()
    assert r.ok
    assert where[0] is not loop_thread


def test_sync_flush_sends_append_on_the_loop_and_share_the_fsync_they_await():
    """50 sends appended while one fsync is held: all answered OK only once durable, the loop free
    meanwhile, and the next fsync covers the 49 that came during the first (no thread each)."""
    fio = GatedFileIO()
    s = _store("SYNC_FLUSH", fio)
    puts = StorePuts(s, 2)
    gc = s.group_commit
    n = 50

    async def main():
        loop_thread = threading.current_thread()
        assert puts.inline
        fio.gate.clear()
        fio.entered.clear()
        f0, c0 = gc.fsyncs, fio.log_fsyncs
        tasks = [asyncio.create_task(puts.run(s.put_batch, [Message("T", b"m%d" % i)])) for i in range(n)]
        await asyncio.sleep(0)                  # every task appended and awaits its fsync
        assert await asyncio.to_thread(fio.entered.wait, WAIT_S)
        end = s.commit_log.segments.max_offset
        assert s.commit_log.flushed_offset < end
        assert not any(t.done() for t in tasks)           # nothing answered before it is durable
        ran = await asyncio.sleep(0, "the loop is free")  # the loop serves others meanwhile
        fio.gate.set()
        rs = await asyncio.wait_for(asyncio.gather(*tasks), WAIT_S)
        assert s.commit_log.flushed_offset >= end
        return rs, ran, gc.fsyncs - f0, fio.log_fsyncs - c0, loop_thread

    try:
        rs, ran, fsyncs, log_fsyncs, _ = asyncio.run(main())
    finally:
        fio.gate.set()
        puts.close()
        s.shutdown()
    assert ran == "the loop is free"
    assert [r.status for rs1 in rs for r in rs1] == [PutStatus.PUT_OK] * n
    assert all(r.pending_end == -1 for r in rs)
    assert 1 <= fsyncs <= 2 and 1 <= log_fsyncs <= 2


def test_sync_flush_dead_letter_put_of_one_message():
    """MessageStore.put (one message, a PutResult) through the awaited path too."""
    s = _store("SYNC_FLUSH")
    puts = StorePuts(s, 2)

    async def main():
        return await puts.run(s.put, Message("T", b"x"))

    try:
        r = asyncio.run(main())
        assert s.commit_log.flushed_offset >= r.commitlog_offset + r.size
    finally:
        puts.close()
        s.shutdown()
    assert r.ok


def test_sync_flush_a_failed_fsync_fails_exactly_the_sends_it_covered():
    """A commit-log fsync error (EIO) under sends awaiting it on the loop: each of them answered
    FLUSH_DISK_FAILED (final), none OK; a send after the cut is OK in the new segment."""
    fio = GatedFileIO()
    s = _store("SYNC_FLUSH", fio)
    puts = StorePuts(s, 2)

    async def main():
        first = await puts.run(s.put_batch, [Message("T", b"before")])
        fio.gate.clear()
        fio.entered.clear()
        tasks = [asyncio.create_task(puts.run(s.put_batch, [Message("T", b"c%d" % i)])) for i in range(8)]
        await asyncio.sleep(0)
        assert await asyncio.to_thread(fio.entered.wait, WAIT_S)
        fio.fail("fsync", path_contains="commitlog")
        # the fsync already waiting passes; the next one (covering whatever it did not) fails
        tasks.append(asyncio.create_task(puts.run(s.put_batch, [Message("T", b"late")])))
        await asyncio.sleep(0)
        fio.gate.set()
        covered = await asyncio.wait_for(asyncio.gather(*tasks), WAIT_S)
        return first, covered

    try:
        first, covered = asyncio.run(main())
        failures = s.log_failures
    finally:
        fio.gate.set()
        puts.close()
        s.shutdown()
    assert first.status is PutStatus.PUT_OK
    statuses = [r.status for r in covered]
    assert PutStatus.FLUSH_DISK_FAILED in statuses
    assert set(statuses) <= {PutStatus.PUT_OK, PutStatus.FLUSH_DISK_FAILED}
    assert len(failures) == 1
    f = failures[0]
    for r in covered:               # OK exactly when its record ends at or before the durable end
        end = r.phys[0] + r.size[0]
        assert (r.status is PutStatus.PUT_OK) == (end <= f.durable_end), (end, f.durable_end, r.status)


def test_sync_flush_a_send_not_durable_in_time_answers_flush_disk_timeout():
    fio = GatedFileIO()
    s = MessageStore(memory_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=1), fio).start()
    puts = StorePuts(s, 2)

    async def main():
        fio.gate.clear()
        return await puts.run(s.put_batch, [Message("T", b"x")])

    try:
        r = asyncio.run(main())
        assert not s.group_commit._waiters            # the wait given up was forgotten
    finally:
        fio.gate.set()
        puts.close()
        s.shutdown()
    assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
    assert r[0].status is PutStatus.FLUSH_DISK_TIMEOUT


@pytest.mark.parametrize("replicated", [False, True])
def test_a_put_after_close_raises_puts_closed_not_a_runtime_error(replicated):
    """Whether it would have waited on a thread (SYNC replication) or on the loop (SYNC_FLUSH)."""
    from tidemq.broker.puts import PutsClosed
    s = MessageStore(memory_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=60_000), FaultyFileIO()).start()
    if replicated:
        s.writer.replicas = ReplicaAcks(sync=True, min_in_sync=0, timeout_ms=60_000, lag_time_ms=60_000, clock=s.clock,
                                        leader_end=lambda: s.commit_log.flushed_offset)
    puts = StorePuts(s, 1)
    puts.close()
    try:
        with pytest.raises(PutsClosed):
            asyncio.run(puts.run(s.put, Message("T", b"x")))
    finally:
        s.writer.replicas = None
        s.shutdown()
