"""Pop consumption end to end with the official SimpleConsumer against `tidemq serve`:
receive and ack, change_invisible_duration, redelivery with attempt + 1, the dead-letter
queue, and a broker killed with -9 that loses no ack and redelivers what was not acked."""

import signal

import pytest








from ...support.brokers import SMALL, make_topic, stored, topic_end
from ...support.official import REQUEST_TIMEOUT_S, msg, receive_all, receive_some, start
from ...support.wait import patience, wait_until


def test_receive_and_ack_every_message_once(tmp_path, broker_factory, clients):
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Jobs", 4)
    b = broker_factory(root, env=SMALL)
    p = producer(b.endpoint, ["Jobs"])
    sent = {p.send(msg("Jobs", b"job-%d" % i, tag="T", keys="k%d" % i, props={"n": str(i)})).message_id: i
            for i in range(40)}
    c = consumer(b.endpoint, "workers", "Jobs")
    got = receive_all(c, 40)
    assert sorted(m.message_id for m in got) == sorted(sent), "every message, from every queue, once"
    for m in got:
        i = sent[m.message_id]
        assert m.body == b"job-%d" % i and m.tag == "T" and m.keys == {"k%d" % i} and m.properties == {"n": str(i)}
        assert m.delivery_attempt == 1 and not m.corrupted
        c.ack(m)
    assert c.receive(32, 30) == [], "nothing acked comes back"


def test_redelivery_after_the_invisible_time_then_dead_letter_queue(tmp_path, broker_factory, clients):
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Flaky", 2)
    b = broker_factory(root, env={**SMALL, "TIDEMQ_DELIVERY_ATTEMPTS_MAX": "3"})
    p = producer(b.endpoint, ["Flaky"])
    mid = p.send(msg("Flaky", b"poison")).message_id
    c = consumer(b.endpoint, "g1", "Flaky")
    attempts = []
    while len(attempts) < 3:
        for m in receive_some(c, 8, invisible_s=1):   # never acked: comes back once its 1 s is over
            assert m.message_id == mid
            attempts.append(m.delivery_attempt)
    assert attempts == [1, 2, 3]

    def dead_lettered():
        # the receive that finds the third invisible time over moves the message to the dead-letter queue
        assert c.receive(8, 1) == [], "after max attempts it is not delivered to the group again"
        return topic_end(b.endpoint, "%DLQ%g1") == 1

    wait_until(dead_lettered, "the message to go to the dead-letter queue")
    dlq = consumer(b.endpoint, "dlq-reader", "%DLQ%g1")
    dead = receive_all(dlq, 1)
    assert [m.body for m in dead] == [b"poison"] and dead[0].message_id == mid


def test_change_invisible_duration_and_stale_handles(tmp_path, broker_factory, clients):
    """A change answers a new handle and makes the old one stale; the changed time is the one that
    counts: shortened, the message comes back (attempt + 1). That a lengthened time holds a message
    past its first one is checked on a manual clock (tests/broker/test_consume.py)."""
    from rocketmq.v5.exception import BadRequestException
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Slow", 1)
    b = broker_factory(root, env=SMALL)
    p = producer(b.endpoint, ["Slow"])
    p.send(msg("Slow", b"long job"))
    c = consumer(b.endpoint, "g", "Slow")
    [m] = receive_all(c, 1)
    old = m.receipt_handle
    c.change_invisible_duration(m, 600)       # needs more time
    assert m.receipt_handle != old
    stale = type(m)()
    stale.__dict__.update(m.__dict__)
    stale.receipt_handle = old
    with pytest.raises(BadRequestException):
        c.ack(stale)                           # the handle before the change is stale
    c.change_invisible_duration(m, 1)         # ... or less: back once its 1 s is over
    [again] = receive_all(c, 1)
    assert (again.message_id, again.body, again.delivery_attempt) == (m.message_id, b"long job", 2)
    c.ack(again)
    assert c.receive(8, 1) == []


