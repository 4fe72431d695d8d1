"""Byte-rate quotas (protection/quotas.py) on a ManualClock: a bucket of one second's rate, the
answer delayed by the debt, refused past quota_throttle_ms_max (nothing taken), every applying
entity charged; the table's bounds, its file and a follower's copy."""

import pytest

from tidemq.broker.protection.quotas import QuotaError, Quotas
from tidemq.io import ManualClock
from tidemq.testing.faulty_io import FaultyFileIO


def make(throttle_s=2.0):
    clock = ManualClock()
    return Quotas(None, None, clock, throttle_s), clock


def test_within_the_rate_nothing_waits_over_it_the_answer_waits_the_debt():
    q, clock = make()
    q.set("user", "u", 1000, None)
    ents = q.applying("produce", "u", "c", ["t"])
    assert ents == ["user:u"]
    assert q.charge("produce", ents, 600, refuse=True).delay_s == 0          # a second's worth in the bucket
    v = q.charge("produce", ents, 900, refuse=True)
    assert v.refused is None and v.delay_s == pytest.approx(0.5)             # 500 bytes of debt at 1000/s
    clock.advance(0.5)
    assert q.charge("produce", ents, 100, refuse=True).delay_s == pytest.approx(0.1), "the debt was paid"
    st = q.snapshot()[("user:u", "produce")]
    assert (st.bytes_total, st.throttled_total, st.refused_total) == (1600, 2, 0)
    assert st.throttled_seconds_total == pytest.approx(0.6)


def test_past_the_bound_refused_and_nothing_taken():
    q, clock = make(throttle_s=2.0)
    q.set("topic", "t", 1000, None)
    ents = q.applying("produce", None, None, ["t"])
    v = q.charge("produce", ents, 4000, refuse=True)                         # 3 s of debt: more than 2
    assert v.refused is not None and "topic:t" in v.refused and v.delay_s == 0
    assert q.charge("produce", ents, 2500, refuse=True).delay_s == pytest.approx(1.5), "the refusal took nothing"
    assert q.snapshot()[("topic:t", "produce")].refused_total == 1


def test_every_applying_entity_is_charged_and_the_longest_debt_is_the_delay():
    q, _ = make(throttle_s=100)
    q.set("user", "u", 1000, None)
    q.set("client", "c", 100, None)
    q.set("topic", "t", None, 50)                                            # fetch only
    assert sorted(q.applying("produce", "u", "c", ["t"])) == ["client:c", "user:u"]
    assert q.applying("fetch", "u", "c", ["t"]) == ["topic:t"]
    v = q.charge("produce", ["user:u", "client:c"], 300, refuse=True)
    assert v.delay_s == pytest.approx(2.0), "the client's 100 bytes/s: 200 bytes of debt"


def test_fetch_is_admitted_until_its_debt_passes_the_bound():
    q, clock = make(throttle_s=1.0)
    q.set("user", "u", None, 100)
    ents = ["user:u"]
    assert q.admit("fetch", ents) is None
    q.charge("fetch", ents, 400, refuse=False)                               # 3 s of debt: a fetch is charged
    assert q.admit("fetch", ents) is not None, "the next fetch is refused before it reads"
    clock.advance(2.5)
    assert q.admit("fetch", ents) is None


def test_bad_quotas_are_refused_and_0_removes_a_rate():
    q, _ = make()
    for bad in (("group", "g", 1, None), ("user", "", 1, None), ("user", "u", -1, None), ("user", "u", 1.5, None),
                ("user", "u", True, None)):
        with pytest.raises(QuotaError):
            q.set(*bad)
    q.set("user", "u", 10, 20)
    assert q.set("user", "u", 0, None) == {"fetch": 20}
    assert q.set("user", "u", None, 0) == {} and q.document() == {}


def test_the_table_survives_a_restart_and_a_follower_takes_a_copy():
    fio, clock = FaultyFileIO(), ManualClock()
    q = Quotas(fio, "/state", clock, 1.0)
    q.set("client", "c", 5, 6)
    again = Quotas(fio, "/state", clock, 1.0)
    again.load()
    assert again.document() == {"client:c": {"produce": 5, "fetch": 6}}
    follower = Quotas(None, None, clock, 1.0)
    follower.replace(q.document())
    assert follower.applying("fetch", None, "c", []) == ["client:c"]
    with pytest.raises(ValueError):
        follower.replace({"nobody": {"produce": 1}})
