"""Where the broker's puts run: inline on the event loop, or on a thread of the put pool.

One rule, the store's (MessageStore.puts_may_wait): a put that may wait on other members (SYNC
replication) runs on a thread, so the loop goes on serving while it waits; a put that waits only
for the disk (SYNC_FLUSH's group commit, ``puts_wait_for_disk_only``) appends inline and awaits its
fsync on the loop (``put_*(..., wait=False)``, ``when_durable`` releasing a future, ``settle_put``):
no thread per waiting send, so one fsync covers every send appended while the last one ran, not
only as many as the pool has threads (issue 32: with a thread per send, 8 threads, the official
client's send_async under SYNC_FLUSH ran at 0.36-0.40 x ASYNC_FLUSH); any other put runs inline
(microseconds: a thread hop would cost more than the put).
Every put of the broker goes through here: sends (produce/send_path.py), transaction commits
(deferred/transactions.py), delayed messages coming due (deferred/timer.py), dead letters
(consume/receive.py). The rule is asked at each put, so a change of role (a leader's SYNC
followers come and go with it) takes effect at the next one.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

from ..store import MessageStore

T = TypeVar("T")
_TIMED_OUT = object()


def _done(fut: asyncio.Future, value=None) -> None:
    if not fut.done():
        fut.set_result(value)


class PutsClosed(Exception):
    """The put pool is closed: its service is going (a change of role, a stop) and the put was not
    made. A send answers it with a typed status (send_path.py: INTERNAL_SERVER_ERROR, which clients
    send again, to the leader of the moment), never a traceback."""


class StorePuts:
    def __init__(self, store: MessageStore, threads: int, dispatch_delay_ms: int = 0) -> None:
        """``dispatch_delay_ms``: BrokerConfig.dispatch_delay_ms (``dispatch_later``)."""
        self.store = store
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="tidemq-put")
        self.closed = False
        self.latency = None          # observe/latency.LatencyBuckets of the sends' puts, once the broker observes
        self.dispatch_delay_s = dispatch_delay_ms / 1000
        self._drain_due = False      # a drain_dispatch is scheduled (dispatch_later)

    def dispatch_later(self) -> None:
        """On the loop, after a put that left its dispatch for after its answer (``defer_dispatch``):
        the store's pending dispatches run ``dispatch_delay_ms`` from the first such put, all of them
        at once (store/put_lock.py: one write per consume queue, one index run, for every send
        answered meanwhile); a read of the store runs them before it reads, whenever it comes."""
        if not self._drain_due:
            self._drain_due = True
            loop = asyncio.get_running_loop()
            if self.dispatch_delay_s > 0:
                loop.call_later(self.dispatch_delay_s, self._drain)
            else:
                loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_due = False
        self.store.drain_dispatch()

    @property
    def may_wait(self) -> bool:
        return self.store.puts_may_wait

    @property
    def inline(self) -> bool:
        """Whether the appends run on the loop (a dispatch may then be left for after the answer)."""
        return not self.store.puts_may_wait or self.store.puts_wait_for_disk_only

    async def run(self, put: Callable[..., T], *args) -> T:
        """``put(*args)`` (one of the store's put, put_batch, put_encoded, put_slices) where the rule
        says: on a thread when it may wait for followers; appended inline, the fsync awaited, when it
        waits for the disk only; else inline. A put that may wait after ``close()``: PutsClosed."""
        store = self.store
        if store.puts_may_wait:
            if self.closed:
                raise PutsClosed("the broker's role is changing: send again")
            if not store.puts_wait_for_disk_only:
                try:
                    fut = asyncio.get_running_loop().run_in_executor(self.pool, put, *args)
                except RuntimeError:        # "cannot schedule new futures after shutdown": close() ran
                    raise PutsClosed("the broker's role is changing: send again") from None
                return await fut
            if put == store.put:
                return (await self.run(store.put_batch, list(args)))[0]
            r = put(*args, wait=False)
            if r.pending_end >= 0:
                await self._durable(r.pending_end)
                store.settle_put(r)
            return r
        return put(*args)

    async def _durable(self, end: int) -> None:
        """Until the commit log is durable up to ``end`` (or an fsync covering it failed, or the group
        commit ended), at most sync_flush_timeout_ms: settle_put says which."""
        store = self.store
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.dispatch_later()                     # its dispatch need not wait for the fsync

        def release() -> None:                    # the flush thread, under its lock: hand over only
            try:
                loop.call_soon_threadsafe(_done, fut)
            except RuntimeError:                  # the loop is closed: nobody waits any more
                pass

        handle = store.when_durable(end, release)
        if handle is None:
            return
        timer = loop.call_later(store.config.sync_flush_timeout_ms / 1000, _done, fut, _TIMED_OUT)
        try:
            await fut
        finally:
            timer.cancel()
            if not fut.done() or fut.result() is _TIMED_OUT:
                store.forget_durable(handle)

    def now(self, put: Callable[..., T], *args) -> T:
        """``put(*args)`` inline, for a put that waits for nothing (not ``may_wait``: ``run`` would
        run it inline too), its time observed in ``latency``; no coroutine in between."""
        latency = self.latency
        if latency is None:
            return put(*args)
        began = time.perf_counter()
        out = put(*args)
        latency.observe(time.perf_counter() - began)
        return out

    async def timed(self, put: Callable[..., T], *args) -> T:
        """``run``, its time observed in ``latency`` (the sends' put latency histogram)."""
        began = time.perf_counter()
        out = await self.run(put, *args)
        if self.latency is not None:
            self.latency.observe(time.perf_counter() - began)
        return out

    def close(self) -> None:
        self.closed = True
        self.pool.shutdown(wait=True)
