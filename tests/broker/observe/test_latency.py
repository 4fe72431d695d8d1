from tidemq.broker.observe.latency import LatencyBuckets


def test_buckets_are_cumulative_and_end_with_inf():
    b = LatencyBuckets((0.001, 0.01))
    for s in (0.0005, 0.001, 0.005, 0.5):
        b.observe(s)
    assert b.cumulative() == [("0.001", 2), ("0.01", 3), ("+Inf", 4)]
    assert b.count == 4 and abs(b.sum_s - 0.5065) < 1e-12
