"""Flush: SYNC_FLUSH group commit (durable on return, shared fsyncs, timeout) and
ASYNC_FLUSH (interval, least pages, thorough interval)."""

from __future__ import annotations

import itertools
import logging
import os
import threading

import pytest

from tidemq.io import ManualClock, OsFileIO
from tidemq.store import GetStatus, Message, PutReason, PutStatus
from tidemq.store.flush import PAGE_SIZE, AsyncFlushService, GroupCommitService
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import MEMORY_ROOT, memory_config
from ..support.wait import PATIENCE_S, patience, wait_until

THREADS = 8
PUTS_PER_THREAD = 150


class RecordingFileIO(OsFileIO):
    """Records every fsync(handle) with a global sequence number taken when the fsync starts."""

    def __init__(self) -> None:
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self.fsyncs: list[tuple[int, object]] = []     # (seq at start, handle)

    def next_seq(self) -> int:
        with self._lock:
            return next(self._seq)

    def fsync(self, handle) -> None:
        seq = self.next_seq()
        super().fsync(handle)
        with self._lock:
            self.fsyncs.append((seq, handle))

    def fsyncs_of(self, handle) -> list[int]:
        with self._lock:
            return [seq for seq, h in self.fsyncs if h == handle]


class GatedFileIO(OsFileIO):
    """fsync of a commit-log segment waits for ``gate`` while ``gated`` is set (``entered`` says
    one is waiting); every other call is the real file system's."""

    def __init__(self) -> None:
        self.paths: dict[int, str] = {}
        self.gated = False
        self.gate = threading.Event()
        self.entered = threading.Event()

    def open(self, path: str, create: bool = False, readonly: bool = False) -> int:
        h = super().open(path, create, readonly)
        self.paths[h] = path
        return h

    def fsync(self, handle) -> None:
        if self.gated and "commitlog" in self.paths.get(handle, ""):
            self.entered.set()
            assert self.gate.wait(2 * PATIENCE_S), "the test never opened the fsync gate"
        super().fsync(handle)


# SYNC_FLUSH -------------------------------------------------------------------------

def test_sync_flush_every_put_is_durable_on_return(make_config, open_store):
    """8 threads put at once, across segment rolls: every put returns only after an fsync of its
    segment that started after the put did. (How many fsyncs they share depends on scheduling:
    bench/store_sync_flush.py measures it; the sharing itself is the next test.)"""
    fio = RecordingFileIO()
    s = open_store(make_config(flush_disk_type="SYNC_FLUSH", segment_size_bytes=256 * 1024,
                               sync_flush_timeout_ms=600_000), fio=fio)
    assert s.group_commit is not None and s.async_flush is None
    checks: list[tuple[int, object, object]] = []       # (seq before the put, result, handle)
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def writer(t: int) -> None:
        try:
            barrier.wait()
            for i in range(PUTS_PER_THREAD):
                before = fio.next_seq()
                r = s.put(Message("T", b"t%d-%d|" % (t, i) + b"x" * 200, queue_id=t))
                handle = s.segments.find(r.commitlog_offset).handle if r.ok else None
                checks.append((before, r, handle))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(THREADS)]
    fsyncs_before = s.group_commit.fsyncs
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    puts = THREADS * PUTS_PER_THREAD
    assert len(checks) == puts
    assert all(r.status is PutStatus.PUT_OK for _b, r, _h in checks)
    assert len(s.segments) > 1                           # durability across rolls too
    for before, r, handle in checks:
        later = [seq for seq in fio.fsyncs_of(handle) if seq > before]
        assert later, f"put at {r.commitlog_offset} returned with no fsync of its segment after it started"
        assert s.commit_log.flushed_offset >= r.commitlog_offset + r.size
    assert 0 < s.group_commit.fsyncs - fsyncs_before <= puts
    # every message is there, in per-queue order
    for t in range(THREADS):
        g = s.get("G", "T", t, 0, max_count=PUTS_PER_THREAD)
        assert [m.body.split(b"|")[0] for m in g.messages][:32] == [b"t%d-%d" % (t, i) for i in range(32)]
        assert s.max_offset("T", t) == PUTS_PER_THREAD


