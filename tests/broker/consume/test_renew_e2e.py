"""Auto-renewal with the official PushConsumer (it receives with auto_renew and no invisible
time): while a listener works on a message, the broker keeps renewing it for that client, and it
is consumed once, in a FIFO group (order kept) and in a plain one.

The listener works until the broker has renewed its message twice (renewals are pop journal
lines, op ``rnw``, written before anything else happens to the message), however long that
takes; invisible times are a minute, so no stall of this machine makes a message come back
meanwhile. What a renewal does to redelivery (none while the client lives, back once it is gone,
renew_max) is checked on a manual clock in tests/broker/test_renew.py."""

import os
import threading
from collections import Counter

import pytest

from tidemq.broker.state import journal
from tidemq.broker.state.layout import state_dir

from ...support.brokers import SMALL, make_topic
from ...support.official import REQUEST_TIMEOUT_S, msg, start
from ...support.wait import patience, wait_until

# renewed when less than 59 s of its 60 s are left: about every second, for the client that has it
ENV = {**SMALL, "TIDEMQ_FIFO_CONSUMER_GROUPS": "slow-fifo",
       "TIDEMQ_INVISIBLE_DURATION_DEFAULT_S": "60", "TIDEMQ_AUTO_RENEW_AHEAD_S": "59",
       "TIDEMQ_AUTO_RENEW_STEP_S": "60", "TIDEMQ_AUTO_RENEW_CHECK_INTERVAL_MS": "100"}


def renewals(root, group) -> Counter:
    """(topic, queue, offset) -> renewals for a client, from the broker's pop journal."""
    out = Counter()
    try:
        with open(os.path.join(state_dir(root), "pop", "journal"), "rb") as f:
            changes = journal.records(f.read())           # a torn last line is left out
    except FileNotFoundError:
        return out
    for r in changes:
        if r["op"] == "rnw" and r["g"] == group and r["c"]:
            out[(r["t"], r["q"], r["o"])] += 1
    return out


@pytest.mark.parametrize("group", ["slow-fifo", "slow-plain"])
def test_a_slow_push_listener_gets_its_message_renewed_and_no_redelivery(tmp_path, broker_factory, clients, group):
    from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, MessageListener,
                          PushConsumer)
    producer, _ = clients
    root = str(tmp_path / "store")
    make_topic(root, "Slow", 2)
    b = broker_factory(root, env=ENV)
    p = producer(b.endpoint, ["Slow"])
    for body in ("A-0", "A-1", "B-0"):
        p.send(msg("Slow", body.encode(), group=body[0]))
    consumed, lock, done = [], threading.Lock(), threading.Event()
    renewed_while_working = []

    class Listener(MessageListener):
        def consume(self, message):
            body = message.body.decode()
            with lock:
                consumed.append((body, message.delivery_attempt))
            if body == "A-0":                      # works until the broker renewed it twice
                got = wait_until(lambda: max(renewals(root, group).values(), default=0) >= 2,
                                 "two renewals of the message being consumed")
                renewed_while_working.append(got)
            with lock:
                if {"A-0", "A-1", "B-0"} <= {b for b, _ in consumed}:
                    done.set()
            return ConsumeResult.SUCCESS

    pc = start(lambda: PushConsumer(ClientConfiguration(b.endpoint, Credentials(), request_timeout=REQUEST_TIMEOUT_S),
                                    group, Listener(), {"Slow": FilterExpression()}))
    try:
        assert pc.fifo == (group == "slow-fifo")
        assert done.wait(patience()), f"consumed so far: {consumed}"
    finally:
        pc.shutdown()
    assert renewed_while_working == [True], "the listener saw its message renewed"
    assert sorted(consumed) == [("A-0", 1), ("A-1", 1), ("B-0", 1)], "each once, never delivered again"
    if group == "slow-fifo":
        assert [x for x, _ in consumed if x.startswith("A")] == ["A-0", "A-1"]
