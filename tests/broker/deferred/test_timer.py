"""The timer without a server: a MessageStore on a manual clock, the Timer driven by hand."""

import asyncio
import errno
import glob
import os

import pytest

from tidemq.broker.deferred.parking import PROP_DELIVER_MS, park
from tidemq.broker.topic_names import SCHEDULE_TOPIC
from tidemq.broker.deferred.timer import Timer
from tidemq import checked
from tidemq.io import ManualClock, OsFileIO
from tidemq.store import Message

from ...support.store import topic_bodies as bodies


def schedule(store, topic, body, due_ms, uniq):
    m = Message(topic=topic, body=body, properties={"UNIQ_KEY": uniq, PROP_DELIVER_MS: str(due_ms)})
    r = store.put(park(m, SCHEDULE_TOPIC))
    assert r.ok
    return r


def timer_on(stores, queues):
    """(clock, store with topic T of ``queues`` queues, an open Timer over it)."""
    clock = ManualClock()
    s = stores(clock)
    s.create_topic("T", queues)
    t = Timer(s)
    t.open()
    return clock, s, t


def failing_log_timer():
    """(clock, an ASYNC_FLUSH store with topic T, an open Timer, fail): ``fail(cut_back=True)`` makes the
    next fsync of the log fail (store/log_failure.py) and hands the timer the cut, as the broker's
    listener does (service.after_log_failure, on the loop: later, with ``cut_back`` False)."""
    from tidemq.store import MessageStore
    from tidemq.store.log_failure import LogFailed
    from tidemq.testing.faulty_io import FaultyFileIO
    from ...support.store import memory_config
    clock = ManualClock()
    fio = FaultyFileIO(seed=4)
    s = MessageStore(memory_config(segment_size_bytes=32 << 10, commitlog_dirs=("/r/a", "/r/b")), fio=fio,
                     clock=clock).start()
    s.create_topic("T", 1)
    t = Timer(s)
    t.open()

    def fail(cut_back=True):
        fio.fail("fsync", errno.EIO, "/r/a/")
        with pytest.raises(LogFailed):
            s.commit_log.flush()
        [f] = s.log_failures
        if cut_back:
            t.cut_back(f.queue_ends.get((SCHEDULE_TOPIC, 0)), f.covers)
        return f
    return clock, s, t, fail


def test_messages_move_when_due_in_time_order_and_once(stores):
    clock, s, t = timer_on(stores, 2)
    now = clock.now_ms()
    for i, due in enumerate((3000, 1000, 2000)):
        schedule(s, "T", b"m%d" % i, now + due, "U%d" % i)
    assert t.enqueue() == 3 and t.pending == 3 and t.next_due_ms() == now + 1000
    assert t.move_due(clock.now_ms()) == (0, False) and bodies(s, "T") == []
    clock.advance(2.0)
    assert t.move_due(clock.now_ms()) == (2, False)
    assert bodies(s, "T") == [b"m1", b"m2"]
    m = s.get("g", "T", 0, 0).messages + s.get("g", "T", 1, 0).messages
    assert {x.properties["UNIQ_KEY"] for x in m} == {"U1", "U2"}
    assert all("REAL_TOPIC" not in x.properties and x.topic == "T" for x in m)
    clock.advance(1.0)
    assert t.move_due(clock.now_ms()) == (1, False) and t.pending == 0
    assert t.move_due(clock.now_ms() + 10_000) == (0, False)


def test_checkpoint_and_restart_skip_what_was_moved(stores, tmp_path):
    clock, s, t = timer_on(stores, 1)
    now = clock.now_ms()
    for i in range(5):
        schedule(s, "T", b"m%d" % i, now + 1000 * (i + 1), "U%d" % i)
    t.enqueue()
    clock.advance(2.5)
    assert t.move_due(clock.now_ms()) == (2, False)
    t.checkpoint(force=True)
    doc = checked.decode(open(os.path.join(str(tmp_path / "store"), "broker", "timer", "checkpoint.json"), "rb").read())
    assert doc == {"enqueued": 5, "low": 2, "delivered_before_ms": now + 3000,
                   "last": [4, s.get("g", SCHEDULE_TOPIC, 0, 4).messages[0].commitlog_offset]}
    s.shutdown()
    s2 = stores(clock)
    t2 = Timer(s2)
    t2.open()
    assert t2.enqueue() == 3 and t2.pending == 3, "read again from low, the moved ones skipped"
    clock.advance(10)
    assert t2.move_due(clock.now_ms()) == (3, False)
    assert bodies(s2, "T") == [b"m%d" % i for i in range(5)]


