"""What the figures say to people: sizes and durations in the unit that fits, forecasts, the last
cleanup in one sentence."""

from tidemq.words import cleanup_summary, human_bytes, human_seconds, until


def test_sizes_in_the_unit_that_fits():
    assert human_bytes(0) == "0 B"
    assert human_bytes(1023) == "1023 B"
    assert human_bytes(1024) == "1.0 KiB"
    assert human_bytes(512 * 1024) == "512.0 KiB"
    assert human_bytes(40 * 2**20) == "40.0 MiB"
    assert human_bytes(0.06 * 2**30) == "61.4 MiB", "not 0.06 GiB"
    assert human_bytes(1.5 * 2**30) == "1.5 GiB"
    assert human_bytes(3 * 2**40) == "3.0 TiB"
    assert human_bytes(-2 * 2**20) == "-2.0 MiB"


def test_durations_in_the_unit_that_fits():
    assert human_seconds(0) == "0 s"
    assert human_seconds(45) == "45 s"
    assert human_seconds(59.4) == "59 s"
    assert human_seconds(60) == "1.0 min"
    assert human_seconds(750) == "12.5 min"
    assert human_seconds(3 * 3600) == "3.0 h"
    assert human_seconds(2.1 * 86400) == "2.1 d"
    assert human_seconds(10) != "0.0 h"


def test_until_says_now_or_never():
    assert until(None) == "not at this rate"
    assert until(0) == "now"
    assert until(-5) == "now"
    assert until(90) == "1.5 min"


def test_cleanup_summary():
    assert cleanup_summary({}, 100.0) == "nothing deleted since start"
    assert cleanup_summary({"deleted": []}, 100.0) == "nothing deleted since start"
    lc = {"deleted": ["a"] * 10, "deleted_bytes": 40 * 2**20, "at_ms": 80_000, "reasons": ["space", "expired",
                                                                                             "space"],
          "triggers": ["space"], "lost": [{"topic": "T", "queue_id": 0, "first": 0, "end": 1000}]}
    assert cleanup_summary(lc, 100.0) == ("deleted 10 segment(s), 40.0 MiB, 20 s ago (expired+space; trigger space); "
                                          "messages gone: T/0 0..999")
    lc["lost"] = [{"topic": "T", "queue_id": q, "first": 0, "end": 10} for q in range(7)]
    lc["triggers"] = []
    text = cleanup_summary(lc, 200.0, lost_shown=2)
    assert text.endswith("messages gone: T/0 0..9, T/1 0..9 and 5 more queue(s)") and "trigger -" in text
    assert "2.0 min ago" in text
    lc["at_ms"] = 500_000                          # a clock step back: never "-5 min ago"
    assert " 0 s ago" in cleanup_summary(lc, 200.0)