def test_group_commit_puts_appended_during_an_fsync_share_the_next_one(make_config, open_store):
    """One put's fsync is held at a gate; eight more puts append meanwhile and wait. Released, the
    first fsync ends and one more fsync makes all eight durable: two fsyncs for nine puts."""
    fio = GatedFileIO()
    s = open_store(make_config(flush_disk_type="SYNC_FLUSH", segment_size_bytes=1024 * 1024,
                               sync_flush_timeout_ms=600_000), fio=fio)
    s.create_topic("T", THREADS)
    assert s.put(Message("T", b"warm-up", queue_id=0)).ok
    fsyncs_before = s.group_commit.fsyncs
    results: dict[int, object] = {}

    def put(t: int) -> None:
        results[t] = s.put(Message("T", b"p%d" % t, queue_id=t % THREADS))

    fio.gated = True
    first = threading.Thread(target=put, args=(-1,))
    first.start()
    assert fio.entered.wait(patience()), "the first put's fsync did not start"
    others = [threading.Thread(target=put, args=(t,)) for t in range(THREADS)]
    for th in others:
        th.start()
    wait_until(lambda: sum(s.max_offset("T", q) for q in range(THREADS)) == 2 + THREADS,
               "the other puts to be appended")
    assert not results, "every put waits for an fsync that started after its append"
    fio.gated = False
    fio.gate.set()
    for th in [first, *others]:
        th.join(patience())
    assert sorted(results) == [-1, *range(THREADS)]
    assert all(r.status is PutStatus.PUT_OK for r in results.values())
    assert s.commit_log.flushed_offset == s.commitlog_max_offset
    assert s.group_commit.fsyncs - fsyncs_before == 2, "the gated fsync, then one for the eight appended meanwhile"


def test_sync_flush_timeout(make_config, open_store):
    """An fsync that does not end: the put answers FLUSH_DISK_TIMEOUT after its 50 ms (while the
    fsync is still held), the record is in the log and becomes durable once the fsync ends."""
    fio = GatedFileIO()
    s = open_store(make_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=50), fio=fio)
    assert s.put(Message("T", b"fast", queue_id=0)).status is PutStatus.PUT_OK
    fio.gated = True
    got = []
    try:
        putter = threading.Thread(target=lambda: got.append(s.put(Message("T", b"slow", queue_id=0))))
        putter.start()
        putter.join(patience())                   # the fsync cannot end before the gate opens, below
        assert got, "the put waited for its fsync instead of timing out"
    finally:
        fio.gated = False
        fio.gate.set()
    [r] = got
    assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
    # the record is in the log all the same (and becomes durable later; readable then)
    assert r.commitlog_offset >= 0 and r.queue_offset == 1 and s.max_offset("T", 0) == 2
    wait_until(lambda: s.commit_log.flushed_offset >= r.commitlog_offset + r.size, "the record to become durable")
    g = s.get("G", "T", 0, 0)
    assert [m.body for m in g.messages] == [b"fast", b"slow"]
    assert s.put(Message("T", b"again", queue_id=0)).status is PutStatus.PUT_OK


def test_group_commit_service_directly():
    flushed = [0]
    calls = []

    def flush():
        calls.append(target[0])
        flushed[0] = target[0]
        return flushed[0]

    target = [0]
    svc = GroupCommitService(flush, lambda: flushed[0])
    svc.start()
    try:
        assert svc.wait_durable(0, 0.0) is None      # nothing to wait for
        target[0] = 100
        assert svc.wait_durable(100, PATIENCE_S) is None
        assert svc.flushed >= 100
        assert svc.fsyncs >= 1
        n = svc.fsyncs
        assert svc.wait_durable(50, 0.0) is None     # covered already: no new fsync
        assert svc.fsyncs == n
    finally:
        svc.stop()
    # stopped: a wait that cannot be satisfied answers FLUSH_TIMEOUT instead of hanging
    target[0] = 200
    assert svc.wait_durable(200, 0.2) is PutReason.FLUSH_TIMEOUT


def test_a_stepped_group_commit_runs_only_when_its_owner_steps_it():
    """``stepped`` (a simulation on one thread, tests/sim): no thread; a request is said to
    ``on_request`` and waits for ``step()``; a waiting put runs one itself; an fsync error leaves
    the request pending for the next step; ``stop()`` flushes what was asked and answers the rest."""
    target, fail = [0], [False]

    def flush():
        if fail[0]:
            fail[0] = False
            raise OSError(5, "EIO")
        return target[0]

    svc = GroupCommitService(flush, lambda: 0, stepped=True)
    svc.start()
    assert svc._thread is None
    asked, released = [], []
    svc.on_request = lambda: asked.append(True)        # under its lock: only hand over
    target[0] = 100
    entry = svc.when_durable(100, lambda: released.append(100))
    assert entry is not None and asked == [True] and svc.pending() and released == []
    fail[0] = True
    assert svc.step() and svc.pending() and released == [], "an fsync error: asked for still"
    assert svc.step() and not svc.pending() and released == [100] and svc.flushed == 100
    assert not svc.step(), "nothing asked for"
    target[0] = 200
    assert svc.wait_durable(200, 0.0) is None and svc.flushed == 200      # a waiting put's own step
    target[0] = 300
    assert svc.when_durable(300, lambda: released.append(300)) is not None
    svc.stop()
    assert released == [100, 300] and svc.flushed == 300
    assert svc.when_durable(400, lambda: released.append(400)) is None     # ended: known at once