def test_a_kill_after_a_move_before_the_checkpoint_moves_nothing_twice(stores):
    clock, s, t = timer_on(stores, 1)
    now = clock.now_ms()
    for i in range(4):
        schedule(s, "T", b"m%d" % i, now + 1000, "U%d" % i)
    schedule(s, "T", b"later", now + 60_000, "UL")
    t.enqueue()
    t.checkpoint(force=True)                       # progress saved before the move
    clock.advance(1.0)
    assert t.move_due(clock.now_ms()) == (4, False)
    s.kill()                                       # the checkpoint after the move is lost
    s.fio.unlock(s._lock_handle)                   # as the dying process's exit would
    clock.advance(5.0)
    s2 = stores(clock)
    t2 = Timer(s2)
    t2.open()
    t2.enqueue()
    assert t2.move_due(clock.now_ms()) == (0, False), "the index says they were moved"
    assert bodies(s2, "T") == [b"m0", b"m1", b"m2", b"m3"]
    clock.advance(60)
    assert t2.move_due(clock.now_ms()) == (1, False)
    assert bodies(s2, "T") == [b"later", b"m0", b"m1", b"m2", b"m3"]


def test_a_refused_put_waits_and_is_retried(stores):
    clock, s, t = timer_on(stores, 1)
    schedule(s, "T", b"m", clock.now_ms() + 100, "U")
    t.enqueue()
    clock.advance(1)
    s.refusal = "test: writes refused"
    assert t.move_due(clock.now_ms()) == (0, True) and t.pending == 1
    s.refusal = None
    assert t.move_due(clock.now_ms()) == (1, False) and bodies(s, "T") == [b"m"]


def test_a_checkpoint_written_while_a_round_puts_does_not_count_its_messages_as_moved(stores):
    """A round's due messages are taken off the heap before their put (which waits under SYNC_FLUSH
    or SYNC replication, on a thread). A checkpoint written meanwhile (a recall answers with one; the
    replication copies ``snapshot()`` to the followers) must not say they were moved: a kill -9 (or a
    failover) before the put lands would skip them at the next start, and they would never be moved."""
    import threading
    clock, s, t = timer_on(stores, 1)
    now = clock.now_ms()
    schedule(s, "T", b"due", now + 1000, "U0")
    later = schedule(s, "T", b"later", now + 60_000, "U1")
    t.enqueue()
    clock.advance(2.0)
    in_put, crash = threading.Event(), threading.Event()

    def put_batch(msgs, **kw):             # the put waits (the fsync, the followers) ... then the broker dies
        in_put.set()
        assert crash.wait(60)
        raise RuntimeError("killed before the put reached the log")

    s.put_batch = put_batch
    round_ = threading.Thread(target=lambda: _swallow(lambda: t.move_due(clock.now_ms())))
    round_.start()
    assert in_put.wait(60)
    copied = t.snapshot()                                        # what a follower would be given now
    assert t.recall(1, now + 60_000, clock.now_ms()).name == "RECALLED"    # writes the checkpoint
    crash.set()
    round_.join(60)
    del s.put_batch
    assert later.queue_offset == 1
    s.shutdown()
    s2 = stores(clock)
    t2 = Timer(s2)
    t2.open()
    t2.enqueue()
    assert t2.move_due(clock.now_ms()) == (1, False), "the message the dead round did not put is moved now"
    assert bodies(s2, "T") == [b"due"]
    assert copied["delivered_before_ms"] <= now + 1000 or copied["enqueued"] == 0, \
        f"the copy a follower gets says the message in the put was moved: {copied}"


def _swallow(fn):
    try:
        fn()
    except RuntimeError:
        pass


