"""What a selecting receive hands out (consume/select.py, lite.py) without a server: Consumption over
a real store on a manual clock. Through the official client: test_lite_priority_e2e.py."""

from tidemq.broker.consume.lite import LiteSubscriptions
from tidemq.broker.produce.send_path import lite_topic_problem
from tidemq.protocol.stubs import Code, pb
from tidemq.store import Message

from ...support.pop import ORDERED, ack, bodies

INVISIBLE_MS = 10_000
A = pb.LiteSubscriptionAction


def put(store, queue, body, **props):
    r = store.put(Message(topic="T", body=body, queue_id=queue, properties={k: str(v) for k, v in props.items()}))
    assert r.status.name == "PUT_OK"


def prio(store, queue, body, p):
    put(store, queue, body, __PRIORITY=p, __MSGTYPE="PRIORITY")


def test_higher_priorities_come_first_within_a_queue_and_nothing_is_lost_or_doubled(world):
    store, clock, consumption = world
    c = consumption(priority_window_messages=8)
    c.priority_topics.add("T")
    for i, p in enumerate((1, 5, 0, 9, 5)):
        prio(store, 0, b"p%d-%d" % (p, i), p)
    put(store, 0, b"plain")                                    # no priority: ranks as 0
    first = c.pop_batch("g", "T", 2, INVISIBLE_MS, None)
    assert bodies(first) == [b"p9-3", b"p5-1"]
    assert [m.system_properties.priority for m in first] == [9, 5]
    assert bodies(c.pop_batch("g", "T", 2, INVISIBLE_MS, None)) == [b"p5-4", b"p1-0"], "the set-aside ones, by priority"
    prio(store, 0, b"p7-late", 7)
    rest = c.pop_batch("g", "T", 8, INVISIBLE_MS, None)
    assert bodies(rest) == [b"p7-late", b"p0-2", b"plain"], "a later higher one passes the waiting lower ones"
    assert [m.system_properties.delivery_attempt for m in first + rest] == [1] * 5
    assert c.pop_batch("g", "T", 8, INVISIBLE_MS, None) == [], "each once"
    for m in first:
        ack(c, "g", m)
    clock.advance(INVISIBLE_MS / 1000 + 1)
    back = c.pop_batch("g", "T", 8, INVISIBLE_MS, None)
    assert bodies(back) == [b"p7-late", b"p5-4", b"p1-0", b"p0-2", b"plain"], "the unacked come back by priority"
    assert {m.system_properties.delivery_attempt for m in back} == {2}
    again = consumption(priority_window_messages=8)           # a restart of the pop state
    again.priority_topics.add("T")
    clock.advance(INVISIBLE_MS / 1000 + 1)
    assert len(again.pop_batch("g", "T", 8, INVISIBLE_MS, None)) == 5


def test_a_fifo_group_and_a_topic_without_priorities_keep_offset_order(world):
    store, clock, consumption = world
    c = consumption()
    prio(store, 0, b"low", 1)
    prio(store, 0, b"high", 9)
    assert bodies(c.pop_batch("g", "T", 1, INVISIBLE_MS, None)) == [b"low"], "not known as a priority topic yet"
    assert "T" in c.priority_topics, "learnt from the message read"
    assert bodies(c.pop_batch("h", "T", 1, INVISIBLE_MS, None)) == [b"high"], "known now"
    assert bodies(c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)) == [b"low", b"high"], "a FIFO group: in order"


def test_lite_consumers_get_only_their_lite_topics(world):
    store, clock, consumption = world
    c = consumption()
    c.lite = lite = LiteSubscriptions(3, lambda n: lite_topic_problem(n, 16))
    assert lite.sync("g", "T", "A", A.PARTIAL_ADD, ["s", "e", "s", "1"], python_quirk=True) == (Code.OK, "")
    assert lite.sets("g", "T", "A") == ({"ses1"}, {"ses1"}), "the Python client's string-as-set, read as one name"
    assert lite.sync("g", "T", "B", A.COMPLETE_ADD, ["s2", "s3"])[0] == Code.OK
    assert lite.sync("g", "T", "B", A.PARTIAL_ADD, ["a", "b"])[0] == Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED
    assert lite.sync("g", "T", "B", A.PARTIAL_ADD, ["bad name"])[0] == Code.ILLEGAL_LITE_TOPIC
    assert lite.sync("g", "T", "", A.PARTIAL_ADD, ["x"])[0] == Code.CLIENT_ID_REQUIRED
    for q, body, lt in ((0, b"a1", "ses1"), (0, b"b1", "s2"), (1, b"nobody", "s9"), (1, b"a2", "ses1"),
                        (1, b"b2", "s3")):
        put(store, q, body, __LITE_TOPIC=lt, __MSGTYPE="LITE")
    put(store, 0, b"not lite")
    got_a = c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="A")
    assert sorted(bodies(got_a)) == [b"a1", b"a2"]
    assert got_a[0].system_properties.lite_topic == "ses1"
    assert c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="C") == [], "a client without lite topics: none"
    assert sorted(bodies(c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="B"))) == [b"b1", b"b2"], \
        "B's were left for B"
    assert c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="A") == []
    assert sorted(bodies(c.pop_batch("plain", "T", 8, INVISIBLE_MS, None, client="A"))) == \
        [b"a1", b"a2", b"b1", b"b2", b"nobody", b"not lite"], "a group without lite subscriptions gets all"
    assert lite.sync("g", "T", "B", A.PARTIAL_REMOVE, ["s2"])[0] == Code.OK
    lite.forget("A")
    assert lite.sets("g", "T", "A") == (frozenset(), {"s3"})
    lite.forget("B")
    assert lite.sets("g", "T", "B") is None, "no lite subscription left: the group takes the topic as usual"