def test_kill9_loses_no_ack_and_redelivers_what_was_not_acked(tmp_path, broker_factory, clients):
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Durable", 2)
    env = {**SMALL, "TIDEMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH"}
    b = broker_factory(root, env=env)
    p = producer(b.endpoint, ["Durable"])
    ids = [p.send(msg("Durable", b"d-%d" % i)).message_id for i in range(20)]
    c = consumer(b.endpoint, "g", "Durable")
    got = receive_all(c, 20)
    assert sorted(m.message_id for m in got) == sorted(ids)
    acked = {m.message_id for m in got[:12]}
    for m in got[:12]:
        c.ack(m)
    for m in got[12:]:
        c.change_invisible_duration(m, 1)      # in flight at the kill, visible again 1 s later
    b.stop(signal.SIGKILL)
    c.shutdown()
    b2 = broker_factory(root, env=env)
    c2 = consumer(b2.endpoint, "g", "Durable")
    again = receive_all(c2, 8)
    assert {m.message_id for m in again} == set(ids) - acked, "exactly the un-acked messages come back"
    assert all(m.delivery_attempt == 2 for m in again)
    for m in again:
        c2.ack(m)
    assert c2.receive(32, 30) == []


def test_push_consumer_consumes_everything(tmp_path, broker_factory, clients):
    import threading

    from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, MessageListener,
                          PushConsumer)
    producer, _consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Pushed", 4)
    b = broker_factory(root, env=SMALL)
    p = producer(b.endpoint, ["Pushed"])
    ids = {p.send(msg("Pushed", b"p-%d" % i)).message_id for i in range(30)}
    seen, done = set(), threading.Event()
    lock = threading.Lock()

    class Listener(MessageListener):
        def consume(self, message):
            with lock:
                seen.add(message.message_id)
                if seen >= ids:
                    done.set()
            return ConsumeResult.SUCCESS

    pc = start(lambda: PushConsumer(ClientConfiguration(b.endpoint, Credentials(), request_timeout=REQUEST_TIMEOUT_S),
                                    "pushers", Listener(), {"Pushed": FilterExpression()}))
    try:
        assert done.wait(patience()), f"push consumer saw {len(seen)} of {len(ids)}"
    finally:
        pc.shutdown()


def test_a_resent_message_id_is_stored_once(tmp_path, broker_factory):
    import grpc

    from tidemq.protocol.stubs import pb, sgrpc, spb
    root = str(tmp_path / "store")
    make_topic(root, "Once", 1)
    b = broker_factory(root, env=SMALL)
    m = pb.Message(topic=pb.Resource(name="Once"), body=b"x",
                   system_properties=pb.SystemProperties(message_id="01ABC", message_type=pb.MessageType.NORMAL))
    with grpc.insecure_channel(b.endpoint) as ch:
        stub = sgrpc.MessagingServiceStub(ch)
        r1 = stub.SendMessage(spb.SendMessageRequest(messages=[m]), timeout=REQUEST_TIMEOUT_S)
        r2 = stub.SendMessage(spb.SendMessageRequest(messages=[m]), timeout=REQUEST_TIMEOUT_S)   # the client's retry
    assert r1.status.code == r2.status.code == pb.Code.OK and r1.entries[0].offset == r2.entries[0].offset
    b.stop()
    assert len(stored(root, "Once")) == 1


# In order: FIFO consumer groups -----------------------------------------------------------

ORDERED_ENV = {**SMALL, "TIDEMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH", "TIDEMQ_FIFO_CONSUMER_GROUPS": "ordered,ordered-push"}


