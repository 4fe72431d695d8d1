"""Broker start-up: a long store start is said while it runs (what it does, how far)."""

import asyncio
import threading

from tidemq.broker import server
from tidemq.config import BrokerConfig, StoreConfig


class SlowStart:
    """A store whose start waits until the broker has said something about it."""

    def __init__(self) -> None:
        self.said = threading.Event()

    def start(self):
        assert self.said.wait(120), "the broker said nothing while the store started"
        return self

    def start_progress(self) -> str:
        return "recovering: checking the end of the log, 1.0 MiB of 4.0 MiB of log walked (25 %)"


def test_a_long_store_start_is_said_until_it_is_done(monkeypatch):
    monkeypatch.setattr(server, "START_PROGRESS_S", 0.01)
    lines: list[str] = []
    store = SlowStart()

    def progress(line: str) -> None:
        lines.append(line)
        store.said.set()

    b = server.Broker(StoreConfig(), BrokerConfig(), progress)
    assert asyncio.run(b._start_store(store)) is store
    assert lines and lines[0] == "tidemq: starting: " + store.start_progress()
