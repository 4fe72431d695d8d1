"""Lite topics and priority messages end to end with the official Python client's own classes
(LiteSimpleConsumer.subscribe_lite, Message.lite_topic, Message.priority) against `tidemq serve`:
each lite consumer receives only its subscribed lite topics; a receive hands out higher priorities
first. Selection rules without a server: test_select.py."""

from tidemq.protocol.stubs import pb

from ...support.brokers import SMALL, make_topic
from ...support.official import LONG_INVISIBLE_S, REQUEST_TIMEOUT_S, msg, receive_all, start
from ...support.wait import wait_until


def lite_consumer(endpoint, group, topic, made):
    from rocketmq import ClientConfiguration, Credentials
    from rocketmq.v5.consumer import LiteSimpleConsumer
    conf = ClientConfiguration(endpoint, Credentials(), request_timeout=REQUEST_TIMEOUT_S)
    c = start(lambda: LiteSimpleConsumer(topic, conf, group, await_duration=1))
    made.append(c)
    # the client's subscription quota is 0 until the broker's settings arrive on its Telemetry stream,
    # which its startup does not wait for: a subscribe_lite before then is refused by the client itself
    manager = c._LiteSimpleConsumer__subscription_manager
    wait_until(lambda: manager.lite_subscription_quota > 0, "the broker's lite subscription quota at the client")
    return c


def test_lite_consumers_receive_only_their_lite_topics(tmp_path, broker_factory, clients):
    producer, _ = clients
    root = str(tmp_path / "store")
    make_topic(root, "Sessions", 2)
    b = broker_factory(root, env=SMALL)
    made = []
    try:
        a = lite_consumer(b.endpoint, "agents", "Sessions", made)
        bb = lite_consumer(b.endpoint, "agents", "Sessions", made)
        a.subscribe_lite("session-a")
        bb.subscribe_lite("session-b")
        p = producer(b.endpoint, ["Sessions"])
        sent = {}
        for body, lt in ((b"a1", "session-a"), (b"b1", "session-b"), (b"x1", "session-x"), (b"a2", "session-a")):
            m = msg("Sessions", body)
            m.lite_topic = lt
            sent[body] = p.send(m).message_id
        got_a = receive_all(a, 2)
        assert sorted(m.body for m in got_a) == [b"a1", b"a2"]
        assert {m.lite_topic for m in got_a} == {"session-a"}
        assert {m.message_type for m in got_a} == {pb.MessageType.LITE}
        [got_b] = receive_all(bb, 1)
        assert got_b.body == b"b1" and got_b.message_id == sent[b"b1"]
        for c, ms in ((a, got_a), (bb, [got_b])):
            for m in ms:
                c.ack(m)
        assert a.receive(8, LONG_INVISIBLE_S) == [] and bb.receive(8, LONG_INVISIBLE_S) == [], \
            "nobody's lite topic and the other's are never handed out"
    finally:
        for c in made:
            c.shutdown()


def test_a_receive_hands_out_higher_priorities_first(tmp_path, broker_factory, clients):
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Urgent", 1)                  # one queue: priority orders a queue's visible messages
    b = broker_factory(root, env=SMALL)
    p = producer(b.endpoint, ["Urgent"])
    for body, prio in ((b"low", 1), (b"top", 9), (b"none", None), (b"mid", 5), (b"zero", 0)):
        m = msg("Urgent", body)
        if prio is not None:
            m.priority = prio
        p.send(m)
    c = consumer(b.endpoint, "workers", "Urgent")
    order = []
    while len(order) < 5:
        [m] = receive_all(c, 1)
        order.append(m.body)
        c.ack(m)
    assert order == [b"top", b"mid", b"low", b"none", b"zero"], "by priority, then in the order sent"


def test_a_lite_push_consumer_gets_its_lite_topic_only(tmp_path, broker_factory, clients):
    import threading

    from rocketmq import ClientConfiguration, Credentials
    from rocketmq.v5.consumer import ConsumeResult, LitePushConsumer, MessageListener
    producer, _ = clients
    root = str(tmp_path / "store")
    make_topic(root, "Chats", 1)           # one queue: what was sent before p1 was looked at before it
    b = broker_factory(root, env=SMALL)
    got, arrived = [], threading.Event()

    class Listener(MessageListener):
        def consume(self, message):
            got.append(message.body)
            if message.body == b"p1":
                arrived.set()
            return ConsumeResult.SUCCESS

    conf = ClientConfiguration(b.endpoint, Credentials(), request_timeout=REQUEST_TIMEOUT_S)
    c = start(lambda: LitePushConsumer(conf, "chatters", "Chats", Listener(), consumption_thread_count=2))
    try:
        c.subscribe_lite("chat-p")
        p = producer(b.endpoint, ["Chats"])
        for body, lt in ((b"q1", "chat-q"), (b"p1", "chat-p")):
            m = msg("Chats", body)
            m.lite_topic = lt
            p.send(m)
        assert arrived.wait(120), f"the push consumer's message did not come: {got}"
        assert got == [b"p1"], "chat-q, subscribed by nobody of the group, is passed over"
    finally:
        c.shutdown()
