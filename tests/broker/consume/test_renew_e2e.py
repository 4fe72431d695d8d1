"""Auto-renewal with the official PushConsumer (it receives with auto_renew and no invisible
time): a listener that works several invisible times long gets no redelivery meanwhile, in a
FIFO group (order kept) and in a plain one. Short durations through the broker's settings."""

import threading
import time

import pytest

from .test_receive_e2e import clients  # noqa: F401 - a fixture
from ..produce.test_send_message_e2e import SMALL, make_topic, msg

SLOW_S = 3.0
ENV = {**SMALL, "TIDEMQ_FIFO_CONSUMER_GROUPS": "slow-fifo",
       "TIDEMQ_INVISIBLE_DURATION_DEFAULT_S": "1", "TIDEMQ_AUTO_RENEW_AHEAD_S": "0.5",
       "TIDEMQ_AUTO_RENEW_STEP_S": "1", "TIDEMQ_AUTO_RENEW_CHECK_INTERVAL_MS": "100"}


@pytest.mark.parametrize("group", ["slow-fifo", "slow-plain"])
def test_a_slow_push_listener_gets_no_redelivery_while_it_works(tmp_path, broker_factory, clients, group):
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

    class Listener(MessageListener):
        def consume(self, message):
            body = message.body.decode()
            with lock:
                consumed.append((body, message.delivery_attempt))
            if body == "A-0":
                time.sleep(SLOW_S)                     # three invisible times
            with lock:
                if {"A-0", "A-1", "B-0"} <= {b for b, _ in consumed}:
                    done.set()
            return ConsumeResult.SUCCESS

    pc = PushConsumer(ClientConfiguration(b.endpoint, Credentials(), request_timeout=5), group, Listener(),
                      {"Slow": FilterExpression()})
    pc.startup()
    try:
        assert pc.fifo == (group == "slow-fifo")
        assert done.wait(30), f"consumed so far: {consumed}"
        time.sleep(1.5)                                # a redelivery would come within an invisible time
    finally:
        pc.shutdown()
    assert sorted(consumed) == [("A-0", 1), ("A-1", 1), ("B-0", 1)], "each once, never delivered again"
    if group == "slow-fifo":
        assert [x for x, _ in consumed if x.startswith("A")] == ["A-0", "A-1"]
