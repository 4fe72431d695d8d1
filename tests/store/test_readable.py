"""ReadableEnd (readable.py): the waits on the readable end. Bounded: past READABLE_WAITERS_MAX
the oldest are called at once (they look again); a stopped store calls every waiter; a waiter that
fails keeps none of the others waiting. (What is readable in each mode: test_reader.py.)"""

from tidemq.store import Message
from tidemq.store.readable import READABLE_WAITERS_MAX
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import memory_config


def _held_back(stores):
    """A store whose readers are held below its log's end (a commit limit that does not move)."""
    s = stores(memory_config(), FaultyFileIO())
    rs = s.put_batch([Message("T", b"m%d" % i) for i in range(2)])
    s.set_commit_limit(lambda: rs[0].commitlog_offset + rs[0].size)
    return s


def test_past_the_bound_the_oldest_waiters_are_called_at_once(stores):
    s = _held_back(stores)
    called: list[int] = []
    for i in range(READABLE_WAITERS_MAX + 1):
        assert s.notify_readable(lambda i=i: called.append(i)) is True
    spilled = READABLE_WAITERS_MAX + 1 - READABLE_WAITERS_MAX // 2
    assert called == list(range(spilled)), "the oldest, in order"
    assert len(s.readable.waiters) == READABLE_WAITERS_MAX // 2
    s.set_commit_limit(None)                     # everything readable: the rest are called
    assert called == list(range(READABLE_WAITERS_MAX + 1)) and not s.readable.waiters


def test_a_stopped_store_calls_every_waiter(stores):
    s = _held_back(stores)
    called: list[int] = []
    s.notify_readable(lambda: called.append(1))
    s.shutdown()
    s.readable_advanced()
    assert called == [1] and not s.readable.waiters


def test_a_failing_waiter_keeps_none_of_the_others_waiting(stores, caplog):
    s = _held_back(stores)
    called: list[int] = []

    def fails():
        raise RuntimeError("a waiter's own failure")
    s.notify_readable(fails)
    s.notify_readable(lambda: called.append(1))
    with caplog.at_level("ERROR", logger="tidemq.store"):
        s.set_commit_limit(None)
    assert called == [1] and not s.readable.waiters
    assert any(r.exc_info and r.exc_info[0] is RuntimeError for r in caplog.records)