class SteppedFlush:
    """A flush function that makes durable, at each call, the next offset a test hands it, and
    says when it was called (the test decides what each fsync covers)."""

    def __init__(self) -> None:
        self.flushed = 0
        self.allow = threading.Semaphore(0)
        self.next: list[int] = []
        self.calls = threading.Semaphore(0)

    def __call__(self) -> int:
        self.calls.release()
        assert self.allow.acquire(timeout=patience()), "the test did not let the fsync end"
        self.flushed = self.next.pop(0)
        return self.flushed

    def step(self, to: int) -> None:
        self.next.append(to)
        self.allow.release()


def _waiter(svc: GroupCommitService, offset: int, out: dict) -> threading.Thread:
    t = threading.Thread(target=lambda: out.__setitem__(offset, svc.wait_durable(offset, PATIENCE_S)), daemon=True)
    t.start()
    return t


def test_group_commit_releases_only_the_writers_an_fsync_made_durable():
    """An fsync releases the waits it covered and no other (each waits on a lock of its own);
    a wait beyond it stays parked, untouched, until the fsync that covers it."""
    flush = SteppedFlush()
    svc = GroupCommitService(flush, lambda: flush.flushed)
    svc.start()
    out: dict[int, object] = {}
    try:
        first = _waiter(svc, 10, out)
        assert flush.calls.acquire(timeout=patience())          # the fsync for 10 is under way
        second = _waiter(svc, 20, out)
        wait_until(lambda: len(svc._waiters) == 2, "both writers to wait")
        flush.step(10)                                           # this fsync covers 10 only
        first.join(patience())
        assert out == {10: None}
        assert svc.flushed == 10
        assert [e[0] for e in svc._waiters] == [20] and svc._waiters[0][1].__self__.locked()   # not woken (its release: its lock's)
        assert flush.calls.acquire(timeout=patience())          # the next fsync, for 20
        flush.step(20)
        second.join(patience())
        assert out == {10: None, 20: None} and svc._waiters == []
    finally:
        flush.step(10 ** 9)
        svc.stop()


def test_group_commit_a_wait_that_times_out_leaves_nothing_behind():
    """The short-timeout path: FLUSH_TIMEOUT, and its entry gone (no release for a writer long gone);
    the fsync it asked for still happens."""
    flush = SteppedFlush()
    svc = GroupCommitService(flush, lambda: flush.flushed)
    svc.start()
    try:
        assert svc.wait_durable(10, 0.01) is PutReason.FLUSH_TIMEOUT
        assert svc._waiters == []
        assert flush.calls.acquire(timeout=patience())
        flush.step(10)
        assert svc.wait_durable(10, PATIENCE_S) is None
    finally:
        flush.step(10 ** 9)
        svc.stop()


def test_group_commit_stop_releases_the_waits_it_flushed_and_refuses_later_ones():
    """stop() flushes what was requested, releases its waits as durable; a wait after the end
    answers FLUSH_TIMEOUT at once instead of sleeping out its timeout."""
    flush = SteppedFlush()
    svc = GroupCommitService(flush, lambda: flush.flushed)
    svc.start()
    out: dict[int, object] = {}
    w = _waiter(svc, 10, out)
    assert flush.calls.acquire(timeout=patience())
    stopper = threading.Thread(target=svc.stop, daemon=True)
    stopper.start()
    flush.step(10)
    w.join(patience())
    stopper.join(patience())
    assert out == {10: None} and not stopper.is_alive()
    assert svc.wait_durable(20, PATIENCE_S) is PutReason.FLUSH_TIMEOUT      # nobody flushes any more: no wait


def test_group_commit_wait_times_out_when_flush_fails(caplog):
    caplog.set_level(logging.CRITICAL, logger="tidemq.store")     # one error line per retry
    failing = [True]

    def flush():
        if failing[0]:
            raise OSError(5, "EIO")
        return 10

    svc = GroupCommitService(flush, lambda: 0)
    svc.start()
    try:
        assert svc.wait_durable(10, 0.2) is PutReason.FLUSH_TIMEOUT
        wait_until(lambda: svc.last_error is not None, "the flush error to be recorded")
        assert "fsync failed" in svc.last_error
    finally:
        failing[0] = False
        svc.stop()