def test_another_client_s_waiting_messages_neither_hide_nor_are_read_again(world):
    """B subscribes and does not receive: its messages wait; A's behind them come at A's first
    receive, and B's are not read again by A's later receives; a queue holds at most
    HELD_MAX_WINDOWS windows in flight for the group."""
    from tidemq.broker.consume import select
    store, clock, consumption = world
    c = consumption(priority_window_messages=4)
    c.lite = lite = LiteSubscriptions(8, lambda n: lite_topic_problem(n, 16))
    lite.sync("g", "T", "A", A.COMPLETE_ADD, ["a"])
    lite.sync("g", "T", "B", A.COMPLETE_ADD, ["b"])
    for i in range(10):
        put(store, 0, b"b%d" % i, __LITE_TOPIC="b")
    put(store, 0, b"a0", __LITE_TOPIC="a")
    assert bodies(c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="A")) == [b"a0"]
    reads = []
    real = c.read_at
    c.read_at = lambda *a: reads.append(a) or real(*a)
    put(store, 0, b"a1", __LITE_TOPIC="a")
    assert bodies(c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="A")) == [b"a1"]
    assert reads == [], "B's set-aside messages are known: not read again"
    got_b = c.pop_batch("g", "T", 16, INVISIBLE_MS, None, client="B")
    assert bodies(got_b) == [b"b%d" % i for i in range(10)]
    assert {m.system_properties.delivery_attempt for m in got_b} == {1}
    select.HELD_MAX_WINDOWS, saved = 1, select.HELD_MAX_WINDOWS
    try:
        put(store, 0, b"a2", __LITE_TOPIC="a")
        assert c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="A") == [], "10 in flight >= 1 window of 4: held"
        for m in got_b:
            ack(c, "g", m)
        assert bodies(c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="A")) == [b"a2"]
    finally:
        select.HELD_MAX_WINDOWS = saved


def test_a_lite_consumer_s_settings_make_its_group_lite_before_it_subscribes(world):
    store, clock, consumption = world
    c = consumption()
    c.lite = lite = LiteSubscriptions(8, lambda n: lite_topic_problem(n, 16))
    lite.declare("g", ["T"], "A")
    put(store, 0, b"early", __LITE_TOPIC="x")
    assert c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="A") == [], "nothing before subscribe_lite"
    lite.sync("g", "T", "A", A.PARTIAL_ADD, ["x"])
    put(store, 0, b"late", __LITE_TOPIC="x")
    assert bodies(c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="A")) == [b"late"], \
        "what came before the subscription was passed over"
    lite.declare("g", ["T"], "A")
    assert lite.sets("g", "T", "A")[0] == {"x"}, "settings sent again keep the subscription"


def test_a_client_the_broker_no_longer_hears_from_is_forgotten(world):
    store, clock, consumption = world
    c = consumption()
    alive = {"A": True, "B": True}
    c.lite = lite = LiteSubscriptions(8, lambda n: lite_topic_problem(n, 16), lambda cid: alive.get(cid, False))
    lite.sync("g", "T", "A", A.COMPLETE_ADD, ["a"])
    lite.sync("g", "T", "B", A.COMPLETE_ADD, ["b"])
    put(store, 0, b"b0", __LITE_TOPIC="b")
    assert c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="A") == []
    assert lite.sets("g", "T", "A") == ({"a"}, {"a", "b"}), "b0 waits for B"
    alive["B"] = False                               # killed: its stream closed
    assert c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="A") == []
    assert lite.sets("g", "T", "A") == ({"a"}, {"a"}), "B forgotten: its lite topic is nobody's"
    put(store, 0, b"a0", __LITE_TOPIC="a")
    assert bodies(c.pop_batch("g", "T", 8, INVISIBLE_MS, None, client="A")) == [b"a0"]
    assert c.pop.state("g", "T", 0).inflight.keys() == {1}, "b0 passed over (done for the group), a0 in flight"
