"""Dispatch: consume-queue units and index entries in log order, inline at put and read back
from the log (idempotent: units already there are skipped, a damaged one is rewritten, a lost
queue is rebuilt); a failed write refuses puts and holds later batches until heal() redoes it."""

from __future__ import annotations

import errno

from tidemq.store import GetStatus, Message, PutStatus
from tidemq.store.consume_queue import UNIT
from tidemq.store.dispatch import index_keys
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import MEMORY_ROOT, memory_config


def put_n(s, n, start=0, topic="T"):
    rs = [s.put(Message(topic, b"m%03d" % i, keys=[f"k{i}"])) for i in range(start, start + n)]
    assert all(r.ok for r in rs)
    return rs


def bodies(s, topic="T", queue=0):
    return [m.body for m in s.get("g", topic, queue, s.min_offset(topic, queue), max_count=64).messages]


def test_index_keys_are_per_topic_and_include_the_unique_id():
    assert index_keys("T", ["a", "", "b"], "U1") == ["T#a", "T#b", "T#U1"]
    assert index_keys("T", (), None) == []


def test_the_put_path_dispatches_in_log_order(stores):
    s = stores(memory_config(topic_queues_default=2), FaultyFileIO())
    rs = put_n(s, 10)
    for q in (0, 1):
        raw = s.queues.get("T", q).read(0, 10)
        phys = [UNIT.unpack_from(raw, i)[0] for i in range(0, len(raw), 20)]
        assert phys == sorted(phys) and phys == [r.commitlog_offset for r in rs if r.queue_id == q]
    assert s.dispatcher.dispatched_offset == s.commitlog_max_offset
    assert [len(s.query_by_key("T", f"k{i}")) for i in range(10)] == [1] * 10


def test_redispatching_what_is_there_changes_nothing(stores):
    s = stores(memory_config(), FaultyFileIO())
    put_n(s, 12)
    rep = s.dispatcher.redispatch(s.commit_log, s.commit_log.min_offset)
    assert (rep.records, rep.units_skipped, rep.units_appended, rep.units_fixed) == (12, 12, 0, 0)
    assert rep.end_offset == s.commitlog_max_offset and rep.queues_rebuilt == []
    assert bodies(s) == [b"m%03d" % i for i in range(12)]


def test_a_damaged_unit_is_rewritten_from_the_log(stores):
    s = stores(memory_config(), FaultyFileIO())
    rs = put_n(s, 5)
    cq = s.queues.get("T", 0)
    assert cq.put_unit_checked(2, rs[0].commitlog_offset, rs[0].size, 0) == "fixed"   # now at the wrong record
    g = s.get("g", "T", 0, 2, max_count=1)
    assert [(m.queue_offset, m.body) for m in g.messages] == [(2, b"m002")], \
        "a unit at another record: that record never served, its own found in the log (unit_repair.py)"
    rep = s.dispatcher.redispatch(s.commit_log, rs[2].commitlog_offset)
    assert (rep.records, rep.units_fixed, rep.units_skipped) == (3, 1, 2)
    assert bodies(s) == [b"m%03d" % i for i in range(5)]


def test_a_lost_queue_is_rebuilt_from_the_log(stores):
    s = stores(memory_config(), FaultyFileIO())
    put_n(s, 8)
    s.queues.get("T", 0).reset_to(0)                # every unit gone
    assert s.max_offset("T", 0) == 0
    rep = s.dispatcher.redispatch(s.commit_log, s.commit_log.min_offset, rebuild=True)
    assert rep.units_appended == 8
    assert bodies(s) == [b"m%03d" % i for i in range(8)]


def test_a_failed_write_refuses_puts_holds_later_batches_and_heals(stores):
    s = stores(memory_config(dispatch_write_retries_max=1), FaultyFileIO())
    fio = s.fio
    put_n(s, 3)
    fio.fail("pwrite", errno.EIO, MEMORY_ROOT + "/consumequeue/T/0/", times=2)    # the write and its retry
    r = s.put(Message("T", b"m003"))
    assert r.ok, "the record is in the log; its unit is not"
    d = s.dispatcher
    assert d.error and "consume queue / index write failed" in d.error and d.pending_from == r.commitlog_offset
    refused = s.put(Message("T", b"refused"))
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert s.max_offset("T", 0) == 3
    assert d.heal(s.commit_log) and d.error is None and d.pending_from is None
    put_n(s, 2, start=4)
    assert bodies(s) == [b"m%03d" % i for i in range(6)]
    assert s.get("g", "T", 0, 6).status is GetStatus.OFFSET_OVERFLOW_ONE


