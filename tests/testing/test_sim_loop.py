"""tidemq.testing.sim_loop: asyncio on a ManualClock -- timers fire without real waiting, blocking work
handed to threads runs inline, and a loop that cannot go on (a deadlock) or goes round without its
clock moving (a livelock) says so instead of hanging."""

import asyncio
import threading

import pytest

from tidemq.io import ManualClock
from tidemq.testing.sim_loop import Deadlock, run


def test_time_moves_only_to_the_next_timer_and_threads_run_inline():
    clock = ManualClock()
    seen = []

    async def main():
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.sleep(3600)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), 5)
        seen.append(await asyncio.to_thread(threading.get_ident))
        return loop.time() - t0
    assert run(main, clock) == pytest.approx(3605)
    assert seen == [threading.get_ident()], "the 'thread' is the loop's own"


def test_a_deadlock_is_raised_not_waited_for():
    async def main():
        await asyncio.Event().wait()
    with pytest.raises(Deadlock):
        run(main, ManualClock())


def test_a_livelock_is_raised():
    async def main():
        while True:
            await asyncio.sleep(0)
    with pytest.raises(Deadlock):
        run(main, ManualClock())
