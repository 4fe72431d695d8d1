"""An asyncio event loop on a ManualClock, for simulations that run many processes' coroutines in
one thread, deterministically.

``run(main, clock)`` runs the coroutine ``main()`` on a ``SimLoop``: ``loop.time()`` is the clock's
monotonic time, and when nothing is ready to run the loop does not sleep: it moves the clock to
the next timer (``asyncio.sleep``, ``wait_for`` timeouts) and runs it. Blocking work handed to
threads (``asyncio.to_thread``, ``run_in_executor(None, ...)``) runs inline, at once, on the loop's
thread (``InlineExecutor``): no real thread races the simulation. Given the same seed, a run is
the same run.

Only what asyncio does on its own is simulated; real sockets would still wait in real time (a
simulation uses in-memory transports: tidemq.testing.memory_transport). A loop with nothing
ready and no timer left is a deadlock, and one that turns ``SPINS_MAX`` times without its clock
moving a livelock: ``Deadlock`` is raised for both.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import selectors

from ..io import ManualClock


SPINS_MAX = 200_000


class Deadlock(RuntimeError):
    """Nothing can run any more, and no timer would wake anything."""


class InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs what it is given at once, in the caller's thread (a ThreadPoolExecutor only in name:
    asyncio takes no other kind as the default; it never starts a thread)."""

    def submit(self, fn, /, *args, **kwargs):
        fut: concurrent.futures.Future = concurrent.futures.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to whoever awaits it
            fut.set_exception(e)
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


class _VirtualSelector(selectors.BaseSelector):
    """A real selector (for the loop's own wake-up pipe) that never waits: the clock moves instead."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._real = selectors.DefaultSelector()
        self.spins = 0                  # turns of the loop since the clock last moved

    def register(self, fileobj, events, data=None):
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj):
        return self._real.unregister(fileobj)

    def modify(self, fileobj, events, data=None):
        return self._real.modify(fileobj, events, data)

    def get_key(self, fileobj):
        return self._real.get_key(fileobj)

    def get_map(self):
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout=None):
        ready = self._real.select(0)
        if ready or timeout == 0:
            self.spins += 1
            if self.spins > SPINS_MAX:
                raise Deadlock(f"{SPINS_MAX} turns of the loop without the clock moving: something runs in "
                               f"circles (a livelock)")
            return ready
        if timeout is None:
            raise Deadlock("nothing is ready and no timer is due: the simulation cannot go on")
        self.spins = 0
        self.clock.advance(timeout)
        return []


class SimLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: ManualClock) -> None:
        self.virtual = _VirtualSelector(clock)
        super().__init__(self.virtual)
        self.clock = clock
        self.set_default_executor(InlineExecutor())
        self._made = itertools.count()
        self.set_task_factory(self._task)

    def time(self) -> float:
        return self.clock.monotonic_s()

    def _task(self, loop, coro, **kwargs) -> asyncio.Task:
        """A task that knows when it was made (``sim_made``): asyncio.all_tasks is a set, which
        iterates in the order of the tasks' addresses, and those differ from run to run."""
        task = asyncio.Task(coro, loop=loop, **kwargs)
        task.sim_made = next(self._made)
        return task

    def pending_tasks(self) -> list[asyncio.Task]:
        """The tasks not done yet, in the order they were made."""
        return sorted((t for t in asyncio.all_tasks(self) if not t.done()), key=lambda t: getattr(t, "sim_made", -1))


def run(main, clock: ManualClock):
    """Run the coroutine function ``main`` to its end on a SimLoop over ``clock``; its result."""
    loop = SimLoop(clock)
    try:
        return loop.run_until_complete(main())
    finally:
        try:
            for _ in range(10):         # a task may swallow a cancellation (wait_for, Python 3.11): again
                pending = loop.pending_tasks()          # cancelled in the order they were made
                if not pending:
                    break
                for t in pending:
                    t.cancel()
                loop.virtual.spins = 0
                try:
                    loop.run_until_complete(asyncio.wait(pending, timeout=60.0))
                except Deadlock:
                    break
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
