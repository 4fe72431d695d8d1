"""SQL92 filters end to end with the official Python SimpleConsumer and PushConsumer against `tidemq
serve`: only the matching messages are received, the others never come (passed for the group), and an
invalid expression is refused with the official code."""

import threading

import pytest

from ...support.brokers import SMALL, make_topic
from ...support.official import REQUEST_TIMEOUT_S, msg, receive_all, start
from ...support.wait import patience


def test_official_simple_consumer_with_a_sql92_filter(tmp_path, broker_factory, clients):
    from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, MessageListener,
                          PushConsumer, SimpleConsumer)
    from rocketmq.grpc_protocol import FilterType
    from rocketmq.v5.exception import BadRequestException
    producer, _consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Orders", 2)
    b = broker_factory(root, env=SMALL)
    p = producer(b.endpoint, ["Orders"])
    want, us = set(), set()
    for i in range(30):
        region = ("eu", "us", "apac")[i % 3]
        r = p.send(msg("Orders", b"o%d" % i, tag="paid" if i % 2 else "new",
                       props={"region": region, "amount": str(i * 10)}))
        if region == "eu" and i * 10 > 100 and i % 2:
            want.add(r.message_id)
        if region == "us" and i * 10 > 50:
            us.add(r.message_id)
    conf = ClientConfiguration(b.endpoint, Credentials(), request_timeout=REQUEST_TIMEOUT_S)
    made = []
    try:
        c = start(lambda: SimpleConsumer(conf, "eu-paid", {"Orders": FilterExpression(
            "region = 'eu' AND amount > 100 AND TAGS = 'paid'", FilterType.SQL)}, await_duration=1))
        made.append(c)
        got = receive_all(c, len(want))
        assert {m.message_id for m in got} == want
        assert all(m.properties["region"] == "eu" and int(m.properties["amount"]) > 100 for m in got)
        for m in got:
            c.ack(m)
        assert c.receive(32, 30) == [], "what the filter does not match never comes"
        bad = start(lambda: SimpleConsumer(conf, "bad", {"Orders": FilterExpression("amount >", FilterType.SQL)},
                                           await_duration=1))
        made.append(bad)
        with pytest.raises(BadRequestException, match="position 8"):
            bad.receive(8, 30)
        # the push consumer's path (ReceiveMessage with auto_renew) filters the same way
        pushed, enough = [], threading.Event()

        class Listener(MessageListener):
            def consume(self, message):
                pushed.append(message)
                if len(pushed) >= len(us):
                    enough.set()
                return ConsumeResult.SUCCESS

        pc = start(lambda: PushConsumer(conf, "us-push", Listener(), {"Orders": FilterExpression(
            "region IN ('us') AND NOT (amount BETWEEN 0 AND 50)", FilterType.SQL)}))
        made.append(pc)
        assert enough.wait(patience()), f"pushed so far: {[m.message_id for m in pushed]}"
        assert {m.message_id for m in pushed} == us
    finally:
        for x in made:
            x.shutdown()
