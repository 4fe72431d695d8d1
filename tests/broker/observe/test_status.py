"""broker/observe/status.py: the Observer over a real broker started in this process (port 0, no
metrics port) and its store, on a ManualClock: one picture with the uptime, the topics (the
broker's own left out), the totals of what was stored, the verdict and the history's samples."""

import asyncio

from tidemq.broker import server
from tidemq.broker.observe.status import Observer
from tidemq.config import BrokerConfig, StoreConfig
from tidemq.io import ManualClock
from tidemq.store import Message


def observe(tmp_path, check):
    """Start a broker on tmp_path, call check(broker, observer on a ManualClock, clock), stop it."""
    store = StoreConfig(root_dir=str(tmp_path / "store"), segment_size_bytes=1 << 20, index_slots=1000,
                        index_entries=4000, auto_create_topics=True)
    b = server.Broker(store, BrokerConfig(host="127.0.0.1", port=0, metrics_port=0), lambda line: None)

    async def main():
        await b.start()
        try:
            clock = ManualClock()
            await asyncio.to_thread(check, b, Observer(b, clock, 2.5), clock)
        finally:
            await b.stop()
    asyncio.run(main())


def test_a_new_broker_at_a_glance(tmp_path):
    def check(b, obs, clock):
        st = obs.status()
        assert st["endpoint"] == f"127.0.0.1:{b.port}" and st["metrics_endpoint"] is None
        assert st["root"] == str(tmp_path / "store") and st["ready"] and st["replication"] is None
        assert st["event_loop"] == "asyncio", "the loop it runs on (asyncio.run here)"
        assert st["uptime_s"] == 0 and st["recovery"]["seconds"] == 2.5
        assert st["topics"] == 0 and st["groups"] == 0, "the broker's own topics are not counted"
        assert st["verdict"]["writes"] == "accepted"
        assert st["totals"]["put"] == st["totals"]["got"] == 0
        clock.advance(90.5)
        assert obs.status()["uptime_s"] == 90.5
    observe(tmp_path, check)


def test_what_the_store_holds_is_counted_per_topic_and_in_the_totals(tmp_path):
    def check(b, obs, clock):
        b.store.create_topic("A", 2)
        b.store.create_topic("B", 1)
        assert all(r.ok for r in b.store.put_batch([Message("A", b"x" * 10) for _ in range(5)]))
        assert b.store.put(Message("B", b"y")).ok
        assert obs.put_totals()["A"] == 5 and obs.put_totals()["B"] == 1
        st = obs.status()
        assert st["topics"] == 2 and st["totals"]["put"] == 6
        assert {d["path"] for d in st["disk"]["directories"]} == set(obs.used_percent(st["disk"]))
    observe(tmp_path, check)


def test_each_tick_adds_a_sample_at_the_clocks_time(tmp_path):
    def check(b, obs, clock):
        b.store.create_topic("A", 1)
        obs.tick()
        assert b.store.put(Message("A", b"z")).ok
        clock.advance(10)
        obs.tick()
        samples = list(obs.history.samples)
        assert [s.t_s for s in samples] == [clock.now_ms() / 1000 - 10, clock.now_ms() / 1000]
        assert [s.put_total for s in samples] == [0, 1]
        assert samples[1].bytes_in_total > samples[0].bytes_in_total
    observe(tmp_path, check)