class CountingLock:
    """A lock that counts how often it was taken (the heal's steps)."""

    def __init__(self, inner) -> None:
        self.inner, self.taken = inner, 0

    def __enter__(self):
        self.inner.__enter__()
        self.taken += 1
        return self

    def __exit__(self, *exc):
        return self.inner.__exit__(*exc)


def test_healing_takes_the_put_lock_one_step_at_a_time(stores):
    s = stores(memory_config(dispatch_write_retries_max=0), FaultyFileIO())
    put_n(s, 2)
    s.fio.fail("pwrite", errno.EIO, MEMORY_ROOT + "/consumequeue/T/0/", times=1)
    assert s.put(Message("T", b"m002")).ok
    d = s.dispatcher
    assert d.error is not None
    lock = CountingLock(s._put_lock)
    # the failed record and none after it (puts are refused): one step of one record heals it
    assert d.heal(s.commit_log, lock, step_records=1) and d.error is None
    assert lock.taken == 2 and not s._put_lock.locked()       # the step, and the one that found the end
    put_n(s, 3, start=3)
    assert bodies(s) == [b"m%03d" % i for i in range(6)]


def test_a_redispatch_stops_at_records_max_and_says_where(stores):
    s = stores(memory_config(), FaultyFileIO())
    put_n(s, 5)
    first = s.dispatcher.redispatch(s.commit_log, s.commit_log.min_offset, records_max=2)
    assert first.records == 2 and not first.complete
    rest = s.dispatcher.redispatch(s.commit_log, first.end_offset, records_max=10)
    assert rest.records == 3 and rest.complete and rest.units_skipped == 3     # idempotent: already there


def test_deferred_dispatches_retry_a_failed_write_as_one_put_does(stores):
    """Deferred puts dispatched as one (Dispatcher.dispatch_many): a consume-queue write that fails
    and then succeeds is retried, counted, and leaves nothing refused or missing."""
    s = stores(memory_config(dispatch_write_retries_max=2), FaultyFileIO())
    put_n(s, 2)
    for i in range(2, 8):
        assert s.put_batch([Message("T", b"m%03d" % i)], defer_dispatch=True)[0].ok
    s.fio.fail("pwrite", errno.EIO, MEMORY_ROOT + "/consumequeue/T/0/", times=2)
    s.drain_dispatch()
    d = s.dispatcher
    assert d.error is None and d.pending_from is None and d.write_failures == 2
    assert d.dispatched_offset == s.commit_log.max_offset
    assert bodies(s) == [b"m%03d" % i for i in range(8)]


def test_deferred_dispatches_that_still_fail_wait_for_the_heal_from_the_first(stores):
    """Retries exhausted in a dispatch of several deferred puts: every try counted, the first of
    them is where the heal starts, puts are refused until it healed, then everything is in order."""
    s = stores(memory_config(dispatch_write_retries_max=1), FaultyFileIO())
    put_n(s, 2)
    first = s.put_batch([Message("T", b"m002", keys=["k2"])], defer_dispatch=True)[0]
    for i in range(3, 6):
        assert s.put_batch([Message("T", b"m%03d" % i, keys=["k%d" % i])], defer_dispatch=True)[0].ok
    s.fio.fail("pwrite", errno.EIO, MEMORY_ROOT + "/consumequeue/T/0/", times=2)     # the write and its retry
    s.drain_dispatch()
    d = s.dispatcher
    assert d.error is not None and d.write_failures == 2 and d.pending_from == first.commitlog_offset
    assert s.put(Message("T", b"refused")).status is PutStatus.SERVICE_NOT_AVAILABLE
    assert s.max_offset("T", 0) == 2
    assert d.heal(s.commit_log) and d.error is None
    put_n(s, 2, start=6)
    assert bodies(s) == [b"m%03d" % i for i in range(8)]
    assert [m.body for m in s.query_by_key("T", "k4")] == [b"m004"]


def test_deferred_dispatches_retry_a_failed_index_write(stores):
    """The index's part of a dispatch of deferred puts: a new index file that cannot be opened at
    the first try is opened at the retry; every key is found, nothing is refused."""
    s = stores(memory_config(dispatch_write_retries_max=1, index_slots=16, index_entries=16), FaultyFileIO())
    put_n(s, 2)
    for i in range(2, 40):      # past one index file's entries: the drain opens the next one
        assert s.put_batch([Message("T", b"m%03d" % i, keys=["k%d" % i])], defer_dispatch=True)[0].ok
    s.fio.fail("open", errno.EIO, MEMORY_ROOT + "/index/", times=1)
    s.drain_dispatch()
    d = s.dispatcher
    assert d.error is None and d.write_failures == 1
    assert len(s.index.files) >= 2
    assert [[m.body for m in s.query_by_key("T", "k%d" % i)] for i in range(40)] == [[b"m%03d" % i] for i in range(40)]
