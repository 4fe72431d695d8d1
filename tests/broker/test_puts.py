"""broker/puts.py: every broker put runs where the store's one rule says (MessageStore.puts_may_wait):
on a put thread when it may wait on the disk or followers, inline on the event loop otherwise."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tidemq.broker.puts import StorePuts
from tidemq.store import Message, MessageStore
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import memory_config


@pytest.mark.parametrize("flush, on_a_thread", [("SYNC_FLUSH", True), ("ASYNC_FLUSH", False)])
def test_a_put_runs_on_a_thread_exactly_when_it_may_wait(flush, on_a_thread):
    s = MessageStore(memory_config(flush_disk_type=flush, sync_flush_timeout_ms=60_000), FaultyFileIO()).start()
    puts = StorePuts(s, 2)
    where = []

    def put(m):
        where.append(threading.current_thread())
        return s.put(m)

    async def main():
        return await puts.run(put, Message("T", b"x")), threading.current_thread()

    try:
        r, loop_thread = asyncio.run(main())
    finally:
        puts.close()
        s.shutdown()
    assert r.ok
    assert (where[0] is not loop_thread) is on_a_thread


def test_a_put_after_close_raises_puts_closed_not_a_runtime_error():
    from tidemq.broker.puts import PutsClosed
    s = MessageStore(memory_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=60_000), FaultyFileIO()).start()
    puts = StorePuts(s, 1)
    puts.close()
    try:
        with pytest.raises(PutsClosed):
            asyncio.run(puts.run(s.put, Message("T", b"x")))
    finally:
        s.shutdown()
