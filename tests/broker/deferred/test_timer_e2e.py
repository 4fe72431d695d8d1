"""DELAY messages end to end with the official Python client against `tidemq serve`: not
visible before their time, delivered once after it, and not lost when the broker is killed
with -9 (one due while it was down comes right after the start)."""

import signal
import time

from ..consume.test_receive_e2e import clients, receive_all  # noqa: F401 - a fixture
from ..produce.test_send_message_e2e import SMALL, make_topic, msg


def delayed(topic, body, due_ms):
    m = msg(topic, body)
    m.delivery_timestamp = due_ms          # epoch ms (the client puts them in Timestamp.seconds)
    return m


def now_ms():
    return int(time.time() * 1000)


def test_a_delayed_message_is_invisible_until_its_time(tmp_path, broker_factory, clients):  # noqa: F811
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Later", 2)
    b = broker_factory(root, env=SMALL)
    p = producer(b.endpoint, ["Later"])
    c = consumer(b.endpoint, "g", "Later")
    due = now_ms() + 2500
    r = p.send(delayed("Later", b"in 2.5 s", due))
    assert r.message_id
    p.send(msg("Later", b"now"))
    first = receive_all(c, 1, seconds=5)
    assert [m.body for m in first] == [b"now"]
    c.ack(first[0])
    got = receive_all(c, 1, seconds=10)
    seen_ms = now_ms()
    assert [m.body for m in got] == [b"in 2.5 s"] and got[0].message_id == r.message_id
    assert seen_ms >= due, "not before its time"
    assert seen_ms - due < 3000, "and soon after it"
    assert got[0].delivery_timestamp == due
    c.ack(got[0])
    assert c.receive(8, 30) == [], "delivered once"


def test_delayed_messages_survive_kill9_and_one_due_while_down_comes_at_start(tmp_path, broker_factory,
                                                                               clients):  # noqa: F811
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Durable", 2)
    env = {**SMALL, "TIDEMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH"}     # the timer's puts run off the event loop
    b = broker_factory(root, env=env)
    p = producer(b.endpoint, ["Durable"])
    soon = [p.send(delayed("Durable", b"soon-%d" % i, now_ms() + 1500)).message_id for i in range(3)]
    late_due = now_ms() + 6000
    late = p.send(delayed("Durable", b"late", late_due)).message_id
    b.stop(signal.SIGKILL)
    p.shutdown()
    time.sleep(2.0)                                   # the first three fall due while the broker is down
    b2 = broker_factory(root, env=env)
    started = time.time()
    c = consumer(b2.endpoint, "g", "Durable")
    got = receive_all(c, 3, seconds=10)
    assert sorted(m.message_id for m in got) == sorted(soon)
    assert time.time() - started < 5, "due while down: delivered right after the start"
    for m in got:
        c.ack(m)
    assert now_ms() < late_due and c.receive(8, 30) == [], "the later one waits for its time"
    b2.stop(signal.SIGKILL)                           # killed again, with some moved and one waiting
    b3 = broker_factory(root, env=env)
    c3 = consumer(b3.endpoint, "g", "Durable")
    rest = receive_all(c3, 1, seconds=max(2.0, (late_due - now_ms()) / 1000 + 4))
    assert [m.message_id for m in rest] == [late] and now_ms() >= late_due
    c3.ack(rest[0])
    assert c3.receive(8, 30) == [], "nothing delivered twice"