def test_a_due_message_not_readable_now_waits_and_is_moved_later(stores):
    """A due schedule message whose record is not readable when its round reads it (past the readable
    end: a promoted leader's high watermark not yet where the old leader's was) was taken for gone
    ("retention?") and marked moved: never delivered."""
    clock, s, t = timer_on(stores, 1)
    schedule(s, "T", b"m", clock.now_ms() + 100, "U")
    t.enqueue()
    clock.advance(1)
    s.set_commit_limit(lambda: 0)
    assert t.move_due(clock.now_ms()) == (0, True) and t.pending == 1
    s.set_commit_limit(None)
    assert t.move_due(clock.now_ms()) == (1, False) and bodies(s, "T") == [b"m"]


def test_a_move_made_before_a_restart_is_found_even_past_the_readable_end(stores):
    """After a restart (or a promotion) a due message may have been moved already: the index is asked.
    Its copy in the real topic may be past the readable end for a while (a promoted leader's high
    watermark behind the old leader's): it is in this log all the same, and moving it again doubled it."""
    clock, s, t = timer_on(stores, 1)
    schedule(s, "T", b"m", clock.now_ms() + 100, "U")
    t.enqueue()
    t.checkpoint(force=True)
    clock.advance(1)
    assert t.move_due(clock.now_ms()) == (1, False)
    [copy] = s.get("g", "T", 0, 0).messages
    t2 = Timer(s)                              # killed before the next checkpoint: a new start
    t2.open()
    t2.enqueue()
    s.set_commit_limit(lambda: copy.commitlog_offset)     # the schedule message readable, its copy not yet
    t2.move_due(clock.now_ms())
    s.set_commit_limit(None)
    assert bodies(s, "T") == [b"m"], "moved once"


def test_progress_past_the_schedule_queues_end_does_not_skip_what_is_parked_after(stores):
    """A promoted follower under ASYNC replication opens its old leader's timer progress, which may
    count schedule offsets this log never got (the tail the failover took back). The delayed messages
    parked on the new leader get those offsets: they were never read (below the progress's low) or
    skipped as moved (below its enqueued, due before its time), and never delivered."""
    from tidemq.broker.state.layout import StateLayout, state_dir
    clock, s, t = timer_on(stores, 1)
    t.close()
    path = StateLayout(state_dir(s.config.root_dir)).timer_checkpoint
    checked.write(s.fio, path, {"enqueued": 5, "low": 5, "delivered_before_ms": clock.now_ms() + 3_600_000})
    t2 = Timer(s)                                   # the new leader's timer, from the copied progress
    t2.open()
    for i in range(3):
        schedule(s, "T", b"m%d" % i, clock.now_ms() + 100, "U%d" % i)
    t2.enqueue()
    clock.advance(1)
    assert t2.move_due(clock.now_ms()) == (3, False)
    assert bodies(s, "T") == [b"m0", b"m1", b"m2"]


def test_a_move_before_a_kill_is_not_made_again_after_the_clock_stepped_back(stores):
    """The wall clock stepped back across a restart (NTP, a VM's clock): entries moved just before the
    kill (their checkpoint lost) are not due yet by the new start's clock. They may have been moved
    all the same: the index is asked when they fall due again, not only for what is due at the start."""
    clock, s, t = timer_on(stores, 1)
    now = clock.now_ms()
    schedule(s, "T", b"m", now + 1000, "U")
    t.enqueue()
    t.checkpoint(force=True)                       # progress saved before the move
    clock.advance(1.0)
    assert t.move_due(clock.now_ms()) == (1, False)
    s.kill()                                       # the checkpoint after the move is lost
    s.fio.unlock(s._lock_handle)
    clock.step_wall(-60.0)                         # the wall clock stepped back a minute
    s2 = stores(clock)
    t2 = Timer(s2)
    t2.open()
    t2.enqueue()
    assert t2.move_due(clock.now_ms()) == (0, False), "not due by this clock"
    clock.advance(61)
    assert t2.move_due(clock.now_ms()) == (0, False), "the index says it was moved"
    assert bodies(s2, "T") == [b"m"], "moved once"


