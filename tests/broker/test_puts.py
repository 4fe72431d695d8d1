"""broker/puts.py: every broker put is appended on the event loop; one that waits (MessageStore.
puts_may_wait) awaits there what its acknowledgement needs -- the group commit's fsync (SYNC_FLUSH),
every follower of the in-sync set (SYNC replication) -- without a thread per waiting put."""

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
    puts = StorePuts(s)
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


def _replicated(s, clock=None, timeout_ms=60_000, min_in_sync=1):
    """``s`` leads one follower ``f`` of its in-sync set, SYNC: (acks, f's stream)."""
    acks = ReplicaAcks(sync=True, min_in_sync=min_in_sync, timeout_ms=timeout_ms, lag_time_ms=60_000,
                       clock=clock or s.clock, leader_end=lambda: s.commit_log.segments.max_offset)
    conn = acks.connect("f", "e-f", 0).conn
    acks.set_isr(["f"])
    s.writer.replicas = acks
    return acks, conn


def test_sync_replication_puts_append_on_the_loop_and_are_answered_once_every_follower_confirmed():
    """16 SYNC sends appended on the loop (no put thread), none answered before the follower of the
    in-sync set confirmed it, the loop free meanwhile; one confirmation answers every put it covers
    and only those."""
    s = _store("ASYNC_FLUSH")
    acks, conn = _replicated(s)
    puts = StorePuts(s)
    where = []

    def put(msgs, wait=True):
        where.append(threading.current_thread())
        return s.put_batch(msgs, wait=wait)

    async def main():
        loop_thread = threading.current_thread()
        assert puts.inline
        first = [asyncio.create_task(puts.run(put, [Message("T", b"a%d" % i)])) for i in range(8)]
        await asyncio.sleep(0)
        half = s.commit_log.segments.max_offset
        rest = [asyncio.create_task(puts.run(put, [Message("T", b"b%d" % i)])) for i in range(8)]
        await asyncio.sleep(0)
        ran = await asyncio.sleep(0, "the loop is free")
        assert not any(t.done() for t in first + rest), "nothing answered before the follower has it"
        acks.confirm("f", conn, half)               # what a confirmation on the loop does (leader.py)
        got_first = await asyncio.wait_for(asyncio.gather(*first), WAIT_S)
        assert not any(t.done() for t in rest)
        acks.confirm("f", conn, s.commit_log.segments.max_offset)
        got_rest = await asyncio.wait_for(asyncio.gather(*rest), WAIT_S)
        return got_first + got_rest, ran, loop_thread

    try:
        rs, ran, loop_thread = asyncio.run(main())
    finally:
        s.writer.replicas = None
        puts.close()
        s.shutdown()
    assert ran == "the loop is free"
    assert all(t is loop_thread for t in where) and len(where) == 16
    assert [r.status for rs1 in rs for r in rs1] == [PutStatus.PUT_OK] * 16
    assert all(r.pending_end == -1 for r in rs)
    assert not acks._waits and acks.timeouts == 0


def test_a_sync_replication_put_awaited_is_not_acknowledged_when_the_set_shrinks_or_leadership_goes():
    """Appended and awaiting the follower: the set drops below in_sync_replicas_min (REPLICA_LOST);
    the broker stops leading meanwhile (its writer forgets the acks, acks.forget(), the lease
    revoked): never PUT_OK, though the writer no longer names any followers when it is settled."""
    from tidemq.broker.replication.lease import Lease
    from tidemq.store import PutReason
    s = _store("ASYNC_FLUSH")
    acks, _ = _replicated(s)
    puts = StorePuts(s)

    async def main():
        lost = asyncio.create_task(puts.run(s.put_batch, [Message("T", b"lost")]))
        await asyncio.sleep(0)
        acks.update_isr(exclude=["f"])               # the record dropped it: 0 < in_sync_replicas_min
        lost_r = await asyncio.wait_for(lost, WAIT_S)
        acks.update_isr(include=["f"])
        acks.lease = Lease(s.clock, 0.5, 60.0)
        acks.lease.renew(s.clock.monotonic_s())
        gone = asyncio.create_task(puts.run(s.put_batch, [Message("T", b"gone")]))
        await asyncio.sleep(0)
        acks.lease.revoke()                          # node.follow(): the lease, then the writer, then the acks
        s.writer.replicas = None
        acks.min_in_sync = 0
        acks.forget()                                # the set is empty: the wait ends
        return lost_r, await asyncio.wait_for(gone, WAIT_S)

    try:
        lost, gone = asyncio.run(main())
    finally:
        s.writer.replicas = None
        puts.close()
        s.shutdown()
    assert lost.status is PutStatus.FLUSH_SLAVE_TIMEOUT and lost.reason is PutReason.REPLICA_LOST
    assert gone.status is not PutStatus.PUT_OK and gone.reason is PutReason.REPLICATION_TIMEOUT
    assert acks.timeouts == 1 and acks.lease_refusals >= 1


