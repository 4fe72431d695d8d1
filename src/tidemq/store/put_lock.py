"""The store's put lock, which also carries the dispatches puts left for after their answer.

A put appends its records to the commit log and then dispatches them: the consume-queue units
and the index entries (dispatch.Dispatcher). RocketMQ answers a send once the commit log has
the record and dispatches afterwards (ReputMessageService). A put here may do the same
(``defer_dispatch=True`` of put_batch / put_encoded: the broker's SendMessage, whose one message per
request finds every cache cold, bench/README.md): its dispatch is queued in ``pending``, in
log order, and the dispatches waiting there run together, as one (Dispatcher.dispatch_many: one
write per consume queue, one index run), in log order:

* when anybody next takes this lock (``with put_lock``): topic creation and deletion, a follower's
  truncation, the checkpoint, shutdown: each sees the consume queues complete. A put takes it as
  ``put_lock.appending``, which leaves them waiting (the next puts' dispatches join them), unless
  the put dispatches at once (``run``: what waits first);
* before any read of the store (``MessageStore._reading``, get, get_raw): a consumer never
  misses a message whose send was answered;
* at the queue flush's next round (``flush_queues``), and when the caller that deferred it calls
  ``MessageStore.drain_dispatch`` (the broker: once per ``dispatch_delay_ms`` after a send's answer,
  for every send answered meanwhile: broker/puts.py).

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
    """A non-reentrant lock (``with``) that runs ``dispatch(entries)`` for what is pending (the
    entries, oldest first) each time it is taken, except as ``appending``. ``dispatch`` never
    raises (Dispatcher.dispatch_many records its failures)."""

    __slots__ = ("_lock", "pending", "dispatch", "deferred_max", "appending")

    def __init__(self, dispatch: Callable[[list], None] | None = None, deferred_max: int = 1024) -> None:
        self._lock = threading.Lock()
        self.pending: list[tuple] = []
        self.dispatch = dispatch
        self.deferred_max = deferred_max
        # ``with put_lock.appending``: the lock taken by a put, what waits left waiting (the lock itself:
        # no Python frame per put)
        self.appending = self._lock

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
        self.dispatch(pending)

    def defer(self, entry: tuple) -> None:
        """Under the lock: ``entry`` (dispatch_batch's arguments) waits with those before it, or runs
        now, with every entry before it, when ``deferred_max`` entries wait already."""
        pending = self.pending
        pending.append(entry)
        if len(pending) > self.deferred_max:
            self._run_pending()

    def run(self, entry: tuple) -> None:
        """Under the lock: ``entry`` dispatched now, after (with) what waits."""
        if self.pending:
            self.pending.append(entry)
            self._run_pending()
        else:
            self.dispatch([entry])

    def drain(self) -> None:
        """Run what is pending now (taking the lock), if anything is."""
        if self.pending:
            with self:
                pass

    def locked(self) -> bool:
        return self._lock.locked()
