"""MessageStore's lifecycle (StoreState) and its one rule for calls made while it is not
running: calls that answer with a status answer SERVICE_NOT_AVAILABLE (puts with a typed
reason), every other call raises StoreNotRunning. Every public method is tried before
start, after shutdown, after kill and after a failed start."""

from __future__ import annotations

import errno
import random

import pytest

from tidemq.io import LockedError
from tidemq.store import (GetStatus, Message, MessageStore, PutReason, PutStatus, StoreError, StoreNotRunning,
                          StoreState)
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import slices, small_config

# the calls that answer with a status, and how they answer it
STATUS_CALLS = {
    "put": lambda s: [s.put(Message("T", b"x"))],
    "put_batch": lambda s: s.put_batch([Message("T", b"x"), Message("T", b"y")]),
    "put_encoded": lambda s: s.put_encoded("T", [(b"x", b"")]),
    "put_slices": lambda s: s.put_slices("T", *slices([b"i"], [b"x"])),
}
GET_CALLS = {
    "get": lambda s: s.get("G", "T", 0, 0),
    "get_raw": lambda s: s.get_raw("T", 0, 0),
}
# the puts' verdict: answered, never raised
VERDICT_CALLS = {
    "put_refusal": lambda s: s.put_refusal(),
    "write_refusal": lambda s: s.write_refusal(),
    "refusal": lambda s: s.refusal,
    "following": lambda s: s.following,
    "log_failures": lambda s: s.log_failures,
    "puts_may_wait": lambda s: s.puts_may_wait,
    "puts_wait_for_disk_only": lambda s: s.puts_wait_for_disk_only,
}
# every other call raises StoreNotRunning
RAISING_CALLS = {
    "check": lambda s: s.check(),
    "check_disk": lambda s: s.check_disk(),
    "clean": lambda s: s.clean(),
    "commitlog_max_offset": lambda s: s.commitlog_max_offset,
    "commitlog_min_offset": lambda s: s.commitlog_min_offset,
    "create_topic": lambda s: s.create_topic("T", 1),
    "topic_settings": lambda s: s.topic_settings("T"),
    "set_topic_settings": lambda s: s.set_topic_settings("T", {}),
    "set_write_queues": lambda s: s.set_write_queues("T", None),      # (T exists until delete_topic)
    "create_spread_topic": lambda s: s.create_spread_topic("T", 1, None),
    "write_queues": lambda s: s.write_queues("T"),
    "delete_topic": lambda s: s.delete_topic("T"),
    "disk_status": lambda s: s.disk_status(),
    "flush_queues": lambda s: s.flush_queues(),
    "get_by_commitlog_offset": lambda s: s.get_by_commitlog_offset(0),
    "max_offset": lambda s: s.max_offset("T", 0),
    "min_offset": lambda s: s.min_offset("T", 0),
    "observe_flushes": lambda s: s.observe_flushes(None),
    "offset_for_timestamp": lambda s: s.offset_for_timestamp("T", 0, 0),
    "query_by_key": lambda s: s.query_by_key("T", "k"),
    "queue_bytes": lambda s: s.queue_bytes("T", 0),
    "queue_count": lambda s: s.queue_count("T"),
    "space_policy": lambda s: s.space_policy("T"),
    "stats": lambda s: s.stats(),
    "topic_names": lambda s: s.topic_names(),
    "trigger_delete_expired": lambda s: s.trigger_delete_expired(),
    "follow": lambda s: s.follow("a follower"),        # (then lead: serving() leaves the store writable)
    "lead": lambda s: s.lead(0),
    "confirm": lambda s: s.confirm(0),
    "readable_end": lambda s: s.readable_end(),
    "readable_max_offset": lambda s: s.readable_max_offset("T", 0),
    "notify_readable": lambda s: s.notify_readable(lambda: None),
    "on_log_failed": lambda s: s.on_log_failed(lambda f: None),
    "walk_units_aside": lambda s: s.walk_units_aside(),
}
# the lifecycle itself (its own rules, tested below)
LIFECYCLE = {"start", "shutdown", "kill", "install_signal_handlers", "state", "start_progress"}
# wiring the broker does whatever the state (before start, while running): never refused
WIRING = {"set_consumer_positions", "set_commit_limit", "reconfigure"}
# answered whatever the state: message_type from the topic table as it is (the send path asks it after
# its gate, and a store stopping meanwhile must not turn a send into an exception: None before start);
# walks_kept, a count of the unit walks kept (unit_repair.py), read before a read that may need one
ANY_STATE = {"message_type", "walks_kept"}
# housekeeping whatever the state: a no-op when there is nothing to do (test_put_lock.py)
HOUSEKEEPING = {"drain_dispatch", "readable_advanced"}
# the wait of a put made with wait=False (broker/puts.py), answered whatever the state: nothing to
# wait for when no group commit runs (test_durable_waits_answer_in_every_state)
DURABLE_WAITS = {"when_durable", "forget_durable", "settle_put"}
# the one-message put's common case (put_one.py): declines (None, nothing done) wherever the store does
# not take the put, and its caller's put_encoded answers the refusal (STATUS_CALLS)
DECLINING = {"put_one"}