def test_a_sync_replication_put_not_confirmed_within_the_timeout_by_the_clock_answers_timeout():
    """The wait's time is the store's Clock's: a ManualClock that stands still never times it out
    (the loop's timer looks again), moved past replication_timeout_ms it does."""
    from tidemq.io import ManualClock
    from tidemq.store import PutReason
    s = _store("ASYNC_FLUSH")
    clock = ManualClock()
    acks, _ = _replicated(s, clock=clock, timeout_ms=20)
    puts = StorePuts(s)
    checked = None

    expire, looked = acks.expire, []

    def counted(handle):
        looked.append(expire(handle))
        if len(looked) == 3:
            checked.set()
        return looked[-1]
    acks.expire = counted

    async def main():
        nonlocal checked
        checked = asyncio.Event()
        t = asyncio.create_task(puts.run(s.put_batch, [Message("T", b"x")]))
        await asyncio.wait_for(checked.wait(), WAIT_S)     # its timer looked three times: the Clock stood still
        assert not t.done() and all(abs(x - 0.02) < 1e-9 for x in looked)
        clock.advance(1.0)
        return await asyncio.wait_for(t, WAIT_S)

    try:
        r = asyncio.run(main())
    finally:
        s.writer.replicas = None
        puts.close()
        s.shutdown()
    assert r.status is PutStatus.FLUSH_SLAVE_TIMEOUT and r.reason is PutReason.REPLICATION_TIMEOUT
    assert acks.timeouts == 1 and not acks._waits


def test_sync_flush_sends_append_on_the_loop_and_share_the_fsync_they_await():
    """50 sends appended while one fsync is held: all answered OK only once durable, the loop free
    meanwhile, and the next fsync covers the 49 that came during the first (no thread each)."""
    fio = GatedFileIO()
    s = _store("SYNC_FLUSH", fio)
    puts = StorePuts(s)
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
    puts = StorePuts(s)

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
    puts = StorePuts(s)

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
    puts = StorePuts(s)

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


def test_sync_flush_a_send_whose_caller_went_while_it_awaits_the_fsync_leaves_no_waiter_behind():
    """Its caller cancelled (a client's deadline): the records stay in the log, the wait is forgotten
    at once (not held by the group commit until the next fsync releases it)."""
    fio = GatedFileIO()
    s = _store("SYNC_FLUSH", fio)
    puts = StorePuts(s)

    async def main():
        fio.gate.clear()
        appended = asyncio.Event()
        task = asyncio.create_task(puts.run(s.put_batch, [Message("T", b"x")], on_appended=lambda r: appended.set()))
        await asyncio.wait_for(appended.wait(), WAIT_S)      # appended, and awaiting its fsync
        assert s.group_commit._waiters
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return s.group_commit._waiters

    try:
        left = asyncio.run(main())
    finally:
        fio.gate.set()
        puts.close()
        s.shutdown()
    assert left == [], "the cancelled send's wait is still held by the group commit"


@pytest.mark.parametrize("replicated", [False, True])
def test_a_put_after_close_raises_puts_closed_not_a_runtime_error(replicated):
    """Whether it would have waited on a thread (SYNC replication) or on the loop (SYNC_FLUSH)."""
    from tidemq.broker.puts import PutsClosed
    s = MessageStore(memory_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=60_000), FaultyFileIO()).start()
    if replicated:
        s.writer.replicas = ReplicaAcks(sync=True, min_in_sync=0, timeout_ms=60_000, lag_time_ms=60_000, clock=s.clock,
                                        leader_end=lambda: s.commit_log.flushed_offset)
    puts = StorePuts(s)
    puts.close()
    try:
        with pytest.raises(PutsClosed):
            asyncio.run(puts.run(s.put, Message("T", b"x")))
    finally:
        s.writer.replicas = None
        s.shutdown()