def test_fifo_group_gets_each_message_group_in_order_across_expiry_and_kill9(tmp_path, broker_factory, clients):
    from tidemq.broker.wire import fifo_queue
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Ordered", 4)
    groups = ("A", "B", "D")
    assert len({fifo_queue(g, 4) for g in groups}) == 3, "one queue per message group here"
    b = broker_factory(root, env=ORDERED_ENV)
    p = producer(b.endpoint, ["Ordered"])
    for i in range(4):
        for g in groups:
            p.send(msg("Ordered", f"{g}-{i}".encode(), group=g))
    c = consumer(b.endpoint, "ordered", "Ordered")
    seen = []                                  # (body, delivery attempt), in the order handed out

    def take(cons, batch):
        got = receive_some(cons, batch)
        seen.extend((m.body.decode(), m.delivery_attempt) for m in got)
        return got

    heads = take(c, 1) + take(c, 1) + take(c, 1)
    assert sorted(m.body for m in heads) == [b"A-0", b"B-0", b"D-0"], "the head of each message group"
    assert c.receive(8, 30) == [], "every group has a message in flight: nothing more"
    a0 = next(m for m in heads if m.body == b"A-0")
    c.ack(a0)
    [a1] = take(c, 1)
    assert a1.body == b"A-1" and a1.delivery_attempt == 1, "after the ack, the next of that group"
    assert c.receive(8, 30) == [], "A-1 in flight holds A-2"
    c.change_invisible_duration(a1, 1)         # A-1's time runs out (B-0 and D-0 stay invisible)
    [again] = take(c, 1)
    assert (again.body, again.delivery_attempt) == (b"A-1", 2), "the held-up message first, attempt + 1"
    c.ack(again)
    [a2] = take(c, 1)
    assert a2.body == b"A-2"
    for m in heads:
        if m.body != b"A-0":
            c.ack(m)
    c.change_invisible_duration(a2, 1)         # in flight at the kill, visible again 1 s later
    b.stop(signal.SIGKILL)
    c.shutdown()
    b2 = broker_factory(root, env=ORDERED_ENV)
    c2 = consumer(b2.endpoint, "ordered", "Ordered")
    left = 8                                   # A-2 again, A-3, B-1..3, D-1..3
    while left:
        got = take(c2, 32)
        left -= len(got)
        for m in got:
            c2.ack(m)
    assert c2.receive(32, 30) == []
    for g in groups:
        mine = [(int(body.split("-")[1]), attempt) for body, attempt in seen if body.startswith(g + "-")]
        assert [i for i, _ in mine] == sorted(i for i, _ in mine), f"group {g} out of order: {mine}"
        assert {i for i, _ in mine} == {0, 1, 2, 3}
    assert [a for body, a in seen if body == "A-2"] == [1, 2], "in flight at the kill: delivered again, first"


def test_fifo_push_consumer_keeps_order_and_forwards_a_failing_message_to_the_dlq(tmp_path, broker_factory,
                                                                                  clients):
    import threading

    from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, MessageListener,
                          PushConsumer)
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "OrderedPush", 4)
    # 2 deliveries (retry_max 1): settings give the push consumer max_attempts 2, so one local retry (1 s)
    # then the forward
    b = broker_factory(root, env={**ORDERED_ENV, "TIDEMQ_DELIVERY_ATTEMPTS_MAX": "2"})
    p = producer(b.endpoint, ["OrderedPush"])
    ids = {}
    for i in range(4):
        for g in ("A", "B"):
            ids[f"{g}-{i}"] = p.send(msg("OrderedPush", f"{g}-{i}".encode(), group=g)).message_id
    consumed, done, lock = [], threading.Event(), threading.Lock()

    class Listener(MessageListener):
        def consume(self, message):
            body = message.body.decode()
            with lock:
                consumed.append(body)
                if {"A-3", "B-3"} <= set(consumed):
                    done.set()
            return ConsumeResult.FAILURE if body == "A-1" else ConsumeResult.SUCCESS

    pc = start(lambda: PushConsumer(ClientConfiguration(b.endpoint, Credentials(), request_timeout=REQUEST_TIMEOUT_S),
                                    "ordered-push", Listener(), {"OrderedPush": FilterExpression()}))
    try:
        assert pc.fifo, "the Telemetry settings said subscription.fifo"
        assert done.wait(patience()), f"consumed so far: {consumed}"
    finally:
        pc.shutdown()
    assert [x for x in consumed if x.startswith("A")] == ["A-0", "A-1", "A-1", "A-2", "A-3"]
    assert [x for x in consumed if x.startswith("B")] == ["B-0", "B-1", "B-2", "B-3"]
    dlq = consumer(b.endpoint, "dlq-reader", "%DLQ%ordered-push")
    dead = receive_all(dlq, 1)
    assert [(m.body, m.message_id) for m in dead] == [(b"A-1", ids["A-1"])]
    b.stop()
    from tidemq.broker.consume.pop_state import PopState
    from tidemq.broker.state.layout import state_dir
    from tidemq.io import OsFileIO
    ps = PopState(OsFileIO(), state_dir(root))
    ps.open()
    try:
        assert not any(st.inflight for (g, _t, _q), st in ps.queues.items() if g == "ordered-push"), \
            "forwarded means acked: nothing of the group is left in flight"
    finally:
        ps.close()
