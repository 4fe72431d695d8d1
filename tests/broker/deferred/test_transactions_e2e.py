"""TRANSACTION messages end to end with the official Python client against `tidemq serve`:
commit, rollback, and the orphan check across a broker killed with -9.

The Python producer re-opens its Telemetry stream only ~300 s after a broker restart
(docs/broker-protocol.md P10), too slow for a test: across the restart, decisions are
checked for durability (the committed message once, the rolled-back one never), and the
orphan check is answered by a fresh producer of the topic started after the restart.
"""

import signal
import threading

import pytest

from ...support.brokers import SMALL, make_topic
from ...support.official import msg, receive_all
from ...support.wait import wait_until


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


def half(p, topic, body):
    tx = p.begin_transaction()
    r = p.send(msg(topic, body), tx)
    assert r.transaction_id, "a TRANSACTION send answers a transaction id"
    return tx, r


def test_commit_makes_the_message_visible_and_rollback_discards_it(tmp_path, broker_factory, clients):
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Pay", 2)
    b = broker_factory(root, env=SMALL)
    p = producer(b.endpoint, ["Pay"], checker=Checker().checker)
    c = consumer(b.endpoint, "g", "Pay")
    tx1, r1 = half(p, "Pay", b"commit me")
    tx2, r2 = half(p, "Pay", b"roll me back")
    assert c.receive(8, 30) == [], "half messages are invisible"
    tx1.commit()
    tx2.rollback()
    got = receive_all(c, 1)
    assert [(m.message_id, m.body) for m in got] == [(r1.message_id, b"commit me")]
    c.ack(got[0])
    assert c.receive(8, 30) == [], "the rolled-back message never comes"
    tx1.commit()                                  # a resent commit is answered OK, stored once
    with pytest.raises(Exception, match="already committed"):
        tx1.rollback()
    assert c.receive(8, 30) == []


def test_decisions_survive_kill9_and_an_orphan_is_checked_with_a_producer(tmp_path, broker_factory, clients):
    """Checks come every second here; one may reach a half message before its decision does (a
    slow machine): answered UNSPECIFIED, it changes nothing. That decided half messages are not
    checked is checked on a manual clock (tests/broker/test_transaction.py)."""
    from rocketmq import TransactionResolution
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Pay", 2)
    env = {**SMALL, "TIDEMQ_TRANSACTION_CHECK_INTERVAL_S": "1"}
    b = broker_factory(root, env=env)
    first = Checker()                             # "still running": UNSPECIFIED, checked again later
    p = producer(b.endpoint, ["Pay"], checker=first.checker)
    tx1, r1 = half(p, "Pay", b"committed")
    tx2, r2 = half(p, "Pay", b"rolled back")
    _tx3, r3 = half(p, "Pay", b"orphan")
    tx1.commit()
    tx2.rollback()
    wait_until(lambda: r3.message_id in first.asked, "the undecided half message to be checked with its producer")
    assert set(first.asked) <= {r1.message_id, r2.message_id, r3.message_id}
    b.stop(signal.SIGKILL)
    p.shutdown()

    b2 = broker_factory(root, env=env)
    c = consumer(b2.endpoint, "g", "Pay")
    got = receive_all(c, 1)
    assert [m.message_id for m in got] == [r1.message_id], "the commit survived, the rollback too"
    c.ack(got[0])
    second = Checker({r3.message_id: TransactionResolution.COMMIT})
    p2 = producer(b2.endpoint, ["Pay"], checker=second.checker)    # a producer of the topic: the broker asks it
    orphan = receive_all(c, 1)
    assert [(m.message_id, m.body) for m in orphan] == [(r3.message_id, b"orphan")]
    assert r3.message_id in second.asked
    c.ack(orphan[0])
    # a half message sent now is checked in a round after the orphan's commit: by then nothing else
    # has been asked but the orphan, and the orphan is not delivered again
    _tx4, r4 = half(p2, "Pay", b"sentinel")
    wait_until(lambda: r4.message_id in second.asked, "a check round after the orphan's commit")
    assert set(second.asked) == {r3.message_id, r4.message_id}
    assert c.receive(8, 30) == [], "the orphan once; the sentinel is undecided"
