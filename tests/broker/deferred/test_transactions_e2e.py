"""TRANSACTION messages end to end with the official Python client against `tidemq serve`:
commit, rollback, and the orphan check across a broker killed with -9.

The Python producer re-opens its Telemetry stream only ~300 s after a broker restart
(docs/broker-protocol.md P10), too slow for a test: across the restart, decisions are
checked for durability (the committed message once, the rolled-back one never), and the
orphan check is answered by a fresh producer of the topic started after the restart.
"""

import signal
import threading
import time

import pytest

from ..consume.test_receive_e2e import clients, receive_all  # noqa: F401 - a fixture
from ..produce.test_send_message_e2e import SMALL, make_topic, msg


class Checker:
    """A TransactionChecker answering from a table by message id (UNSPECIFIED otherwise)."""

    def __init__(self, answers=None):
        from rocketmq import TransactionChecker

        outer = self
        self.answers = answers or {}
        self.asked = []
        self.event = threading.Event()

        class _C(TransactionChecker):
            def check(self, message):
                from rocketmq import TransactionResolution
                outer.asked.append(message.message_id)
                outer.event.set()
                return outer.answers.get(message.message_id, TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED)

        self.checker = _C()


@pytest.fixture
def txn_producer():
    made = []

    def make(endpoint, topics, checker):
        from rocketmq import ClientConfiguration, Credentials, Producer
        p = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=5), tuple(topics), checker.checker)
        p.startup()
        made.append(p)
        return p

    yield make
    for p in made:
        try:
            p.shutdown()
        except Exception:  # noqa: BLE001 - a client of a broker the test killed
            pass


def half(p, topic, body):
    tx = p.begin_transaction()
    r = p.send(msg(topic, body), tx)
    assert r.transaction_id, "a TRANSACTION send answers a transaction id"
    return tx, r


def test_commit_makes_the_message_visible_and_rollback_discards_it(tmp_path, broker_factory, clients,  # noqa: F811
                                                                   txn_producer):
    _producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Pay", 2)
    b = broker_factory(root, env=SMALL)
    p = txn_producer(b.endpoint, ["Pay"], Checker())
    c = consumer(b.endpoint, "g", "Pay")
    tx1, r1 = half(p, "Pay", b"commit me")
    tx2, r2 = half(p, "Pay", b"roll me back")
    assert c.receive(8, 30) == [], "half messages are invisible"
    tx1.commit()
    tx2.rollback()
    got = receive_all(c, 1, seconds=5)
    assert [(m.message_id, m.body) for m in got] == [(r1.message_id, b"commit me")]
    c.ack(got[0])
    assert c.receive(8, 30) == [], "the rolled-back message never comes"
    tx1.commit()                                  # a resent commit is answered OK, stored once
    with pytest.raises(Exception, match="already committed"):
        tx1.rollback()
    assert c.receive(8, 30) == []


def test_decisions_survive_kill9_and_an_orphan_is_checked_with_a_producer(tmp_path, broker_factory,
                                                                          clients, txn_producer):  # noqa: F811
    from rocketmq import TransactionResolution
    _producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Pay", 2)
    env = {**SMALL, "TIDEMQ_TRANSACTION_CHECK_INTERVAL_S": "1"}
    b = broker_factory(root, env=env)
    first = Checker()                             # "still running": UNSPECIFIED, checked again later
    p = txn_producer(b.endpoint, ["Pay"], first)
    tx1, r1 = half(p, "Pay", b"committed")
    tx2, _ = half(p, "Pay", b"rolled back")
    _tx3, r3 = half(p, "Pay", b"orphan")
    tx1.commit()
    tx2.rollback()
    assert first.event.wait(10), "an unresolved half message is checked with its producer"
    assert set(first.asked) == {r3.message_id}, "only the undecided one"
    b.stop(signal.SIGKILL)
    p.shutdown()

    b2 = broker_factory(root, env=env)
    c = consumer(b2.endpoint, "g", "Pay")
    got = receive_all(c, 1, seconds=5)
    assert [m.message_id for m in got] == [r1.message_id], "the commit survived, the rollback too"
    c.ack(got[0])
    second = Checker({r3.message_id: TransactionResolution.COMMIT})
    txn_producer(b2.endpoint, ["Pay"], second)    # a producer of the topic: the broker asks it
    orphan = receive_all(c, 1, seconds=10)
    assert [(m.message_id, m.body) for m in orphan] == [(r3.message_id, b"orphan")]
    assert second.asked and set(second.asked) == {r3.message_id}
    c.ack(orphan[0])
    time.sleep(1.5)                               # a check interval: nothing is asked or delivered again
    assert c.receive(8, 30) == [] and set(second.asked) == {r3.message_id}
