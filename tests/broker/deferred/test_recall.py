"""Recall without a server (deferred/recall.py, Timer.recall): the handle's form, a recalled message
never moved (across a restart too), one due or moved no longer recallable, every bad handle a typed
answer. Through the official client: tests/broker/deferred/test_recall_e2e.py."""

import os

from tidemq import checked
from tidemq.broker.deferred import recall
from tidemq.broker.deferred.timer import Recall, Timer
from tidemq.protocol.stubs import Code, pb, spb

from ...support.store import topic_bodies as bodies
from .test_timer import schedule, timer_on


def test_handles_round_trip_and_anything_else_is_none():
    h = recall.Handle("T", "broker a", 1_700_000_000_123, "ID with space", 42)
    back = recall.decode(recall.encode(h))
    assert back == h._replace(broker="broker_a")
    for bad in ("", "nonsense!", "djEgVCBiIDEgMg==", "x" * 2000, recall.encode(h).replace("d", "*")):
        assert recall.decode(bad) is None, bad
    import base64
    for time, offset in (("\u00b2", "5"), ("5", "1\u00b2")):         # digits to str.isdigit, not to int()
        raw = " ".join((recall.VERSION, "T", "b", time, offset, "id"))
        assert recall.decode(base64.urlsafe_b64encode(raw.encode()).decode()) is None, raw


def test_a_recalled_message_is_never_moved_even_after_a_restart(stores, tmp_path):
    clock, s, t = timer_on(stores, 1)
    now = clock.now_ms()
    keep = schedule(s, "T", b"keep", now + 1000, "UK")
    gone = schedule(s, "T", b"gone", now + 2000, "UG")
    t.enqueue()
    assert t.recall(gone.queue_offset, now + 2000, clock.now_ms()) is Recall.RECALLED
    assert t.recall(gone.queue_offset, now + 2000, clock.now_ms()) is Recall.RECALLED, "again: the same answer"
    path = os.path.join(str(tmp_path / "store"), "broker", "timer", "checkpoint.json")
    assert checked.decode(open(path, "rb").read())["recalled"] == [gone.queue_offset], "durable before the answer"
    s.shutdown()                                       # no close(): as after a kill -9

    s2 = stores(clock)
    t2 = Timer(s2)
    t2.open()
    assert t2.recalled == {gone.queue_offset}
    t2.enqueue()
    clock.advance(3.0)
    assert t2.move_due(clock.now_ms()) == (1, False)
    assert bodies(s2, "T") == [b"keep"]
    t2.checkpoint(force=True)
    assert t2.recalled == set() and "recalled" not in t2.snapshot(), "passed: forgotten at the next checkpoint"
    assert t2.recall(keep.queue_offset, now + 1000, clock.now_ms()) is Recall.DUE, "moved: too late"


def test_a_message_a_round_took_as_due_cannot_be_recalled(stores):
    clock, s, t = timer_on(stores, 1)
    now = clock.now_ms()
    m = schedule(s, "T", b"m", now + 1000, "U")
    t.enqueue()
    t.move_due(now + 1000)                 # a round that ran at its due time (the clock is behind)
    assert t.recall(m.queue_offset, now + 1000, now) is Recall.DUE
    assert t.recall(99, now + 5000, now) is Recall.UNKNOWN, "no schedule message there"


def _request(topic, handle):
    return spb.RecallMessageRequest(topic=pb.Resource(name=topic), recall_handle=handle)


def test_recall_answers_each_case_with_its_code(stores):
    clock, s, t = timer_on(stores, 1)
    now = clock.now_ms()
    s.create_topic("Plain", 1, message_type="normal")
    m = schedule(s, "T", b"m", now + 5000, "UM")
    t.enqueue()
    h = recall.Handle("T", "tidemq", now + 5000, "UM", m.queue_offset)

    def answer(topic, handle, leading=True):
        return recall.answer(_request(topic, handle), t, s, "tidemq", leading)

    assert answer("T", "garbage")[0] == Code.BAD_REQUEST
    assert answer("Nope", recall.encode(h))[0] == Code.TOPIC_NOT_FOUND
    assert answer("Plain", recall.encode(h._replace(topic="Plain")))[0] == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert answer("T", recall.encode(h._replace(topic="Plain")))[0] == Code.BAD_REQUEST, "topic not match"
    assert answer("T", recall.encode(h._replace(broker="other")))[0] == Code.BAD_REQUEST
    assert answer("T", recall.encode(h._replace(message_id="OTHER")))[0] == Code.NOT_FOUND
    assert answer("T", recall.encode(h._replace(deliver_ms=now + 1)))[0] == Code.NOT_FOUND, "a forged time"
    assert answer("T", recall.encode(h), leading=False)[0] == Code.FORBIDDEN
    assert answer("T", recall.encode(h)) == (Code.OK, "", "UM")
    clock.advance(10.0)
    assert t.move_due(clock.now_ms()) == (0, False) and bodies(s, "T") == []
    late = schedule(s, "T", b"late", clock.now_ms() + 1000, "UL")
    t.enqueue()
    clock.advance(2.0)
    t.move_due(clock.now_ms())
    code, text, _ = answer("T", recall.encode(h._replace(message_id="UL", offset=late.queue_offset,
                                                          deliver_ms=clock.now_ms() - 1000)))
    assert code == Code.ILLEGAL_DELIVERY_TIME and "delivered" in text