def test_group_commit_stop_returns_while_fsync_keeps_failing(caplog):
    """A disk that fails every fsync must not make stop() (and so store shutdown) hang: the service
    thread ends while the fsyncs still fail."""
    caplog.set_level(logging.CRITICAL, logger="tidemq.store")
    failing = [True]

    def flush():
        if failing[0]:
            raise OSError(5, "EIO")
        return 10

    svc = GroupCommitService(flush, lambda: 0)
    svc.start()
    assert svc.wait_durable(10, 0.1) is PutReason.FLUSH_TIMEOUT      # a request the disk cannot satisfy
    stopper = threading.Thread(target=svc.stop, daemon=True)
    stopper.start()
    stopper.join(patience())
    ended = not stopper.is_alive() and not svc._thread.is_alive()
    failing[0] = False                                  # whatever happened, let the service end now
    stopper.join(patience())
    assert ended, "GroupCommitService.stop() did not end the service while every fsync failed"


# ASYNC_FLUSH ------------------------------------------------------------------------

def test_async_flush_catches_up_by_itself(make_config, open_store):
    s = open_store(make_config(flush_disk_type="ASYNC_FLUSH", flush_interval_ms=20, flush_least_pages=0))
    assert s.async_flush is not None and s.group_commit is None
    rs = s.put_batch([Message("T", b"y" * 500) for _ in range(50)])
    assert all(r.status is PutStatus.PUT_OK for r in rs)
    end = s.commitlog_max_offset
    wait_until(lambda: s.commit_log.flushed_offset >= end, "the async flush to catch up")
    assert s.segments.last.flushed_pos == s.segments.last.wrote_pos


def test_async_put_does_not_wait_for_fsync(make_config, open_store):
    """The flush thread is held inside an fsync; puts go on and return meanwhile."""
    fio = GatedFileIO()
    s = open_store(make_config(flush_disk_type="ASYNC_FLUSH", flush_interval_ms=10, flush_least_pages=0), fio=fio)
    s.put(Message("T", b"first"))                      # creating the topic is durable (topics.json)
    fio.gated = True
    try:
        assert s.put(Message("T", b"dirty")).ok
        assert fio.entered.wait(patience()), "the async flush did not start an fsync"
        results = []
        putter = threading.Thread(target=lambda: results.extend(s.put(Message("T", b"%d" % i)) for i in range(20)))
        putter.start()
        putter.join(patience())
        assert len(results) == 20 and not fio.gate.is_set(), "the puts returned while the fsync is held"
        assert all(r.status is PutStatus.PUT_OK for r in results)
    finally:
        fio.gated = False
        fio.gate.set()


def test_async_flush_least_pages_and_thorough_interval_in_the_store(make_config, open_store):
    clock = ManualClock()
    s = open_store(make_config(flush_disk_type="ASYNC_FLUSH", flush_interval_ms=60_000, flush_least_pages=4,
                               flush_thorough_interval_ms=10_000), clock=clock)
    af = s.async_flush
    base = s.commit_log.flushed_offset
    s.put(Message("T", b"a" * 1000))                    # far less than 4 pages dirty
    assert af.tick() is False
    assert s.commit_log.flushed_offset == base
    s.put_batch([Message("T", b"b" * 1000) for _ in range(20)])   # > 16 KiB dirty
    assert s.commit_log.dirty_bytes() >= 4 * PAGE_SIZE
    assert af.tick() is True
    assert s.commit_log.flushed_offset == s.commitlog_max_offset
    s.put(Message("T", b"c" * 100))
    assert af.tick() is False
    clock.advance(9.9)
    assert af.tick() is False
    clock.advance(0.1)
    assert af.tick() is True                             # thorough: flush whatever is dirty
    assert s.commit_log.flushed_offset == s.commitlog_max_offset
    assert s.get("G", "T", 0, 0).status is GetStatus.FOUND


