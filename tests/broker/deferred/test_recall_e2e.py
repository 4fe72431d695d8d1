"""RecallMessage end to end with the official Python client (Producer.recall_message with the
SendReceipt's recall_handle) against `tidemq serve`: a recalled DELAY message is never delivered,
not even after the broker is killed with -9 right after the answer; one already delivered answers
ILLEGAL_DELIVERY_TIME. Timer-level cases: test_recall.py."""

import signal
import time

import pytest

from tidemq.protocol.stubs import pb

from ...support.brokers import SMALL, make_topic
from ...support.official import LONG_INVISIBLE_S, msg, receive_all
from .test_timer_e2e import delayed, now_ms


def test_a_recalled_message_is_never_delivered_and_a_delivered_one_says_so(tmp_path, broker_factory, clients):
    from rocketmq.v5.exception import BadRequestException
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Later", 2)
    b = broker_factory(root, env=SMALL)
    p = producer(b.endpoint, ["Later"])
    c = consumer(b.endpoint, "g", "Later")
    due = now_ms() + 6_000                                  # room for the recall before it on a busy machine
    withdrawn = p.send(delayed("Later", b"withdrawn", due))
    control = p.send(delayed("Later", b"control", due + 1000))      # due after it: moved after it
    assert withdrawn.recall_handle and control.recall_handle and withdrawn.recall_handle != control.recall_handle
    assert p.send(msg("Later", b"now")).recall_handle is None, "only a waiting DELAY message has one"
    assert p.recall_message("Later", withdrawn.recall_handle) == withdrawn.message_id
    assert p.recall_message("Later", withdrawn.recall_handle) == withdrawn.message_id, "again: the same answer"
    with pytest.raises(BadRequestException) as e:
        p.recall_message("Later", "not-a-handle")
    assert e.value.code == pb.Code.BAD_REQUEST
    b.stop(signal.SIGKILL)                                  # the answer said OK: it stays recalled
    p.shutdown()
    c.shutdown()
    b = broker_factory(root, env=SMALL)
    p = producer(b.endpoint, ["Later"])
    c = consumer(b.endpoint, "g", "Later")
    got = []
    while b"control" not in [m.body for m in got]:          # the timer moves in time order: by now the
        for m in receive_all(c, 1):                         # withdrawn one would have come
            got.append(m)
            c.ack(m)
    assert sorted(m.body for m in got) == [b"control", b"now"]
    assert c.receive(8, LONG_INVISIBLE_S) == [], "never delivered"
    with pytest.raises(BadRequestException) as e:
        p.recall_message("Later", control.recall_handle)
    assert e.value.code == pb.Code.ILLEGAL_DELIVERY_TIME and "delivered" in str(e.value)
    assert time.time() * 1000 >= due
