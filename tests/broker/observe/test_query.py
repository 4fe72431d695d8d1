import pytest

from tidemq.broker.observe.query import settings
from tidemq.config import BrokerConfig
from tidemq.protocol import admin as api


def test_config_show_masks_secrets():
    s = settings(BrokerConfig(access_key="ak", secret_key="very secret"))
    assert s["secret_key"] == "***" and s["access_key"] == "ak" and s["port"] == 8081
    assert settings(BrokerConfig())["secret_key"] == ""


@pytest.mark.parametrize("req", [
    {}, {"topic": "T"}, {"topic": "T", "key": "a", "id": "b"}, {"topic": "", "key": "a"},
    {"topic": "T", "commitlog_offset": -1}, {"topic": "T", "commitlog_offset": 1e400},
    {"topic": "T", "commitlog_offset": True}, {"topic": "T", "queue": 0},
    {"topic": "T", "key": "k", "max": 10_000}, {"topic": "T", "key": ["k"]}, [], "x",
])
def test_bad_query_requests_are_refused_with_a_reason(req):
    with pytest.raises(ValueError):
        api.query_request(req)


def test_query_requests():
    assert api.query_request({"topic": "T", "key": "k"}) == ("T", "key", "k", 16)
    assert api.query_request({"topic": "T", "queue": 2, "timestamp_ms": 5, "max": 3}) == ("T", "queue", (2, 5), 3)
