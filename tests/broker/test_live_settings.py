"""broker/live_settings.py: a change is checked by the code a start runs (StoreConfig/BrokerConfig
built with it), unknown names get "did you mean", settings read only at start need a restart; the
store's cleaner takes a retention change from its next round."""

import pytest

from tidemq.broker.live_settings import LIVE, SettingError, check, marks
from tidemq.config import BrokerConfig, StoreConfig


def test_checked_as_a_start_checks_it():
    s, b = StoreConfig(), BrokerConfig()
    sec, name, new = check("memory_high_watermark_ratio", "0.5", s, b)
    assert (sec, name, new.memory_high_watermark_ratio) == ("broker", "memory_high_watermark_ratio", 0.5)
    for name, value, kind, words in (
            ("memory_high_watermark_ratio", "0.99", "bad_value", "outside [0.01, 0.95]"),
            ("memory_high_watermark_ratio", "lots", "bad_value", "cannot use 'lots' as float"),
            ("disk_space_clean_forcibly_percent", "0.85", "bad_value", "did you mean 85"),
            ("delete_when", 4, "bad_value", ""),
            ("segment_size_bytes", "4096", "restart", "cannot change at run time"),
            ("retention_hours", "1", "unknown", "did you mean file_reserved_time_hours"),
            ("memory_high_watermark", "1", "unknown", "did you mean memory_high_watermark_ratio"),
            ("log_level", "LOUD", "bad_value", "not one of")):
        if name == "delete_when":
            check(name, value, s, b)            # a number as text: fine
            continue
        with pytest.raises(SettingError) as e:
            check(name, value, s, b)
        assert e.value.kind == kind and words in str(e.value), (name, str(e.value))
    sec, name, new = check("disk_max_used_space_ratio", 60, s, b)      # an old name: the new one
    assert (sec, name, new.disk_used_space_percent_max) == ("store", "disk_used_space_percent_max", 60)
    assert marks(s, b)["file_reserved_time_hours"] == "live" and marks(s, b)["segment_size_bytes"] == "restart"
    assert set(LIVE) <= set(marks(s, b))


def test_the_cleaner_takes_a_retention_change_from_its_next_round():
    from ..support.cleaner import World
    w = World(file_reserved_time_hours=72, at_the_delete_hour=True)
    w.disk.refresh()
    assert w.cleaner.run_round().deleted == []
    _sec, _name, new = check("file_reserved_time_hours", "2.5", w.cleaner.config, BrokerConfig())
    w.cleaner.reconfigure(new)
    assert len(w.cleaner.run_round().deleted) == 3, "5, 4, 3 h old: expired under 2.5 h"
