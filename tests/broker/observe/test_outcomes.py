"""broker/observe/outcomes.py: messages counted by (topic, status); protocol codes by their names; a
topic that does not exist counted as "" so the series stay bounded; nothing counted for n <= 0."""

from tidemq.broker.observe.outcomes import DUPLICATE, OK, REDELIVERED, Outcomes
from tidemq.protocol.stubs import Code


def test_counts_add_up_per_topic_and_status():
    o = Outcomes()
    o.add("T", OK)
    o.add("T", OK, 4)
    o.add("T", DUPLICATE, 2)
    o.add("U", REDELIVERED)
    assert o.snapshot() == {("T", "OK"): 5, ("T", "DUPLICATE"): 2, ("U", "REDELIVERED"): 1}


def test_nothing_is_counted_for_no_messages():
    o = Outcomes()
    o.add("T", OK, 0)
    o.add("T", OK, -3)
    assert o.snapshot() == {}


def test_protocol_codes_are_counted_by_name():
    o = Outcomes()
    o.add_code("T", Code.TOO_MANY_REQUESTS, 3)
    o.add_code("T", Code.OK)
    o.add_code("T", 99999)                       # a code the stubs do not know: its number
    assert o.snapshot() == {("T", "TOO_MANY_REQUESTS"): 3, ("T", "OK"): 1, ("T", "99999"): 1}


def test_a_topic_that_does_not_exist_counts_as_the_empty_topic():
    queues = {"T": 8, "Gone": 0}
    o = Outcomes(known=lambda t: queues.get(t, 0))
    o.add("T", OK)
    o.add("Gone", "TOPIC_NOT_FOUND")
    for i in range(100):
        o.add(f"random-{i}", "TOPIC_NOT_FOUND")
    o.add("", "BAD_REQUEST")
    assert o.snapshot() == {("T", "OK"): 1, ("", "TOPIC_NOT_FOUND"): 101, ("", "BAD_REQUEST"): 1}


def test_a_snapshot_is_a_copy():
    o = Outcomes()
    o.add("T", OK)
    snap = o.snapshot()
    o.add("T", OK)
    assert snap == {("T", "OK"): 1} and o.snapshot() == {("T", "OK"): 2}


def test_a_known_topic_counts_as_add_counts_it():
    queues = {"T": 8}
    o, p = Outcomes(known=lambda t: queues.get(t, 0)), Outcomes(known=lambda t: queues.get(t, 0))
    for _ in range(3):
        o.add_known("T", OK)
        p.add("T", OK)
    o.add_known("T", DUPLICATE)
    p.add("T", DUPLICATE)
    assert o.snapshot() == p.snapshot() == {("T", "OK"): 3, ("T", "DUPLICATE"): 1}
