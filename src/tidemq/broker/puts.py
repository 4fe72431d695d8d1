"""Where the broker's puts run: inline on the event loop, or on a thread of the put pool.

One rule, the store's (MessageStore.puts_may_wait): a put that may wait on the disk (SYNC_FLUSH's
group commit) or on other members (SYNC replication) runs on a thread, so the loop goes on serving
while it waits; any other put runs inline (microseconds: a thread hop would cost more than the put).
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


class PutsClosed(Exception):
    """The put pool is closed: its service is going (a change of role, a stop) and the put was not
    made. A send answers it with a typed status (send_path.py: INTERNAL_SERVER_ERROR, which clients
    send again, to the leader of the moment), never a traceback."""


class StorePuts:
    def __init__(self, store: MessageStore, threads: int) -> None:
        self.store = store
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="tidemq-put")
        self.latency = None          # observe/latency.LatencyBuckets of the sends' puts, once the broker observes

    @property
    def may_wait(self) -> bool:
        return self.store.puts_may_wait

    async def run(self, put: Callable[..., T], *args) -> T:
        """``put(*args)`` where the rule says: on a thread when it may wait, else inline."""
        if self.store.puts_may_wait:
            try:
                fut = asyncio.get_running_loop().run_in_executor(self.pool, put, *args)
            except RuntimeError:        # "cannot schedule new futures after shutdown": close() ran
                raise PutsClosed("the broker's role is changing: send again") from None
            return await fut
        return put(*args)

    async def timed(self, put: Callable[..., T], *args) -> T:
        """``run``, its time observed in ``latency`` (the sends' put latency histogram)."""
        began = time.perf_counter()
        out = await self.run(put, *args)
        if self.latency is not None:
            self.latency.observe(time.perf_counter() - began)
        return out

    def close(self) -> None:
        self.pool.shutdown(wait=True)
