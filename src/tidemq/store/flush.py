"""Flush services: making appended bytes durable.

* SYNC_FLUSH (``GroupCommitService``): a put appends, leaves the put lock, and
  waits until an fsync that started after its append has finished. One thread
  runs the fsyncs back to back; every writer that appended while one fsync ran
  is covered by the next: many writers share one fsync (group commit). A wait
  longer than ``sync_flush_timeout_ms`` answers FLUSH_DISK_TIMEOUT (the record
  stays in the log and becomes durable later). An fsync that fails is never
  retried over what it covered (log_failure.py): the commit log is cut back to
  its durable end and every wait it covered answers FLUSH_FAILED, final.
* ASYNC_FLUSH (``AsyncFlushService``): every ``flush_interval_ms`` flush when at
  least ``flush_least_pages`` pages are dirty, and everything at least every
  ``flush_thorough_interval_ms``.
* ``PeriodicService("queue-flush")``: every ``flush_consume_queue_interval_ms`` fsync the
  consume queues and index, then write the checkpoint (at least every
  ``checkpoint_interval_ms``), and let a failed dispatch heal.

fsync runs without the GIL (os.fdatasync) and without the put lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Callable

from ..io import Clock
from .log_failure import LogFailed, LogFailure
from .types import PutReason

log = logging.getLogger("tidemq.store")

PAGE_SIZE = 4096
GATHER_ROUNDS = 8        # group commit: gathering waits for as many writers as the most of this many fsyncs


class Service:
    """A background thread of the store: ``start()`` runs ``run()`` in a daemon thread until
    ``stop()``; an error that ends it is logged and kept (``dead``, ``last_error``).
    Subclasses implement ``run()`` (looping until ``self._stop`` is set) and ``wake()``."""

    name = "service"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run_safely, name=f"tidemq-{self.name}", daemon=True)
        self._thread.start()

    def _run_safely(self) -> None:
        try:
            self.run()
        except BaseException as e:  # noqa: BLE001 - a dying service must say so
            log.error("%s stopped by an error: %r", self.name, e)
            self.last_error = repr(e)
            self.dead = True
        finally:
            self.wake()

    dead = False

    def run(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._stop.set()
        self.wake()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def wake(self) -> None:
        pass


class GroupCommitService(Service):
    """SYNC_FLUSH's group commit. Gathering: the writers an fsync released come back with their
    next batch a moment later; an fsync started at the first of them would cover only that one
    and make the others wait a whole fsync more. So before an fsync the thread waits until as
    many writers arrived since the last fsync began as the most any of the last GATHER_ROUNDS
    fsyncs covered (the writers there are), for at most
    ``gather_s_max`` and half the last fsync's duration (a lone writer, or writers that stopped,
    cost at most that).

    Wake-ups are targeted: a writer's arrival wakes the flush thread only (``_work``), and an
    fsync releases only the writers it made durable, each through its own ``release`` (``_waiters``):
    a thread's lock (``wait_durable``), or an event loop's future (``when_durable``: the broker's
    sends append on the loop and await the fsync there, no thread each, broker/puts.py).
    One condition shared by both sides woke every waiting writer at every arrival and every
    fsync, to find its offset not yet on disk and sleep again: with 8 writers, tens of futex
    wake-ups and GIL hand-offs per fsync (8 x put_batch(16): 83k msgs/s then, 118k now;
    bench/README.md)."""

    name = "group-commit"

    def __init__(self, flush: Callable[[], int], durable_offset: Callable[[], int], gather_s_max: float = 0.0,
                 failed_for: Callable[[int], object] = lambda end: None, stepped: bool = False) -> None:
        """``failed_for(end)``: the log failure (log_failure.py) that took a record ending at ``end``,
        or None; ``log_failed`` is to be called after each failure's cut. ``stepped``: no thread; each
        group commit runs when the owner calls ``step()`` (a simulation, all on one thread, decides
        when the fsync ends: tests/sim), and a waiting put (``wait_durable``) runs one itself."""
        super().__init__()
        self.stepped = stepped
        self.on_request = None        # stepped: called (under this service's lock) when a flush is asked for
        self._flush = flush
        self._failed_for = failed_for
        self._durable = durable_offset
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)     # the flush thread waits here for requests
        self._waiters: list[list] = []      # [offset, release()]: writers waiting, released when durable
        self._ended = False                 # run() returned or failed: nobody flushes any more
        self._requested = 0
        self.flushed = durable_offset()
        self.fsyncs = 0
        self.fsync_seconds = 0.0      # time spent in the flushes (metrics: mean flush latency)
        self.on_flush_s = None        # called with each flush's seconds (the broker's latency histogram)
        self.on_durable = None        # called after each fsync that moved ``flushed`` (readers may read further)
        self.gather_s_max = gather_s_max
        self._arrivals = 0            # waits begun (wait_durable calls that had to wait)
        self._mark = 0                # _arrivals when the last fsync began
        self._covered: deque = deque(maxlen=GATHER_ROUNDS)   # waits each of the last fsyncs covered
        self._last_fsync_s = 0.0

    def wait_durable(self, offset: int, timeout_s: float) -> PutReason | None:
        """Block until everything before ``offset`` is on disk: None, or why not: FLUSH_FAILED (an
        fsync that covered it failed: final), FLUSH_TIMEOUT (not yet, within ``timeout_s``; or the
        service ended)."""
        if self.stepped:
            entry = self.when_durable(offset, lambda: None)
            if entry is not None:
                self.step()
                self.forget(entry)
            return self.outcome(offset)
        gate = threading.Lock()
        gate.acquire()
        entry = self.when_durable(offset, gate.release)
        if entry is not None and not gate.acquire(True, max(timeout_s, 0.0)):
            self.forget(entry)
        return self.outcome(offset)

    def when_durable(self, offset: int, release: Callable[[], None]) -> list | None:
        """Ask for everything before ``offset`` to be made durable without waiting: ``release()`` is
        called (from the flush thread, holding this service's lock: it must only hand over, e.g.
        ``loop.call_soon_threadsafe``) once it is durable, once an fsync that covered it failed, or
        when the service ends; then ``outcome(offset)`` says which. None when that is known already
        (``release`` is not called); else the waiter's entry, for ``forget`` (a wait given up)."""
        with self._lock:
            if self._failed_for(offset) is not None or self.flushed >= offset or self.dead or self._ended:
                return None
            if offset > self._requested:
                self._requested = offset
                self._work.notify()
                if self.on_request is not None:
                    self.on_request()
            # not on stop: run() flushes what was requested before it ends (a put acknowledged
            # during shutdown is durable, not a FLUSH_DISK_TIMEOUT); its end releases every waiter
            self._arrivals += 1
            entry = [offset, release]
            self._waiters.append(entry)
            return entry

    def forget(self, entry: list) -> None:
        """A wait given up (its timeout): ``release`` will not be called for it."""
        with self._lock:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def outcome(self, offset: int) -> PutReason | None:
        """Whether everything before ``offset`` is durable now: None, FLUSH_FAILED (final: an fsync
        that covered it failed, log_failure.py) or FLUSH_TIMEOUT (not yet)."""
        if self._failed_for(offset) is not None:
            return PutReason.FLUSH_FAILED
        return None if self.flushed >= offset else PutReason.FLUSH_TIMEOUT

    def log_failed(self, failure: LogFailure) -> None:
        """After a failure's cut: every waiter answers (the ones it covered FLUSH_FAILED); with the log
        halted, nothing more is to be flushed."""
        with self._lock:
            self.flushed = max(self.flushed, self._durable())
            if failure.resume_offset is None:
                self._requested = self.flushed
            self._release(everyone=True)
            self._work.notify()
        if self.on_durable is not None:
            self.on_durable()

    def _release(self, everyone: bool = False) -> None:
        """Under the lock: release the waiters whose offsets are durable now (``everyone``: all)."""
        flushed, keep = self.flushed, []
        for entry in self._waiters:
            if everyone or entry[0] <= flushed:
                entry[1]()
            else:
                keep.append(entry)
        self._waiters = keep

    def _gather(self) -> None:
        """Under the lock, a request pending: wait (bounded) for the writers the last fsync released."""
        want = max(self._covered, default=0)
        if want <= 1 or self.gather_s_max <= 0:
            return
        limit = time.perf_counter() + min(self.gather_s_max, self._last_fsync_s / 2)
        while self._arrivals - self._mark < want and not self._stop.is_set():
            left = limit - time.perf_counter()
            if left <= 0:
                return
            self._work.wait(left)

    def run(self) -> None:
        try:
            self._run()
        finally:
            with self._lock:
                self._ended = True
                self._release(everyone=True)     # they answer from ``flushed``: durable or not

    def _run(self) -> None:
        while True:
            with self._lock:
                self._work.wait_for(lambda: self._requested > self.flushed or self._stop.is_set())
                if self._stop.is_set() and self._requested <= self.flushed:
                    return
                self._gather()
                covered, self._mark = self._arrivals - self._mark, self._arrivals
            if self._commit(covered) is False and self._stop.wait(0.05):
                return          # stopping: run() releases the waiters

    def _commit(self, covered: int) -> bool | None:
        """One fsync and its releases: True (done), None (the log failed: final, its cut answered the
        waiters), False (an fsync error to retry)."""
        try:
            began = time.perf_counter()
            done = self._flush()
            took = self._last_fsync_s = time.perf_counter() - began
            self.fsync_seconds += took
            if self.on_flush_s is not None:
                self.on_flush_s(took)
            self.last_error = None
        except LogFailed as e:    # final: the cut is made, log_failed() answered the waiters
            self.last_error = f"commit log failed: {e.failure.error}"
            return None
        except Exception as e:    # noqa: BLE001 - the flush thread must not die: retry
            if self.last_error is None:
                log.error("commit-log fsync failed: %s (retrying; puts answer FLUSH_DISK_TIMEOUT)", e)
            self.last_error = f"fsync failed: {e}"
            return False
        self.fsyncs += 1
        moved = False
        with self._lock:
            if done > self.flushed:
                self.flushed = done
                moved = True
            elif self._requested > self.flushed and not self.stepped:
                # no progress: a failure's cut is under way in another thread (log_failed() will
                # notify): wait for it rather than spin
                self._work.wait(0.05)
            self._covered.append(covered)
            self._release()
        if moved and self.on_durable is not None:
            self.on_durable()
        return True

    # Stepped (``stepped``): the owner runs each group commit ------------------------------------
    def start(self) -> None:
        if not self.stepped:
            super().start()

    def pending(self) -> bool:
        """Whether a flush is asked for that no group commit has made yet."""
        with self._lock:
            return self._requested > self.flushed and not self._ended

    def step(self) -> bool:
        """Stepped: one group commit now, in the caller's thread, covering everything appended so far
        (no gathering); False when none was asked for. An fsync error leaves it asked for (the next
        step tries again, as the thread does)."""
        with self._lock:
            if self._ended or self._requested <= self.flushed:
                return False
            covered, self._mark = self._arrivals - self._mark, self._arrivals
        self._commit(covered)
        return True

    def stop(self) -> None:
        if not self.stepped:
            super().stop()
            return
        self._stop.set()          # as run() ends: what was asked for is flushed, every waiter answers
        self.step()
        with self._lock:
            self._ended = True
            self._release(everyone=True)

    def wake(self) -> None:
        with self._lock:
            self._work.notify_all()


