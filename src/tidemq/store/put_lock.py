"""The store's put lock, which also carries the dispatches a put left for after its answer.

A put appends its records to the commit log and then dispatches them: the consume-queue units
and the index entries (dispatch.Dispatcher). RocketMQ answers a send once the commit log has
the record and dispatches afterwards (ReputMessageService). A put here may do the same
(``defer_dispatch=True`` of put_batch / put_encoded: the broker's SendMessage, whose one message per
request finds every cache cold, bench/README.md): its dispatch is queued in ``pending``, in
log order, and runs

* when anybody next takes this lock (``with put_lock``): the next put, before its own append;
  topic deletion, a follower's truncation, shutdown: each sees the consume queues complete;
* before any read of the store (``MessageStore._reading``, get, get_raw): a consumer never
  misses a message whose send was answered;
* at the queue flush's next round (``flush_queues``), and at the latest when the caller that
  deferred it calls ``MessageStore.drain_dispatch`` (the broker: right after the answer left,
  ``loop.call_soon``).

At most ``deferred_max`` dispatches wait (StoreConfig.dispatch_deferred_max): the put that would
be one more runs the waiting ones and its own at once, under the lock it holds.

So dispatches run in log order, never concurrently (under this lock), and a dispatch that
fails does what it does inline: the dispatcher records the error, puts are refused until the
queue flush heals it from the log. What the checkpoint records as dispatched
(``Dispatcher.dispatched_offset``) moves only when a dispatch ran: a crash with dispatches
pending recovers them from the log like any other crash.
"""

from __future__ import annotations

import threading
from typing import Callable


class PutLock:
    """A non-reentrant lock (``with``) that runs ``dispatch(*entry)`` for every pending entry,
    oldest first, each time it is taken. ``dispatch`` never raises (Dispatcher.dispatch_batch
    records its failures)."""

    __slots__ = ("_lock", "pending", "dispatch", "deferred_max")

    def __init__(self, dispatch: Callable[..., None] | None = None, deferred_max: int = 1024) -> None:
        self._lock = threading.Lock()
        self.pending: list[tuple] = []
        self.dispatch = dispatch
        self.deferred_max = deferred_max

    def __enter__(self) -> "PutLock":
        self._lock.acquire()
        if self.pending:
            try:
                self._run_pending()
            except BaseException:
                self._lock.release()         # a ``with`` whose __enter__ raised never calls __exit__
                raise
        return self

    def __exit__(self, *exc) -> None:
        self._lock.release()

    def _run_pending(self) -> None:
        pending, self.pending = self.pending, []
        dispatch = self.dispatch
        for entry in pending:
            dispatch(*entry)

    def defer(self, entry: tuple) -> None:
        """Under the lock: ``entry`` (dispatch's arguments) runs when the lock is next taken, or
        now, with every entry before it, when ``deferred_max`` entries wait already."""
        self.pending.append(entry)
        if len(self.pending) > self.deferred_max:
            self._run_pending()

    def drain(self) -> None:
        """Run what is pending now (taking the lock), if anything is."""
        if self.pending:
            with self:
                pass

    def locked(self) -> bool:
        return self._lock.locked()
