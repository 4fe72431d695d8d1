"""The admin calls' request shapes (the service itself: tests/cli/test_topic.py, test_alarms.py, ... and the
broker's e2e tests)."""

import pytest

from tidemq.protocol.admin import (QUERY_MAX, LimitError, alarm_limits, create_topic_request,
                                   query_request)


def test_create_topic_request():
    assert create_topic_request({"name": "T", "queues": "3"}) == ("T", 3, None)
    assert create_topic_request({"name": "T"}) == ("T", None, None), "the broker picks: QUEUES_DEFAULT if new"
    assert create_topic_request({"name": "T", "space_policy": "refuse"}) == ("T", None, "refuse")
    for bad in ({}, {"name": "T", "queues": 1e400}, {"name": "T", "queues": 0}, {"name": "T", "queues": [1]},
                {"name": "", "queues": 1}, [], {"name": "T", "queues": "3x"}, {"name": "T", "space_policy": "keep"},
                {"name": "T", "space_policy": ["refuse"]}):
        with pytest.raises(ValueError):
            create_topic_request(bad)


def test_query_max_is_bounded_by_the_limit_given():
    assert query_request({"topic": "T", "key": "k"})[3] == 16
    assert query_request({"topic": "T", "key": "k", "max": 500}, 1000)[3] == 500
    with pytest.raises(LimitError):
        query_request({"topic": "T", "key": "k", "max": QUERY_MAX + 1})
    with pytest.raises(LimitError):
        query_request({"topic": "T", "key": "k", "max": 1 << 62}, 1000)
    assert query_request({"topic": "T", "key": "k"}, 4)[3] == 4, "the default never exceeds the limit"


def test_alarm_limits_take_known_limits_only_with_their_types():
    assert alarm_limits({"memory_high_watermark_ratio": "0.5", "disk_free_limit_bytes": "10"}) == {
        "memory_high_watermark_ratio": 0.5, "disk_free_limit_bytes": 10}
    for bad in ({}, {"nope": 1}, {"disk_free_limit_bytes": -1}, {"memory_high_watermark_ratio": 1.0},
                {"memory_high_watermark_bytes": "x"}, {"disk_free_limit_bytes": 1e400}, [],
                {"disk_free_limit_bytes": float("nan")}, {"disk_free_limit_bytes": "1e400"},
                {"disk_free_limit_bytes": 1.5}):
        with pytest.raises((ValueError, TypeError)):
            alarm_limits(bad)
