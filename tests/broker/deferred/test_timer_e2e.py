"""DELAY messages end to end with the official Python client against `tidemq serve`: not
visible before their time, delivered once after it, and not lost when the broker is killed
with -9 (one due while it was down comes after the start).

Every delivery is checked against its own due time when it arrives, however late the machine
lets it arrive; the timer's moves at exact times are checked on a manual clock
(tests/broker/test_timer.py)."""

import signal
import time

from ...support.brokers import SMALL, make_topic
from ...support.official import LONG_INVISIBLE_S, msg, receive_all
from ...support.wait import patience, ran_out


def delayed(topic, body, due_ms):
    m = msg(topic, body)
    m.delivery_timestamp = due_ms          # epoch ms (the client puts them in Timestamp.seconds)
    return m


def now_ms():
    return int(time.time() * 1000)


def receive_until(c, want: set, seen: dict) -> None:
    """Receive and ack until every id of ``want`` is in ``seen`` (id -> ms when it arrived); a
    message arriving twice fails."""
    limit_s = patience()
    end = time.monotonic() + limit_s
    while not want <= set(seen):
        assert time.monotonic() < end, f"waited {limit_s:.0f} s for {want - set(seen)}{ran_out(limit_s)}"
        for m in c.receive(8, LONG_INVISIBLE_S):
            assert m.message_id not in seen, f"{m.body!r} delivered twice"
            seen[m.message_id] = now_ms()
            c.ack(m)


def test_a_delayed_message_is_invisible_until_its_time(tmp_path, broker_factory, clients):
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
    got, seen_ms = [], []
    while len(got) < 2:
        [m] = receive_all(c, 1)
        got.append(m)
        seen_ms.append(now_ms())
        c.ack(m)
    assert sorted(m.body for m in got) == [b"in 2.5 s", b"now"]
    i = next(i for i, m in enumerate(got) if m.body == b"in 2.5 s")
    assert got[i].message_id == r.message_id and got[i].delivery_timestamp == due
    assert seen_ms[i] >= due, "not before its time"
    assert c.receive(8, 30) == [], "delivered once"


def test_delayed_messages_survive_kill9_and_one_due_while_down_comes_at_start(tmp_path, broker_factory,
                                                                               clients):
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Durable", 2)
    env = {**SMALL, "TIDEMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH"}     # the timer's puts run off the event loop
    b = broker_factory(root, env=env)
    p = producer(b.endpoint, ["Durable"])
    soon_due = now_ms() + 1500
    soon = {p.send(delayed("Durable", b"soon-%d" % i, soon_due)).message_id for i in range(3)}
    late_due = now_ms() + 6000
    late = p.send(delayed("Durable", b"late", late_due)).message_id
    due = {**{i: soon_due for i in soon}, late: late_due}
    b.stop(signal.SIGKILL)
    p.shutdown()
    time.sleep(max(0.0, (soon_due - now_ms()) / 1000 + 0.1))   # the first three fall due while it is down
    b2 = broker_factory(root, env=env)
    c = consumer(b2.endpoint, "g", "Durable")
    seen: dict[str, int] = {}
    receive_until(c, soon, seen)                      # acked as they come
    b2.stop(signal.SIGKILL)                           # killed again, with some moved and (normally) one waiting
    b3 = broker_factory(root, env=env)
    c3 = consumer(b3.endpoint, "g", "Durable")
    receive_until(c3, set(due), seen)                 # an ack before the kill holds: nothing comes twice
    assert all(seen[i] >= due[i] for i in due), "none before its time"
    assert c3.receive(8, 30) == [], "nothing delivered twice"
