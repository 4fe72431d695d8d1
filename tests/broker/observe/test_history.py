from tidemq.broker.observe.history import History, Sample


def s(t, put, got=0, b=0, used=50.0):
    return Sample(t, {"/d": used}, put, got, b)


def test_rates_over_the_last_minute_follow_a_change_of_pace():
    h = History(keep_s=3600, interval_s=10)
    for i in range(30):                        # 10 messages/s for 5 minutes ...
        h.add(s(i * 10.0, i * 100))
    assert h.rates()["put_per_s"] == 10.0
    for i in range(30, 37):                    # ... then 100/s: the last minute shows it at once
        h.add(s(i * 10.0, 2900 + (i - 29) * 1000))
    r = h.rates()
    assert r["put_per_s"] == 100.0 and r["window_s"] == 60.0


def test_one_sample_gives_no_rate_and_the_ring_is_bounded():
    h = History(keep_s=60, interval_s=10)
    h.add(s(0.0, 5))
    assert h.rates()["put_per_s"] == 0.0
    assert h.rates(now=s(10.0, 25, got=10, b=1000)) == {"put_per_s": 2.0, "got_per_s": 1.0,
                                                        "bytes_in_per_s": 100.0, "window_s": 10.0}
    for i in range(100):
        h.add(s(float(i), i))
    assert len(h.series()) == 7
