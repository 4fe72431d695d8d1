"""Parking a message in a system topic and moving it back: the real topic and queue kept,
the client's message id kept, a move recognised after a crash by the index."""

from google.protobuf import timestamp_pb2

from tidemq.broker.deferred import parking
from tidemq.broker.deferred.parking import PROP_REAL_QID, PROP_REAL_TOPIC
from tidemq.broker.topic_names import HALF_TOPIC, SCHEDULE_TOPIC
from tidemq.io import ManualClock
from tidemq.store import Message
from tidemq.record.codec import PROP_UNIQ_KEY


def parked_store(stores):
    s = stores(ManualClock())
    s.create_topic("Real", 4)
    parking.ensure_topic(s, SCHEDULE_TOPIC)
    parking.ensure_topic(s, SCHEDULE_TOPIC)            # twice: nothing changes
    assert s.queue_count(SCHEDULE_TOPIC) == 1
    return s


def test_park_and_unpark_keep_the_real_topic_queue_and_id(stores):
    s = parked_store(stores)
    m = Message("Real", b"body", tags="t", keys=["k"], properties={"a": "1", PROP_UNIQ_KEY: "ID1"}, queue_id=2)
    p = parking.park(m, SCHEDULE_TOPIC, {"TIMER_DELIVER_MS": "123"})
    assert (p.topic, p.queue_id, p.properties[PROP_REAL_TOPIC], p.properties[PROP_REAL_QID]) == \
        (SCHEDULE_TOPIC, 0, "Real", "2")
    assert s.put(p).ok
    stored = parking.read_at(s, SCHEDULE_TOPIC, 0)
    back = parking.unpark(stored, s.queue_count("Real"))
    assert (back.topic, back.queue_id, back.body, back.tags, back.keys) == ("Real", 2, b"body", "t", ["k"])
    assert back.properties[PROP_UNIQ_KEY] == "ID1" and back.properties["a"] == "1"
    assert not set(back.properties) & parking.PARKING


def test_a_message_without_an_id_gets_one_and_a_queue_out_of_range_goes_round_robin(stores):
    s = parked_store(stores)
    p = parking.park(Message("Real", b"x", queue_id=3), HALF_TOPIC)
    assert p.properties[PROP_UNIQ_KEY]
    parking.ensure_topic(s, HALF_TOPIC)
    assert s.put(p).ok
    stored = parking.read_at(s, HALF_TOPIC, 0)
    assert parking.unpark(stored, 2).queue_id is None, "the topic has fewer queues now"


def test_a_move_is_recognised_by_the_index(stores):
    s = parked_store(stores)
    assert s.put(parking.park(Message("Real", b"x", properties={PROP_UNIQ_KEY: "MOVED1"}), SCHEDULE_TOPIC)).ok
    stored = parking.read_at(s, SCHEDULE_TOPIC, 0)
    assert not parking.already_moved(s, stored)
    assert s.put(parking.unpark(stored, 4)).ok
    assert parking.already_moved(s, stored)


def test_batches_read_a_bounded_stretch(stores):
    s = parked_store(stores)
    for i in range(70):
        assert s.put(parking.park(Message("Real", b"m%d" % i), SCHEDULE_TOPIC)).ok
    got = [(nxt, len(ms)) for nxt, ms in parking.batches(s, SCHEDULE_TOPIC, 5, 50)]
    assert sum(n for _, n in got) == 50 and got[-1][0] == 55
    assert list(parking.batches(s, SCHEDULE_TOPIC, 70, 10)) == [], "nothing past the end"
    assert parking.read_at(s, SCHEDULE_TOPIC, 70) is parking.NOT_READABLE, "past the end: not there yet"
    assert parking.read_at(s, SCHEDULE_TOPIC, 69).body == b"m69"
    s.set_commit_limit(lambda: 0)
    assert parking.read_at(s, SCHEDULE_TOPIC, 69) is parking.NOT_READABLE, "there, not readable now"


def test_delivery_time_in_seconds_or_in_milliseconds():
    assert parking.delivery_ms(timestamp_pb2.Timestamp(seconds=1_700_000_000, nanos=5_000_000)) == 1_700_000_000_005
    # the Python client puts epoch milliseconds in `seconds`
    assert parking.delivery_ms(timestamp_pb2.Timestamp(seconds=1_700_000_000_123)) == 1_700_000_000_123
