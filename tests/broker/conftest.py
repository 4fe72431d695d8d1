"""Broker tests: brokers in subprocesses (the broker_factory fixture, tests/conftest.py), the
official client here (clients), and the in-process worlds: a store on a ManualClock for the
timer and transactions (stores), pop consumption over a real store (world)."""

import pytest

from tidemq.broker.consume.receive import Consumption
from tidemq.broker.consume.pop_state import PopState
from tidemq.config import KIB, BrokerConfig
from tidemq.io import ManualClock
from tidemq.store import MessageStore, StoreConfig

from ..support.official import clients  # noqa: F401  (fixture)
from ..support.pop import ORDERED


@pytest.fixture
def stores(tmp_path):
    """stores(clock) -> a started store under tmp_path/store; every one still running is shut down after."""
    made = []

    def start(clock):
        cfg = StoreConfig(root_dir=str(tmp_path / "store"), auto_create_topics=True, segment_size_bytes=256 << 10, index_slots=1000,
                          index_entries=4000, consume_queue_units_per_segment=64, preallocate_next_segment=False)
        s = MessageStore(cfg, clock=clock).start()
        made.append(s)
        return s

    yield start
    for s in made:
        if s._state == "running":
            s.shutdown()


@pytest.fixture
def world(tmp_path):
    """(store with topic T of 2 queues, ManualClock, consumption(delivery_attempts_max=16, **settings)
    -> a Consumption over a fresh PopState of the store: a new one reads back what the last journaled)."""
    root = str(tmp_path / "store")
    store = MessageStore(StoreConfig(root_dir=root, segment_size_bytes=256 * KIB, index_slots=1000,
                                     index_entries=4000, preallocate_next_segment=False)).start()
    store.create_topic("T", 2)
    clock = ManualClock()
    made = []

    def consumption(delivery_attempts_max=16, **settings):
        pop = PopState(store.fio, root)
        pop.open()
        made.append(pop)
        cfg = BrokerConfig(fifo_consumer_groups=(ORDERED,), delivery_attempts_max=delivery_attempts_max, **settings)
        return Consumption(store, cfg, pop, clock=clock)

    yield store, clock, consumption
    for p in made:
        p.close()
    store.shutdown()