def test_after_a_failure_of_the_log_a_delayed_message_is_neither_lost_nor_doubled_nor_taken_for_another(tmp_path):
    """ASYNC_FLUSH: the timer reads schedule messages and moves copies before their fsync. When the
    fsync fails (store/log_failure.py) the schedule queue is cut back and the next delayed messages
    take its offsets again; the copies put after the durable end are taken back too. The timer
    (cut_back, what the broker does at once, service.after_log_failure) forgets what it read past the
    cut, reads the new messages at those offsets, and moves again what its moves lost."""
    clock, s, t, fail = failing_log_timer()
    try:
        now = clock.now_ms()
        schedule(s, "T", b"due", now + 1000, "UD")            # schedule offset 0
        schedule(s, "T", b"late", now + 60_000, "UL")         # 1
        s.commit_log.flush()                                   # both durable
        schedule(s, "T", b"gone", now + 30_000, "UG")         # 2: answered OK (ASYNC_FLUSH), never flushed
        assert t.enqueue() == 3
        clock.advance(1)
        assert t.move_due(clock.now_ms()) == (1, False)       # "due" moved: its copy not flushed either
        f = fail()
        assert f.queue_ends == {(SCHEDULE_TOPIC, 0): 2, ("T", 0): 0}
        assert bodies(s, "T") == [], "the copy of 'due' was taken back"
        schedule(s, "T", b"new", clock.now_ms() + 4000, "UN")  # takes schedule offset 2 again
        t.enqueue()
        assert t.move_due(clock.now_ms()) == (1, False) and bodies(s, "T") == [b"due"], "moved again"
        clock.advance(5)
        assert t.move_due(clock.now_ms()) == (1, False) and bodies(s, "T") == [b"due", b"new"], "read, at its time"
        clock.advance(30)
        assert t.move_due(clock.now_ms()) == (0, False), "nothing at 'gone''s time"
        clock.advance(30)
        assert t.move_due(clock.now_ms()) == (1, False)
        assert sorted(bodies(s, "T")) == [b"due", b"late", b"new"], "each once"
    finally:
        s.shutdown()


def test_a_disk_refusing_the_progress_is_said_once_with_a_count_and_no_traceback(stores, caplog):
    """The timer's progress cannot be written (a full disk: ENOSPC through the FileIO seam) round after
    round: one WARNING line while it lasts, no traceback (an expected condition), then one line with
    the count once it is written again. Before: "timer round failed" with a traceback every round."""
    clock, s, t = timer_on(stores, 1)
    real = s.fio.open

    def full(path, *a, **k):
        if path.startswith(t.path):
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real(path, *a, **k)
    s.fio.open = full
    caplog.set_level("WARNING", "tidemq.broker")
    for i in range(3):
        schedule(s, "T", b"m%d" % i, clock.now_ms() + 10, "U%d" % i)
        clock.advance(2)
        assert asyncio.run(t.turn())[1] is True, "failed"
    said = [r for r in caplog.records if r.name == "tidemq.broker"]
    assert len(said) == 1 and said[0].exc_info is None and "ENOSPC" not in said[0].getMessage(), said
    assert "No space left" in said[0].getMessage()
    s.fio.open = real
    clock.advance(2)
    assert asyncio.run(t.turn())[1] is False
    said = [r.getMessage() for r in caplog.records if r.name == "tidemq.broker"]
    assert len(said) == 2 and "after 3 failed attempt(s) (OSError ENOSPC: 3)" in said[1], said
    assert checked.load(s.fio, t.path, "timer progress").doc is not None


@pytest.mark.parametrize("cut_back", ["before the round noted the put", "after it"])
def test_a_failure_of_the_log_while_a_move_is_put_is_moved_again(cut_back):
    """The round runs on an executor thread (puts that may wait); the broker's cut_back runs on the loop
    when the log fails. A failure after the move's put answered OK took the copy back all the same,
    whether its cut_back runs before the round noted the put (as not flushed yet) or after (the log
    resumed meanwhile: its flushed offset past the copy): it is moved again, never lost."""
    clock, s, t, fail = failing_log_timer()
    try:
        schedule(s, "T", b"due", clock.now_ms() + 1000, "UD")      # schedule offset 0
        s.commit_log.flush()                                        # durable
        assert t.enqueue() == 1
        clock.advance(1)
        real = s.put_batch

        failed = []

        def put_then_the_log_fails(msgs):
            rs = real(msgs)                  # the copy: answered OK, not flushed
            failed.append(fail(cut_back=cut_back == "before the round noted the put"))   # (the loop's)
            return rs
        s.put_batch = put_then_the_log_fails
        t.move_due(clock.now_ms())
        s.put_batch = real
        if cut_back == "after it":
            t.cut_back(failed[0].queue_ends.get((SCHEDULE_TOPIC, 0)), failed[0].covers)
        assert bodies(s, "T") == [], "the copy of 'due' was taken back"
        clock.advance(1)
        t.enqueue()
        t.move_due(clock.now_ms())
        assert bodies(s, "T") == [b"due"], "moved again, once"
    finally:
        s.shutdown()


