"""The admin calls' request shapes (the service itself: tests/cli/test_admin_cli.py and the
broker's e2e tests)."""

import pytest

from tidemq.protocol.admin import QUEUES_DEFAULT, alarm_limits, create_topic_request


def test_create_topic_request():
    assert create_topic_request({"name": "T", "queues": "3"}) == ("T", 3)
    assert create_topic_request({"name": "T"}) == ("T", QUEUES_DEFAULT)
    for bad in ({}, {"name": "T", "queues": 1e400}, {"name": "T", "queues": 0}, {"name": "T", "queues": [1]},
                {"name": "", "queues": 1}, [], {"name": "T", "queues": "3x"}):
        with pytest.raises(ValueError):
            create_topic_request(bad)


def test_alarm_limits_take_known_limits_only_with_their_types():
    assert alarm_limits({"memory_high_watermark_ratio": "0.5", "disk_free_limit_bytes": "10"}) == {
        "memory_high_watermark_ratio": 0.5, "disk_free_limit_bytes": 10}
    for bad in ({}, {"nope": 1}, {"disk_free_limit_bytes": -1}, {"memory_high_watermark_ratio": 1.0},
                {"memory_high_watermark_bytes": "x"}, {"disk_free_limit_bytes": 1e400}, [],
                {"disk_free_limit_bytes": float("nan")}, {"disk_free_limit_bytes": "1e400"},
                {"disk_free_limit_bytes": 1.5}):
        with pytest.raises((ValueError, TypeError)):
            alarm_limits(bad)
