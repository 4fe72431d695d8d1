"""PutLock and puts answered before their dispatch (``put_batch(..., defer_dispatch=True)``):
dispatched together, in log order, by the next taker of the put lock other than a deferring put,
before any read, at drain_dispatch(), at shutdown, before a put that dispatches at once; a crash
with dispatches pending recovers them from the log."""

from __future__ import annotations

import pytest

from tidemq.store import GetStatus, Message, MessageStore
from tidemq.store.put_lock import PutLock
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import memory_config


def test_put_lock_runs_what_is_pending_in_order_when_taken():
    ran = []
    lock = PutLock(lambda entries: ran.append(list(entries)))
    with lock:
        lock.defer((1, "a"))
        lock.defer((2, "b"))
        assert ran == []                      # not while the deferring holder has it
    assert ran == [] and lock.pending == [(1, "a"), (2, "b")]
    with lock.appending:                      # a put: what waits goes on waiting
        lock.defer((3, "c"))
    assert ran == [] and len(lock.pending) == 3
    with lock:
        assert ran == [[(1, "a"), (2, "b"), (3, "c")]] and lock.pending == []     # all of them, as one
    lock.drain()                              # nothing pending: nothing runs
    assert len(ran) == 1
    with lock:
        lock.defer((4, "d"))
    lock.drain()
    assert ran[-1] == [(4, "d")] and not lock.locked()
    with lock.appending:
        lock.defer((5, "e"))
        lock.run((6, "f"))                    # a put dispatching at once: after what waits, with it
        assert ran[-1] == [(5, "e"), (6, "f")] and lock.pending == []
        lock.run((7, "g"))
        assert ran[-1] == [(7, "g")]
    assert not lock.locked()


def test_put_lock_a_dispatch_that_raises_leaves_the_lock_free():
    def boom(*_):
        raise RuntimeError("dispatch bug")

    lock = PutLock(boom)           # (dispatch's one argument: the pending entries)
    with lock:
        lock.defer(("x",))
    with pytest.raises(RuntimeError):
        with lock:
            pass
    assert not lock.locked()


def _cq_end(store: MessageStore, topic: str, qid: int) -> int:
    """The consume queue's own end (no drain: what was dispatched so far)."""
    return store.queues.get(topic, qid).max_offset


def test_a_deferred_put_is_read_back_at_once(make_config, open_store):
    s = open_store(make_config())
    s.create_topic("T", 1)
    r = s.put_batch([Message("T", b"first", queue_id=0)], defer_dispatch=True)
    assert r[0].ok and r[0].queue_offset == 0
    assert _cq_end(s, "T", 0) == 0                       # answered, not dispatched yet
    g = s.get("G", "T", 0, 0)                            # a read dispatches it first
    assert g.status is GetStatus.FOUND and [m.body for m in g.messages] == [b"first"]
    assert _cq_end(s, "T", 0) == 1


@pytest.mark.parametrize("read", ["max_offset", "get_raw", "query_by_key", "drain_dispatch"])
def test_every_read_sees_a_deferred_put(make_config, open_store, read):
    s = open_store(make_config())
    s.create_topic("T", 1)
    assert s.put_batch([Message("T", b"x", queue_id=0, keys=["k1"])], defer_dispatch=True)[0].ok
    if read == "max_offset":
        assert s.max_offset("T", 0) == 1
    elif read == "get_raw":
        assert s.get_raw("T", 0, 0).status is GetStatus.FOUND
    elif read == "query_by_key":
        assert [m.body for m in s.query_by_key("T", "k1")] == [b"x"]
    else:
        s.drain_dispatch()
    assert _cq_end(s, "T", 0) == 1


def test_puts_after_a_deferred_one_are_dispatched_in_log_order(make_config, open_store):
    s = open_store(make_config())
    s.create_topic("T", 1)
    s.create_topic("U", 2)
    assert s.put_batch([Message("T", b"0", queue_id=0)], defer_dispatch=True)[0].ok
    assert _cq_end(s, "T", 0) == 0
    assert s.put_batch([Message("T", b"1", queue_id=0, keys=["k"])], defer_dispatch=True)[0].ok
    assert s.put_batch([Message("U", b"u", queue_id=1, keys=["k"])], defer_dispatch=True)[0].ok
    assert _cq_end(s, "T", 0) == 0                       # the deferring puts leave them waiting, together
    assert len(s._put_lock.pending) == 3
    assert s.put(Message("T", b"2", queue_id=0)).ok      # a put dispatching at once: those before it first
    assert _cq_end(s, "T", 0) == 3 and _cq_end(s, "U", 1) == 1 and not s._put_lock.pending
    g = s.get("G", "T", 0, 0)
    assert [(m.queue_offset, m.body) for m in g.messages] == [(0, b"0"), (1, b"1"), (2, b"2")]
    assert [m.body for m in s.query_by_key("T", "k")] == [b"1"]
    assert [m.body for m in s.query_by_key("U", "k")] == [b"u"]


