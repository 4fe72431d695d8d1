"""Where the broker's puts run: on the event loop, every one; a put whose acknowledgement waits
(MessageStore.puts_may_wait) is appended there and awaits what it waits for on the loop, holding no
thread: SYNC_FLUSH's fsync (``put_*(..., wait=False)``, ``when_durable`` releasing a future,
``settle_put``), so one fsync covers every send appended while the last one ran, not only as many
as a pool has threads (issue 32: with a thread per send, 8 threads, the official client's send_async
under SYNC_FLUSH ran at 0.36-0.40 x ASYNC_FLUSH); and SYNC replication's confirmations
(replication/acks.py ``when_confirmed``: the confirmation the leader's stream reads on this same
loop releases every put it covers, no thread woken, none waking the loop back -- issue 32.3: a SYNC
put on a pool thread crossed four thread hand-offs more per round trip). Any other put runs inline
(microseconds: a thread hop would cost more than the put).
Every put of the broker goes through here: sends (produce/send_path.py), transaction commits
(deferred/transactions.py), delayed messages coming due (deferred/timer.py), dead letters
(consume/receive.py). The rule is asked at each put, so a change of role (a leader's SYNC
followers come and go with it) takes effect at the next one; a put keeps the followers it was
appended under until it is settled.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, TypeVar

from ..store import MessageStore

T = TypeVar("T")
_TIMED_OUT = object()


def _done(fut: asyncio.Future, value=None) -> None:
    if not fut.done():
        fut.set_result(value)


def _hand_over(loop: asyncio.AbstractEventLoop, fut: asyncio.Future) -> None:
    """From another thread: ``fut`` done on its loop (nothing if the loop is closed: nobody waits)."""
    try:
        loop.call_soon_threadsafe(_done, fut)
    except RuntimeError:
        pass


class PutsClosed(Exception):
    """The puts are closed: their service is going (a change of role, a stop) and the put was not
    made. A send answers it with a typed status (send_path.py: INTERNAL_SERVER_ERROR, which clients
    send again, to the leader of the moment), never a traceback."""


class StorePuts:
    def __init__(self, store: MessageStore, dispatch_delay_ms: int = 0, leading: bool = True) -> None:
        """``dispatch_delay_ms``: BrokerConfig.dispatch_delay_ms (``dispatch_later``); ``leading``: False
        for a follower's service, which never puts: while its store follows, the store refuses the put
        (NOT_LEADER, naming the leader); once its store takes puts -- a promotion under way
        (replication/node.lead makes the store a leader's, then the host replaces this service by the
        leader's) -- the put raises PutsClosed (``_not_ours``): a message put there would be stored
        past the leader's dedup window (produce/resends.py), which finds the records this member
        copied as a follower; a resend of one of them would be stored twice."""
        self.store = store
        self.leading = leading
        self.closed = False
        self.latency = None          # observe/latency.LatencyBuckets of the sends' puts, once the broker observes
        self.dispatch_delay_s = dispatch_delay_ms / 1000
        self._drain_due = False      # a drain_dispatch is scheduled (dispatch_later)
        self._gone: set[asyncio.Task] = set()     # settling puts whose callers went (_settle_gone)

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
        """Whether the appends run on the loop (a dispatch may then be left for after the answer):
        always, now (kept for the callers that ask)."""
        return True

    async def run(self, put: Callable[..., T], *args, on_appended: Callable[[T], None] | None = None,
                  on_gone: Callable[[T], None] | None = None) -> T:
        """``put(*args)`` (one of the store's put, put_batch, put_encoded, put_slices) on the loop;
        one that may wait: appended with ``wait=False``, then its fsync (SYNC_FLUSH) and its
        followers (SYNC replication) awaited, then settled. A put that may wait after ``close()``:
        PutsClosed. ``on_appended(result)``: called once the records are in the log, before the wait
        (the send path remembers them there for a resend that comes while it waits, or after its
        caller went -- a client's deadline, a forwarding member giving up, which cancel the wait
        here and leave the records in the log: produce/resends.py). ``on_gone(result)``: where the
        caller went (cancelled while it waited), the put is still settled when what it waited for
        comes (``_settle_gone``: its own task) and handed to ``on_gone`` (the send path moves what
        the store confirmed to its dedup window, forgets what it refused for good)."""
        store = self.store
        if not self.leading:
            self._not_ours()
        if store.puts_may_wait:
            if self.closed:
                raise PutsClosed("the broker's role is changing: send again")
            if put == store.put:
                return (await self.run(store.put_batch, list(args)))[0]
            w = store.writer
            rep = w.replicas if w is not None else None       # the followers it is appended under
            r = put(*args, wait=False)
            if r.pending_end >= 0:
                if on_appended is not None:
                    on_appended(r)
                try:                      # (_settle's steps inline: no coroutine more per put)
                    end = r.pending_end
                    await self._durable(end)
                    gc = store.group_commit
                    if rep is not None and rep.sync and (gc is None or gc.outcome(end) is None):
                        await self._confirmed(rep, end)      # on disk here: the followers now
                    store.settle_put(r, rep)
                except asyncio.CancelledError:
                    if on_gone is not None:
                        self._settle_gone(r, rep, on_gone)
                    raise
            return r
        return put(*args)

    async def _settle(self, r, rep) -> None:
        """An appended put's wait (its fsync, then its followers), then settled (settle_put): ``run``'s
        steps, for ``_settle_gone``."""
        store = self.store
        await self._durable(r.pending_end)
        gc = store.group_commit
        if rep is not None and rep.sync and (gc is None or gc.outcome(r.pending_end) is None):
            await self._confirmed(rep, r.pending_end)      # on disk here: the followers now
        store.settle_put(r, rep)

    def _settle_gone(self, r, rep, on_gone: Callable) -> None:
        """A put whose caller went while it waited: waited for again (each wait bounded by its
        timeout) and settled in a task of its own, then ``on_gone(r)``; nothing if the store or the
        loop stops first (its entries stay until a resend asks the store: produce/resends.py)."""
        async def settle() -> None:
            try:
                await self._settle(r, rep)
                on_gone(r)
            except Exception:  # noqa: BLE001 - the store stopping: its resend asks the store itself
                pass
            finally:
                self._gone.discard(task)
        task = asyncio.get_running_loop().create_task(settle())
        self._gone.add(task)                      # (a reference: the loop keeps only a weak one)

    async def _confirmed(self, rep, end: int) -> None:
        """Until every follower of the in-sync set confirmed ``end`` (or the set shrank below the
        minimum, or replication_timeout_ms passed by the store's Clock): settle_put says which. One
        confirmation (on this loop: the leader's stream) releases every put it covers."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        loop_thread = threading.get_ident()

        def release() -> None:                    # under the acks' lock, on any thread: hand over only
            if threading.get_ident() == loop_thread:
                _done(fut)                        # a confirmation read on this loop: no wake-up
            else:
                _hand_over(loop, fut)

        handle = rep.when_confirmed(end, release)
        if handle is None:
            return
        timer = None

        def check() -> None:                      # its time by the Clock (a test's may stand still)
            nonlocal timer
            left = rep.expire(handle)
            if left > 0 and not fut.done():
                timer = loop.call_later(max(left, 0.01), check)
        timer = loop.call_later(rep.timeout_s, check)
        try:
            await fut
        finally:
            timer.cancel()
            rep.forget_wait(handle)

    async def _durable(self, end: int) -> None:
        """Until the commit log is durable up to ``end`` (or an fsync covering it failed, or the group
        commit ended), at most sync_flush_timeout_ms: settle_put says which."""
        store = self.store
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.dispatch_later()                     # its dispatch need not wait for the fsync

        handle = store.when_durable(end, lambda: _hand_over(loop, fut))   # the flush thread, under its lock
        if handle is None:
            return
        timer = loop.call_later(store.config.sync_flush_timeout_ms / 1000, _done, fut, _TIMED_OUT)
        try:
            await fut
        finally:
            timer.cancel()
            if not fut.done() or fut.cancelled() or fut.result() is _TIMED_OUT:     # (cancelled: result() raises)
                store.forget_durable(handle)

    def now(self, put: Callable[..., T], *args) -> T:
        """``put(*args)`` inline, for a put that waits for nothing (not ``may_wait``: ``run`` would
        run it inline too), its time observed in ``latency``; no coroutine in between."""
        if not self.leading:
            self._not_ours()
        latency = self.latency
        if latency is None:
            return put(*args)
        began = time.perf_counter()
        out = put(*args)
        latency.observe(time.perf_counter() - began)
        return out

    def one(self, topic: str, entry: tuple, born_ms, born_host, sys_flag: int):
        """The one-message put that waits for nothing (``now``'s case): (queue offset, physical offset)
        where the store's compiled put took it (MessageStore.put_one), else put_encoded's PutResults
        (``defer_dispatch``); its time observed in ``latency`` once either way."""
        if not self.leading:
            self._not_ours()
        store = self.store
        latency = self.latency
        began = time.perf_counter() if latency is not None else 0.0
        w = store.writer               # (MessageStore.put_one without its hop)
        out = w.put_one(topic, entry, born_ms, born_host, sys_flag) if w is not None else None
        if out is None:
            out = store.put_encoded(topic, (entry,), born_ms, born_host, sys_flag, True)
        if latency is not None:
            latency.observe(time.perf_counter() - began)
        return out

    async def timed(self, put: Callable[..., T], *args, on_appended: Callable[[T], None] | None = None,
                    on_gone: Callable[[T], None] | None = None) -> T:
        """``run``, its time observed in ``latency`` (the sends' put latency histogram)."""
        began = time.perf_counter()
        out = await self.run(put, *args, on_appended=on_appended, on_gone=on_gone)
        if self.latency is not None:
            self.latency.observe(time.perf_counter() - began)
        return out

    def _not_ours(self) -> None:
        """A follower's service: PutsClosed once its store takes puts (see __init__)."""
        if not self.store.following:
            raise PutsClosed("this member is taking the lead: send again")

    def close(self) -> None:
        """No more puts that may wait (the service is going): they raise PutsClosed. Those awaiting
        already are settled against what they were appended under (never OK without it)."""
        self.closed = True