def test_every_public_method_has_a_rule():
    # (the class and its parts: store_writes.py, store_reads.py, ...)
    public = {n for k in MessageStore.__mro__ if k is not object for n in vars(k) if not n.startswith("_")}
    ruled = (set(STATUS_CALLS) | set(GET_CALLS) | set(VERDICT_CALLS) | set(RAISING_CALLS) | LIFECYCLE | WIRING
             | HOUSEKEEPING | ANY_STATE | DURABLE_WAITS | DECLINING)
    assert public == ruled, f"without a rule: {public - ruled}; gone: {ruled - public}"


def assert_not_serving(s: MessageStore, reason: PutReason) -> None:
    for name, call in STATUS_CALLS.items():
        rs = call(s)
        assert rs and all(r.status is PutStatus.SERVICE_NOT_AVAILABLE and r.reason is reason and r.error
                          for r in rs), (name, rs)
    assert s.put_one("T", (b"x", b"")) is None
    for name, call in GET_CALLS.items():
        assert call(s).status is GetStatus.SERVICE_NOT_AVAILABLE, name
    assert s.put_refusal()[0] is reason and s.write_refusal() == s.put_refusal()[1] == s.refusal
    for name, call in RAISING_CALLS.items():
        with pytest.raises(StoreNotRunning) as ei:
            call(s)
        assert ei.value.state is s.state and ei.value.call == name, name
        assert isinstance(ei.value, StoreError) and name in str(ei.value)


def serving(s: MessageStore) -> None:
    """Every call answers normally on a running store."""
    assert s.state is StoreState.RUNNING and s.refusal is None and s.put_refusal() is None
    assert all(r.ok for name, call in STATUS_CALLS.items() for r in call(s))
    assert s.put_one("T", (b"x", b"")) is not None           # (the common case: taken)
    assert all(call(s).status is GetStatus.FOUND for call in GET_CALLS.values())
    for name, call in RAISING_CALLS.items():
        call(s)


def test_before_start(tmp_path):
    s = MessageStore(small_config(tmp_path / "s"))
    assert s.state is StoreState.NEW
    assert_not_serving(s, PutReason.NOT_RUNNING)
    assert s.refusal == "store not started"
    s.shutdown()                                   # nothing to stop: nothing happens
    s.kill()
    assert s.state is StoreState.NEW
    with pytest.raises(StoreNotRunning):
        s.refusal = "a hold"                        # nothing to hold yet


def test_running_then_after_shutdown(tmp_path):
    s = MessageStore(small_config(tmp_path / "s")).start()
    try:
        serving(s)
        assert s.stats()["state"] == "running"
    finally:
        s.shutdown()
    assert s.state is StoreState.STOPPED
    assert_not_serving(s, PutReason.NOT_RUNNING)
    assert s.refusal == "store is stopped"
    s.shutdown()                                   # twice is harmless
    s.kill()
    assert s.state is StoreState.STOPPED
    with pytest.raises(StoreError, match="already stopped"):
        s.start()                                  # a store starts once: make a new one


def test_after_kill(tmp_path):
    fio = FaultyFileIO()
    s = MessageStore(small_config("/s"), fio=fio).start()
    assert s.put(Message("T", b"x")).ok
    s.kill()
    assert s.state is StoreState.KILLED
    assert_not_serving(s, PutReason.NOT_RUNNING)
    assert s.refusal == "store was killed"
    s.shutdown()                                   # does nothing: the killed store wrote nothing more
    assert s.state is StoreState.KILLED


def test_after_a_failed_start(tmp_path):
    fio = FaultyFileIO()
    fio.fail("open", errno.EIO, path_contains="checkpoint")
    s = MessageStore(small_config("/s"), fio=fio)
    with pytest.raises(OSError):
        s.start()
    assert s.state is StoreState.FAILED
    assert_not_serving(s, PutReason.NOT_RUNNING)
    assert s.refusal == "store failed to start"
    with pytest.raises(StoreError, match="already failed"):
        s.start()
    s2 = MessageStore(small_config("/s"), fio=fio).start()     # the failed start let go of the root
    try:
        serving(s2)
    finally:
        s2.shutdown()