def test_async_flush_service_tick():
    clock = ManualClock()
    dirty = [0]
    flushes = []

    def flush():
        flushes.append(dirty[0])
        dirty[0] = 0
        return 0

    svc = AsyncFlushService(flush, lambda: dirty[0], clock, interval_ms=500, least_pages=4,
                            thorough_interval_ms=10_000)
    assert svc.least_bytes == 4 * 4096
    assert svc.interval_s == 0.5
    # nothing dirty: nothing to do
    assert svc.tick() is False
    # fewer than 4 pages: waits
    dirty[0] = 4 * 4096 - 1
    assert svc.tick() is False
    assert flushes == []
    # 4 pages: flushes
    dirty[0] = 4 * 4096
    assert svc.tick() is True
    assert flushes == [4 * 4096]
    assert svc.fsyncs == 1
    # a little dirty: waits until the thorough interval has passed
    dirty[0] = 10
    clock.advance(5)
    assert svc.tick() is False
    clock.advance(4.999)
    assert svc.tick() is False
    clock.advance(0.001)
    assert svc.tick() is True
    assert flushes[-1] == 10
    # the thorough clock restarted at that flush
    dirty[0] = 20
    clock.advance(9)
    assert svc.tick() is False
    clock.advance(1)
    assert svc.tick() is True
    assert flushes == [4 * 4096, 10, 20]
    assert svc.fsyncs == 3


def test_async_flush_service_least_pages_zero_flushes_any_dirty_byte():
    clock = ManualClock()
    dirty = [1]
    calls = []
    svc = AsyncFlushService(lambda: calls.append(1) or 0, lambda: dirty[0], clock, interval_ms=10,
                            least_pages=0, thorough_interval_ms=10_000)
    assert svc.tick() is True
    dirty[0] = 0
    assert svc.tick() is False
    assert len(calls) == 1


def test_async_flush_service_runs_on_its_interval():
    dirty = [5]
    flushed = threading.Event()

    def flush():
        dirty[0] = 0
        flushed.set()
        return 0

    svc = AsyncFlushService(flush, lambda: dirty[0], ManualClock(), interval_ms=10, least_pages=0,
                            thorough_interval_ms=10_000)
    svc.start()
    try:
        assert flushed.wait(patience())
    finally:
        svc.stop()
    assert svc.fsyncs == 1


def test_async_flush_service_survives_an_fsync_error(caplog):
    caplog.set_level(logging.CRITICAL, logger="tidemq.store")
    n = [0]

    def flush():
        n[0] += 1
        if n[0] == 1:
            raise OSError(5, "EIO")
        return 0

    dirty = [100]
    svc = AsyncFlushService(flush, lambda: dirty[0], ManualClock(), interval_ms=5, least_pages=0,
                            thorough_interval_ms=10_000)
    svc.start()
    try:
        wait_until(lambda: n[0] >= 2, "a flush after the failed one")
    finally:
        svc.stop()
    assert svc.last_error is None or "fsync failed" in svc.last_error


@pytest.mark.parametrize("mode", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_shutdown_flushes_everything(make_config, open_store, mode):
    cfg = make_config(flush_disk_type=mode, flush_interval_ms=60_000, flush_least_pages=1000,
                      flush_thorough_interval_ms=600_000)
    s = open_store(cfg)
    rs = s.put_batch([Message("T", b"z" * 300) for _ in range(30)])
    end = s.commitlog_max_offset
    s.shutdown()
    assert s.commit_log.flushed_offset == end
    assert not os.path.exists(cfg.abort_path)
    assert rs[-1].ok


class HeldFsync(FaultyFileIO):
    """The commit log's fsync waits at ``gate`` once ``entered`` is armed (in memory)."""
    gate: threading.Event | None = None
    entered: threading.Event | None = None

    def fsync(self, handle):
        if self.gate is not None and "commitlog" in handle.path:
            self.entered.set()
            assert self.gate.wait(2 * PATIENCE_S), "the test never opened the fsync gate"
        return super().fsync(handle)


def test_a_put_made_durable_during_shutdown_is_put_ok(stores):
    """Shutdown stops the group commit while a put waits for its fsync: the waiter is answered when
    that fsync ends (PUT_OK), not at the stop with FLUSH_DISK_TIMEOUT."""
    fio = HeldFsync()
    s = stores(memory_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=600_000), fio)
    fio.entered, fio.gate = threading.Event(), threading.Event()
    res = []
    a = threading.Thread(target=lambda: res.append(s.put(Message("T", b"hello"))))
    a.start()
    assert fio.entered.wait(patience())         # the group commit's fsync is on its way
    b = threading.Thread(target=s.shutdown)
    b.start()
    wait_until(lambda: s.group_commit._stop.is_set(), "shutdown to stop the group commit")
    assert not res, "the put still waits for its fsync"
    fio.gate.set()
    a.join(patience())
    b.join(patience())
    assert not a.is_alive() and not b.is_alive()
    assert not fio.exists(MEMORY_ROOT + "/abort")           # shutdown was clean: the record is durable
    assert res[0].status is PutStatus.PUT_OK, res[0]