def test_a_round_between_a_failure_of_the_log_and_its_cut_back_forgets_no_move_it_took():
    """The log goes on past what a failure took (its flushed offset moved to where it resumes) before
    the broker's cut_back runs on the loop; a timer round in between (on its executor thread) must
    not count a move whose copy the failure took as flushed and forget it: cut_back moves it again."""
    clock, s, t, fail = failing_log_timer()
    try:
        schedule(s, "T", b"due", clock.now_ms() + 1000, "UD")      # schedule offset 0
        s.commit_log.flush()                                        # durable
        assert t.enqueue() == 1
        clock.advance(1)
        assert t.move_due(clock.now_ms()) == (1, False)             # its copy not flushed
        f = fail(cut_back=False)
        assert bodies(s, "T") == [], "the copy of 'due' was taken back"
        asyncio.run(t.turn())                                       # a round before cut_back
        t.cut_back(f.queue_ends.get((SCHEDULE_TOPIC, 0)), f.covers)
        clock.advance(1)
        asyncio.run(t.turn())
        assert bodies(s, "T") == [b"due"], "moved again, once"
    finally:
        s.shutdown()


def test_a_move_whose_put_returns_as_the_log_fails_is_made_again_when_its_copy_was_taken(tmp_path):
    """A round on a thread (puts that may wait): its put returns OK (ASYNC_FLUSH, not flushed), then the
    fsync fails and cut_back runs (on the loop) before the round records the copy as unflushed. The
    copy was taken back: the delayed message must be moved again, not counted as moved."""
    import errno
    import threading
    import pytest
    from tidemq.store import MessageStore
    from tidemq.store.log_failure import LogFailed
    from tidemq.testing.faulty_io import FaultyFileIO
    from ...support.store import memory_config
    clock = ManualClock()
    fio = FaultyFileIO(seed=4)
    s = MessageStore(memory_config(segment_size_bytes=32 << 10, commitlog_dirs=("/r/a", "/r/b")), fio=fio,
                     clock=clock).start()
    try:
        s.create_topic("T", 1)
        t = Timer(s)
        t.open()
        now = clock.now_ms()
        schedule(s, "T", b"due", now + 1000, "UD")             # schedule offset 0
        s.commit_log.flush()                                    # durable
        assert t.enqueue() == 1
        clock.advance(1)
        returned, go = threading.Event(), threading.Event()
        put_batch = s.put_batch

        def gated(msgs):
            rs = put_batch(msgs)                                # the copy is written, not flushed
            returned.set()
            assert go.wait(30), "hang bound"
            return rs
        s.put_batch = gated
        out = []
        th = threading.Thread(target=lambda: out.append(t.move_due(clock.now_ms())))
        th.start()
        assert returned.wait(30), "hang bound"
        fio.fail("fsync", errno.EIO, "/r/a/")
        with pytest.raises(LogFailed):
            s.commit_log.flush()
        [f] = s.log_failures
        assert bodies(s, "T") == [], "the copy of 'due' was taken back"
        t.cut_back(f.queue_ends.get((SCHEDULE_TOPIC, 0)), f.covers)
        go.set()
        th.join(30)
        assert not th.is_alive()
        s.put_batch = put_batch
        assert t.move_due(clock.now_ms()) == (1, False), "moved again"
        assert bodies(s, "T") == [b"due"]
        clock.advance(60)
        assert t.move_due(clock.now_ms()) == (0, False) and bodies(s, "T") == [b"due"], "once"
    finally:
        s.shutdown()


