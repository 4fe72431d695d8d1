"""Per-topic retention over the shared commit log (store/topic_retention.py) through a real store on
FaultyFileIO and a ManualClock: a segment goes when every topic with messages in it allows it; a
short retention frees a segment only the topics sharing it allow; a long one keeps it; a size
retention lets the oldest go while the topic holds more; the settings survive a restart."""

from __future__ import annotations

import pytest

from tidemq.io import ManualClock
from tidemq.store import Message
from tidemq.store.cleaner import NotFreed
from tidemq.store.topic_retention import TopicRetention
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.cleaner import HOUR_S, SEG, other_hour
from ..support.store import memory_config

BODY = b"x" * 400


def fill(s, clock, plan) -> None:
    """plan: [(topic, count)] put in order, an hour apart between entries."""
    for topic, n in plan:
        for _ in range(n):
            assert s.put(Message(topic, BODY)).ok
        clock.advance(HOUR_S)


def make(stores, **over):
    clock = ManualClock()
    s = stores(memory_config(segment_size_bytes=SEG, consume_queue_units_per_segment=16, file_reserved_time_hours=72,
                             delete_when=other_hour(clock), **over), FaultyFileIO(), clock)
    for t in ("short", "busy", "long"):
        s.create_topic(t, 1)
    return s, clock


def clean(s) -> list:
    s.trigger_delete_expired()
    s.clean()
    return s.cleaner.last.deleted


def test_a_short_retention_frees_only_segments_no_other_topic_holds(stores):
    s, clock = make(stores)
    fill(s, clock, [("short", 40), ("busy", 40)])      # 'short' fills the first segments alone, then 'busy'
    s.set_topic_settings("short", {"retention_hours": 1})
    clock.advance(2 * HOUR_S)
    gone = clean(s)
    assert gone, "segments only 'short' holds go after its 1 h"
    assert s.min_offset("short", 0) > 0 and s.min_offset("busy", 0) == 0, "'busy' lost nothing"
    assert "topic busy's retention keeps it" in s.cleaner.last.why_not
    assert s.cleaner.last.why_not_code is NotFreed.NOTHING_EXPIRED
    first = s.segments.min_offset
    assert clean(s) == [] and s.segments.min_offset == first, "the segment shared with 'busy' stays (72 h)"


def test_a_long_retention_keeps_what_the_store_would_delete(stores):
    s, clock = make(stores)
    fill(s, clock, [("long", 20), ("busy", 40)])
    s.set_topic_settings("long", {"retention_hours": 200})
    clock.advance(100 * HOUR_S)                        # past the store's 72 h, not 'long''s 200 h
    assert clean(s) == [] and s.min_offset("long", 0) == 0
    assert "topic long's retention keeps it" in s.cleaner.last.why_not
    s.set_topic_settings("long", {"retention_hours": None})       # back to the store's: it goes
    assert clean(s) and s.min_offset("long", 0) > 0


def test_a_size_retention_lets_the_oldest_go_while_the_topic_holds_more(stores):
    s, clock = make(stores)
    fill(s, clock, [("short", 60)])                    # ~ 5 segments of 'short' alone
    s.set_topic_settings("short", {"retention_bytes": 2 * SEG})
    gone = clean(s)
    assert gone, "over its size: the oldest go"
    left = (s.max_offset("short", 0) - s.min_offset("short", 0)) * (len(BODY) + 100)
    assert left >= 2 * SEG - SEG, "what it keeps: at least its retention_bytes less a segment"
    assert clean(s) == [], "no more than that"


def test_topics_settings_survive_a_restart_and_bad_values_are_refused(stores, tmp_path):
    from tidemq.store import MessageStore
    from tidemq.io import OsFileIO
    from ..support.store import small_config
    cfg = small_config(tmp_path / "s")
    s = MessageStore(cfg).start()
    s.create_topic("T", 2)
    got = s.set_topic_settings("T", {"retention_hours": "2.5", "max_message_bytes": 1000})
    assert (got.retention_hours, got.max_message_bytes, got.retention_bytes) == (2.5, 1000, None)
    for bad in ({"retention_hours": -1}, {"retention_bytes": "1.5"}, {"max_message_bytes": 1 << 40},
                {"retention": 1}):
        with pytest.raises(ValueError):
            s.set_topic_settings("T", bad)
    with pytest.raises(KeyError):
        s.set_topic_settings("NOPE", {"retention_hours": 1})
    assert s.topics.body_limits == {"T": 1000}
    s.shutdown()
    s = MessageStore(cfg, fio=OsFileIO()).start()
    assert s.topic_settings("T").retention_hours == 2.5 and s.topics.body_limits == {"T": 1000}
    s.set_topic_settings("T", {"max_message_bytes": "default"})
    assert s.topics.body_limits == {}
    s.shutdown()


def test_first_log_offsets_are_read_once_per_queue_until_its_minimum_moves(stores):
    s, clock = make(stores)
    fill(s, clock, [("short", 5), ("busy", 5)])
    r = TopicRetention(s.topics, s.queues)
    cq = s.queues.get("busy", 0)
    a = r.first_log_offset(cq)
    assert r.first_log_offset(cq) == a and r.queues_read == 1