def test_dispatches_written_as_one_are_what_one_by_one_writes(stores):
    """Deferred puts of several topics and queues, with keys and without, dispatched together
    (Dispatcher.dispatch_many) leave the consume queues and the index as puts dispatched one by one."""
    stores = [stores(memory_config(), FaultyFileIO()), stores(memory_config(), FaultyFileIO())]
    for s in stores:
        s.create_topic("T", 3)
        s.create_topic("U", 1)
    sends = [Message("T" if i % 3 else "U", b"m%d" % i, keys=["k%d" % (i % 4)] if i % 2 else []) for i in range(40)]
    for i, m in enumerate(sends):
        assert stores[0].put_batch([m], defer_dispatch=True)[0].ok
        assert stores[1].put_batch([m]).all_ok()
        if i == 25:
            assert len(stores[0]._put_lock.pending) == 26
    stores[0].drain_dispatch()
    for s in stores:
        assert s.dispatcher.dispatched_offset == s.commit_log.max_offset
    for topic, queues in (("T", 3), ("U", 1)):
        for q in range(queues):
            got = [[(m.queue_offset, m.body, m.commitlog_offset) for m in s.get("G", topic, q, 0, max_count=64).messages]
                   for s in stores]
            assert got[0] == got[1] and got[0]
        for k in range(4):
            assert ([m.body for m in stores[0].query_by_key(topic, "k%d" % k)]
                    == [m.body for m in stores[1].query_by_key(topic, "k%d" % k)])


def test_shutdown_dispatches_what_is_pending(make_config, open_store):
    cfg = make_config()
    s = open_store(cfg)
    s.create_topic("T", 1)
    assert s.put_batch([Message("T", b"late", queue_id=0)], defer_dispatch=True)[0].ok
    s.shutdown()
    again = open_store(cfg)
    assert [m.body for m in again.get("G", "T", 0, 0).messages] == [b"late"]


def test_a_crash_with_dispatches_pending_recovers_them_from_the_log(stores):
    cfg = memory_config()
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    s.create_topic("T", 1)
    assert s.put(Message("T", b"dispatched", queue_id=0)).ok
    s.flush_queues()                                     # the checkpoint has the first one dispatched
    assert s.put_batch([Message("T", b"pending", queue_id=0)], defer_dispatch=True)[0].ok
    s.commit_log.flush()                                 # the record is durable; its dispatch never ran
    assert _cq_end(s, "T", 0) == 1
    s.kill()
    again = stores(cfg, fio.after_crash())
    assert [m.body for m in again.get("G", "T", 0, 0).messages] == [b"dispatched", b"pending"]


def test_a_follower_crashed_with_a_frame_undispatched_recovers_it_from_the_log(stores):
    """A follower confirms a frame before dispatching it (replica.append(..., defer_dispatch=True)):
    killed then, its restart dispatches the frame from the log."""
    fio = FaultyFileIO()
    leader = stores(memory_config(), FaultyFileIO())
    leader.create_topic("T", 1)
    assert all(r.ok for r in leader.put_batch([Message("T", b"m%d" % i, queue_id=0) for i in range(5)]))
    cfg = memory_config()
    f = stores(cfg, fio)
    f.follow("a follower")
    off, data = leader.replica.read(0, 1 << 20)
    f.replica.append(off, data, defer_dispatch=True)
    f.commit_log.flush()                                 # the frame is durable; its dispatch never ran
    assert _cq_end(f, "T", 0) == 0
    f.kill()
    again = stores(cfg, fio.after_crash())
    assert [m.body for m in again.get("G", "T", 0, 0).messages] == [b"m%d" % i for i in range(5)]


def test_put_lock_bounds_what_waits_the_put_beyond_runs_them_all_in_order():
    ran = []
    lock = PutLock(lambda entries: ran.extend(entries), deferred_max=3)
    with lock:
        for i in range(3):
            lock.defer((i,))
        assert ran == [] and len(lock.pending) == 3
        lock.defer((3,))                          # one more than may wait: all of them now, in order
        assert ran == [(0,), (1,), (2,), (3,)] and lock.pending == []
        lock.defer((4,))
    assert lock.pending == [(4,)]


def test_a_store_keeps_at_most_dispatch_deferred_max_puts_undispatched():
    s = MessageStore(memory_config(dispatch_deferred_max=2), FaultyFileIO()).start()
    try:
        for i in range(5):
            assert s.put_batch([Message("T", b"m%d" % i, queue_id=0)], defer_dispatch=True).all_ok()
            assert len(s._put_lock.pending) <= 2
        assert [m.body for m in s.get("g", "T", 0, 0, max_count=10).messages] == [b"m%d" % i for i in range(5)]
    finally:
        s.shutdown()