def test_a_hold_refuses_puts_until_lifted(tmp_path):
    s = MessageStore(small_config(tmp_path / "s")).start()
    try:
        s.refusal = "held by the test"
        r = s.put(Message("T", b"x"))
        assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and r.error == "held by the test"
        s.refusal = None
        assert s.put(Message("T", b"x")).ok
    finally:
        s.shutdown()


def test_context_manager(tmp_path):
    with MessageStore(small_config(tmp_path / "s")) as s:
        assert s.state is StoreState.RUNNING
        assert s.put(Message("T", b"x")).ok
    assert s.state is StoreState.STOPPED


# The root lock through the FileIO seam ----------------------------------------------------------

def test_a_second_store_on_the_same_root_is_refused_on_the_in_memory_file_system():
    fio = FaultyFileIO()
    s = MessageStore(small_config("/s"), fio=fio).start()
    try:
        other = MessageStore(small_config("/s"), fio=fio)
        with pytest.raises(LockedError, match="in use"):
            other.start()
        assert other.state is StoreState.FAILED
        assert s.put(Message("T", b"still mine")).ok
        elsewhere = MessageStore(small_config("/t"), fio=fio).start()      # another root is another lock
        elsewhere.shutdown()
    finally:
        s.shutdown()
    again = MessageStore(small_config("/s"), fio=fio).start()            # free once the first shut down
    again.shutdown()


def test_a_killed_store_keeps_its_lock_until_its_process_is_gone():
    fio = FaultyFileIO()
    s = MessageStore(small_config("/s"), fio=fio).start()
    s.kill()
    with pytest.raises(LockedError):
        MessageStore(small_config("/s"), fio=fio).start()
    survivor = fio.after_crash()                    # the process died: the kernel drops its locks
    s2 = MessageStore(small_config("/s"), fio=survivor).start()
    try:
        assert s2.recovery is not None and s2.put(Message("T", b"after")).ok
    finally:
        s2.shutdown()


def test_a_long_start_says_what_it_does_and_how_far_it_got(tmp_path, monkeypatch):
    """start_progress() while the log is walked after a crash: the phase and a share that grows."""
    from tidemq.store import commit_log
    from tidemq.store.store import MessageStore as Store
    from tidemq.testing.faulty_io import FaultyFileIO

    from ..support.store import memory_config

    cfg = memory_config(segment_size_bytes=16 * 1024, flush_disk_type="SYNC_FLUSH")
    fio = FaultyFileIO()
    s = Store(cfg, fio=fio).start()
    while len(s.segments) < 5:
        assert s.put(Message("T", b"x" * 1000)).ok
    assert s.start_progress() == "running"
    s.kill()
    fio = fio.after_power_loss(random.Random(1))
    seen: list[str] = []
    s2 = Store(cfg, fio=fio)
    walk = commit_log.CommitLog.iter_records

    def watched(self, *a, **k):
        for rec in walk(self, *a, **k):
            seen.append(s2.start_progress())
            yield rec

    monkeypatch.setattr(commit_log.CommitLog, "iter_records", watched)
    s2.start()
    try:
        walked = [x for x in seen if "of log walked" in x]
        assert walked and all(x.startswith("recovering: the last run did not stop cleanly") for x in walked)
        shares = [int(x.rsplit("(", 1)[1].split(" ")[0]) for x in walked]
        assert shares == sorted(shares) and shares[0] < shares[-1] <= 100, shares
        assert s2.start_progress() == "running"
    finally:
        s2.shutdown()


def test_durable_waits_answer_in_every_state(tmp_path):
    """when_durable / forget_durable / settle_put before start, running (SYNC_FLUSH) and after shutdown:
    never raised; a put made with wait=False is settled PUT_OK once durable, and the group commit's
    end releases a wait it did not get to."""
    from tidemq.store.types import PutResults
    s = MessageStore(small_config(tmp_path / "s", flush_disk_type="SYNC_FLUSH"))
    assert s.when_durable(10, lambda: None) is None and s.forget_durable(None) is None
    r = PutResults(1)
    assert s.settle_put(r) is r and r.pending_end == -1
    s.start()
    try:
        assert s.puts_wait_for_disk_only
        r = s.put_batch([Message("T", b"x")], wait=False)
        assert r.pending_end > 0
        released = []
        handle = s.when_durable(r.pending_end, lambda: released.append(1))
        if handle is not None:
            s.group_commit.wait_durable(r.pending_end, 60)
        assert s.settle_put(r).status is PutStatus.PUT_OK and r.pending_end == -1
        assert handle is None or released == [1]
    finally:
        s.shutdown()
    assert s.when_durable(1 << 40, lambda: None) is None           # ended: nothing to wait for
    s.forget_durable([1 << 40, None])