def test_a_kill_after_a_failure_of_the_log_before_the_checkpoint_was_cut_skips_no_message_parked_at_a_reused_offset(tmp_path):
    """The log fails (ASYNC_FLUSH) and the schedule queue is cut back below the checkpoint's
    ``enqueued``; a delayed message is parked at a reused offset; the process is killed before the timer
    was cut back (its checkpoint still counts the old message at that offset). The queue stands as far
    as the checkpoint again: at the next start the new message must be read, not skipped as moved."""
    import errno
    import pytest
    from tidemq.store import MessageStore
    from tidemq.store.log_failure import LogFailed
    from tidemq.testing.faulty_io import FaultyFileIO
    from ...support.store import memory_config
    clock = ManualClock()
    fio = FaultyFileIO(seed=4)
    cfg = memory_config(segment_size_bytes=32 << 10, commitlog_dirs=("/r/a", "/r/b"))
    s = MessageStore(cfg, fio=fio, clock=clock).start()
    s.create_topic("T", 1)
    t = Timer(s)
    t.open()
    now = clock.now_ms()
    schedule(s, "T", b"a", now + 1000, "UA")               # schedule offset 0
    schedule(s, "T", b"b", now + 60_000, "UB")             # 1
    s.commit_log.flush()                                    # both durable
    schedule(s, "T", b"gone", now + 30_000, "UG")          # 2: answered OK (ASYNC_FLUSH), never flushed
    assert t.enqueue() == 3
    clock.advance(1)
    assert t.move_due(clock.now_ms()) == (1, False)
    s.commit_log.flush()                                    # the copy of 'a' is durable
    schedule(s, "T", b"gone", now + 30_000, "UG2")         # 3: answered OK, never flushed
    assert t.enqueue() == 1
    t.checkpoint(force=True)                                # enqueued 4, delivered before now + 30 s
    fio.fail("fsync", errno.EIO, "/r/a/")
    with pytest.raises(LogFailed):
        s.commit_log.flush()
    [f] = s.log_failures
    assert f.queue_ends[(SCHEDULE_TOPIC, 0)] == 3
    schedule(s, "T", b"new", now + 10_000, "UN")           # takes schedule offset 3 again
    schedule(s, "T", b"new2", now + 10_000, "UN2")         # 4
    s.commit_log.flush()
    s.kill()                                                # before cut_back rewrote the checkpoint
    s2 = MessageStore(cfg, fio=fio.after_crash(), clock=clock).start()
    try:
        t2 = Timer(s2)
        t2.open()
        t2.enqueue()
        clock.advance(61)
        t2.move_due(clock.now_ms())
        assert sorted(bodies(s2, "T")) == [b"a", b"b", b"gone", b"new", b"new2"], "none skipped, none doubled"
    finally:
        s2.shutdown()


def walked(s) -> None:
    """Ask for the walk aside of the schedule queue's unit 1 (read it) and wait for it to end."""
    import threading

    from ...support.wait import PATIENCE_S
    r = s.get("%sys", SCHEDULE_TOPIC, 0, 1)
    assert r.walking is not None, "its walk runs aside"
    done = threading.Event()
    s.notify_readable(done.set, r.walking)
    assert done.wait(PATIENCE_S), "the walk ended"


class _FailingWalk(OsFileIO):
    """Real files; a damaged consume-queue unit's walk aside (store/unit_repair.py) fails (EIO) at its
    read-ahead while ``failing``."""
    failing = True

    def read_ahead(self, mapping, offset: int, length: int) -> None:
        if self.failing:
            raise OSError(errno.EIO, "read-ahead failed")
        super().read_ahead(mapping, offset, length)