class AsyncFlushService(Service):
    name = "async-flush"

    def __init__(self, flush: Callable[[], int], dirty_bytes: Callable[[], int], clock: Clock,
                 interval_ms: int, least_pages: int, thorough_interval_ms: int) -> None:
        super().__init__()
        self._flush = flush
        self._dirty = dirty_bytes
        self._clock = clock
        self.interval_s = interval_ms / 1000
        self.least_bytes = least_pages * PAGE_SIZE
        self.thorough_s = thorough_interval_ms / 1000
        self._last_thorough = clock.monotonic_s()
        self.fsyncs = 0
        self.fsync_seconds = 0.0      # time spent in the flushes (metrics: mean flush latency)
        self.on_flush_s = None        # called with each flush's seconds (the broker's latency histogram)

    def tick(self) -> bool:
        """One round (tests call it directly). True when it flushed."""
        now = self._clock.monotonic_s()
        dirty = self._dirty()
        thorough = now - self._last_thorough >= self.thorough_s
        if dirty <= 0 or (dirty < self.least_bytes and not thorough):
            if thorough:
                self._last_thorough = now
            return False
        began = time.perf_counter()
        self._flush()
        took = time.perf_counter() - began
        self.fsync_seconds += took
        self.fsyncs += 1
        if self.on_flush_s is not None:
            self.on_flush_s(took)
        if thorough:
            self._last_thorough = now
        return True

    def run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick()
                self.last_error = None
            except LogFailed as e:    # final: the log was cut back to its durable end (log_failure.py)
                self.last_error = f"commit log failed: {e.failure.error}"
            except Exception as e:    # noqa: BLE001 - the flush thread must not die: next round
                if self.last_error is None:
                    log.error("commit-log fsync failed: %s", e)
                self.last_error = f"fsync failed: {e}"


class PeriodicService(Service):
    """Calls ``tick`` every ``interval_ms`` (queue flush + checkpoint, disk checks, cleanup).
    An OSError is logged once per distinct message and the service keeps running."""

    def __init__(self, name: str, tick: Callable[[], None], interval_ms: int) -> None:
        super().__init__()
        self.name = name
        self._tick = tick
        self.interval_s = interval_ms / 1000

    def run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._tick()
                self.last_error = None
            except Exception as e:    # noqa: BLE001 - a periodic service must not die: next round
                if str(e) != self.last_error:
                    log.error("%s failed: %r", self.name, e)
                self.last_error = str(e)
