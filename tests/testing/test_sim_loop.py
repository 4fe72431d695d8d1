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


def test_tasks_left_at_the_end_are_cancelled_in_the_order_they_were_made():
    """What the tasks still running when ``main`` returns do as they are cancelled (a stream's "follower
    disconnected", a member's last words) happens in the order the tasks were made, not in the order
    of their addresses (asyncio.all_tasks is a set: a seed's log differed from run to run)."""
    stopped = []

    async def forever(i):
        try:
            await asyncio.Event().wait()
        finally:
            stopped.append(i)

    async def quick():
        pass

    async def main():
        loop = asyncio.get_running_loop()
        done = [loop.create_task(quick()) for _ in range(200)]
        await asyncio.wait(done)
        del done[:]                                     # freed: their memory goes to the next tasks, last first
        made = list(range(60))
        for i in made:
            loop.create_task(forever(i))
        await asyncio.sleep(0)
        return made

    made = run(main, ManualClock())
    assert stopped == made