def test_a_schedule_unit_whose_walk_failed_waits_and_nothing_is_lost_or_moved_twice(tmp_path, caplog):
    """The schedule queue's unit 1 is damaged (it points at another topic's record) and the walk aside
    for its record fails (EIO, the FileIO seam; remembered 10 s: its reads raise WalkFailed): a round
    moves what is before it and the rest waits (no failed round, no traceback); once the walk works
    again, every delayed message is moved, each once. Before, every round raised at the unit (read on
    past what was moved): nothing was moved while the walk kept failing, a traceback each round."""
    import logging

    from tidemq.store import MessageStore, StoreConfig
    from tidemq.store.consume_queue import UNIT
    from tidemq.store.unit_repair import FAILED_FOR_S

    clock = ManualClock()
    cfg = StoreConfig(root_dir=str(tmp_path / "store"), segment_size_bytes=256 << 10, index_slots=1000,
                      index_entries=4000, preallocate_next_segment=False)
    s = MessageStore(cfg, clock=clock).start()
    s.create_topic("T", 1)
    s.create_topic("O", 1)
    s.create_topic(SCHEDULE_TOPIC, 1)
    now = clock.now_ms()
    for i in range(3):
        schedule(s, "T", b"m%d" % i, now + 100, "U%d" % i)
    other = s.put(Message("O", b"o")).commitlog_offset
    s.shutdown()
    [path] = glob.glob(os.path.join(cfg.root_dir, "consumequeue", SCHEDULE_TOPIC, "0", "*"))
    with open(path, "r+b") as f:
        f.seek(1 * UNIT.size)
        f.write(UNIT.pack(other, 100, 0))
    fio = _FailingWalk()
    s = MessageStore(cfg, fio=fio, clock=clock).start()
    try:
        s.walk_units_aside()
        t = Timer(s)
        t.open()
        clock.advance(1)

        walked(s)
        with caplog.at_level(logging.WARNING, logger="tidemq.broker"):
            assert asyncio.run(t.turn()) == (False, False)
            assert asyncio.run(t.turn()) == (False, False)
        assert bodies(s, "T") == [b"m0"]
        assert not [r for r in caplog.records if r.name == "tidemq.broker" and r.exc_info]
        fio.failing = False
        clock.advance(FAILED_FOR_S + 1)
        walked(s)                                           # walked again (kept now)
        asyncio.run(t.turn())
        asyncio.run(t.turn())
        assert bodies(s, "T") == [b"m0", b"m1", b"m2"]
        assert t.pending == 0
    finally:
        s.shutdown()


def test_a_due_message_whose_unit_walk_failed_waits_and_the_others_are_moved(tmp_path, caplog):
    """Three due messages read into the heap; then unit 1 of the schedule queue is damaged (it points at
    another topic's record) and the walk aside for its record fails (EIO through the FileIO seam;
    remembered 10 s): a round moves the two others and m1 waits on the heap (no failed round, no
    traceback); once the walk works again it is moved, once. Before, read_at raised: the round failed
    with a traceback and moved none of them while the walk kept failing."""
    import logging

    from tidemq.store import MessageStore, StoreConfig
    from tidemq.store.consume_queue import UNIT
    from tidemq.store.unit_repair import FAILED_FOR_S

    clock = ManualClock()
    cfg = StoreConfig(root_dir=str(tmp_path / "store"), segment_size_bytes=256 << 10, index_slots=1000,
                      index_entries=4000, preallocate_next_segment=False)
    fio = _FailingWalk()
    s = MessageStore(cfg, fio=fio, clock=clock).start()
    try:
        s.walk_units_aside()
        for topic in ("T", "O", SCHEDULE_TOPIC):
            s.create_topic(topic, 1)
        now = clock.now_ms()
        for i in range(3):
            schedule(s, "T", b"m%d" % i, now + 100, "U%d" % i)
        other = s.put(Message("O", b"o")).commitlog_offset
        t = Timer(s)
        t.open()
        assert t.enqueue() == 3
        [path] = glob.glob(os.path.join(cfg.root_dir, "consumequeue", SCHEDULE_TOPIC, "0", "*"))
        with open(path, "r+b") as f:                        # (the store maps the file: it reads this)
            f.seek(1 * UNIT.size)
            f.write(UNIT.pack(other, 100, 0))
        clock.advance(1)

        walked(s)
        with caplog.at_level(logging.WARNING, logger="tidemq.broker"):
            assert asyncio.run(t.turn())[0] is False
        assert bodies(s, "T") == [b"m0", b"m2"] and t.pending == 1
        assert not [r for r in caplog.records if r.name == "tidemq.broker" and r.exc_info]
        fio.failing = False
        clock.advance(FAILED_FOR_S + 1)
        walked(s)                                           # walked again (kept now)
        asyncio.run(t.turn())
        assert bodies(s, "T") == [b"m0", b"m1", b"m2"] and t.pending == 0      # (sorted: each once)
    finally:
        s.shutdown()
