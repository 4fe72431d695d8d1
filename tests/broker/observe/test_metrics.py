"""The collector over a real in-memory store on a manual clock: the disk forecast per directory
and overall, 0 while writes are refused, segments deleted and rounds that could not free space
by reason. (A real broker's scrape is in test_http_e2e.py.)"""

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tidemq.broker.observe.latency import LatencyBuckets
from tidemq.broker.observe.metrics import registry_for
from tidemq.io import ManualClock
from tidemq.store import Message, MessageStore
from tidemq.testing.faulty_io import FaultyFileIO

from tests.support.store import memory_config

SEG = 8 * 1024


class StoreOnly:
    """What the collector reads of an Observer, with the disk part from a real store."""

    def __init__(self, store) -> None:
        self.store = store
        self.put_latency = LatencyBuckets()
        self.flush_latency = LatencyBuckets()

    def status(self) -> dict:
        return {"totals": {"bytes_in": 0, "bytes_out": 0, "held": 0, "refused": 0},
                "verdict": {"writes": "accepted", "reasons": []}, "alarms": {},
                "disk": self.store.disk_status(), "recovery": {"seconds": 0.25}}

    def put_outcomes(self) -> dict:
        return {}

    def got_outcomes(self) -> dict:
        return {}

    def lag(self) -> list:
        return []


def scrape(obs) -> dict:
    text = generate_latest(registry_for(obs)).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_forecast_per_directory_and_cleanup_by_reason():
    clock, fio = ManualClock(), FaultyFileIO()
    fio.capacity_bytes = 4 << 20
    s = MessageStore(memory_config(segment_size_bytes=SEG, file_reserved_time_hours=1), fio=fio, clock=clock).start()
    try:
        s.check_disk()
        for _ in range(20):                       # 20 s of writing, measured on the clock
            assert s.put(Message("T", b"x" * 2000)).ok
            clock.advance(1.0)
            s.check_disk()
        m = scrape(StoreOnly(s))
        cl = s.config.commitlog_paths[0]
        for ratio in ("75", "85", "90"):
            assert m[("tidemq_disk_forecast_seconds", (("dir", "all"), ("ratio", ratio)))] > 0
            assert m[("tidemq_disk_forecast_seconds", (("dir", cl), ("ratio", ratio)))] > 0
        assert m[("tidemq_recovery_seconds", ())] == 0.25

        clock.advance(2 * 3600)                   # every sealed segment expired
        s.trigger_delete_expired()
        s.clean()
        m = scrape(StoreOnly(s))
        assert m[("tidemq_segments_deleted_total", (("reason", "expired"),))] == len(s.cleaner.last_deleted.deleted) > 0
        assert m[("tidemq_segments_deleted_total", (("reason", "space"),))] == 0

        fio.capacity_bytes = int(fio.disk_usage("/").used_bytes / 0.80)   # above 75 %: space short
        s.check_disk()
        clock.advance(60)                          # the rates of a minute without writes: no forecast
        s.check_disk()
        for _ in range(3):
            s.clean()
        m = scrape(StoreOnly(s))
        assert m[("tidemq_cleanup_not_freed_total", (("reason", "active-only"),))] == 3
        assert ("tidemq_disk_forecast_seconds", (("dir", "all"), ("ratio", "90"))) not in m, "not at this rate"

        fio.capacity_bytes = int(fio.disk_usage("/").used_bytes / 0.95)   # past the warning ratio: refused
        s.check_disk()
        assert s.write_refusal() is not None
        m = scrape(StoreOnly(s))
        assert m[("tidemq_disk_forecast_seconds", (("dir", "all"), ("ratio", "90")))] == 0
        assert m[("tidemq_disk_forecast_seconds", (("dir", cl), ("ratio", "90")))] == 0
    finally:
        s.shutdown()


class WithAliases(StoreOnly):
    """A broker serving RocketMQ 5's names (metrics_rocketmq_aliases), with sends, reads and lag."""

    class broker:
        class config:
            metrics_rocketmq_aliases = True

    def status(self) -> dict:
        return {**super().status(), "totals": {"bytes_in": 1000, "bytes_out": 400, "held": 0, "refused": 0},
                "topics": 2, "groups": 1}

    def put_outcomes(self) -> dict:
        return {("T", "OK"): 7, ("T", "DUPLICATE"): 2, ("U", "OK"): 1, ("", "TOPIC_NOT_FOUND"): 3}

    def got_outcomes(self) -> dict:
        return {("T", "OK"): 4, ("T", "REDELIVERED"): 1, ("T", "DEAD_LETTERED"): 1}

    def lag(self) -> list:
        return [{"group": "g", "topic": "T", "queue": 0, "lag": 2}, {"group": "g", "topic": "T", "queue": 1, "lag": 1}]


def test_rocketmq_aliases_carry_the_same_counts():
    clock, fio = ManualClock(), FaultyFileIO()
    store = MessageStore(memory_config(), fio, clock).start()
    try:
        m = scrape(WithAliases(store))
        plain = scrape(StoreOnly(store))
    finally:
        store.shutdown()
    assert m[("rocketmq_messages_in_total", (("topic", "T"),))] == 7
    assert m[("rocketmq_messages_in_total", (("topic", "U"),))] == 1
    assert m[("rocketmq_messages_out_total", (("topic", "T"),))] == 5
    assert m[("rocketmq_throughput_in_total", ())] == 1000 and m[("rocketmq_throughput_out_total", ())] == 400
    assert m[("rocketmq_consumer_lag_messages", (("consumer_group", "g"), ("topic", "T")))] == 3
    assert m[("rocketmq_topic_number", ())] == 2 and m[("rocketmq_consumer_group_number", ())] == 1
    assert not [k for k in plain if k[0].startswith("rocketmq_")], "off: none served"
