"""`tidemq group create|update|delete` against a real broker, and what the official Python client sees
of them: the push consumer is told the group's policy and max_attempts = retry_max + 1, and a
message a simple consumer never acks is delivered exactly retry_max + 1 times, then dead-lettered."""

import json

from ..support.brokers import topic_end
from ..support.cli import run
from ..support.official import REQUEST_TIMEOUT_S, clients, msg, receive_all, receive_some, start  # noqa: F401
from ..support.wait import wait_until


def test_group_settings_commands_and_what_the_official_client_gets(broker, clients):  # noqa: F811
    from rocketmq import ClientConfiguration, ConsumeResult, Credentials, FilterExpression, MessageListener, PushConsumer
    ep = ("--endpoint", broker.endpoint)
    r = run("group", "create", "few", "--retry-max", 2, "--retry-policy", "customized:1s,2s", *ep)
    assert r.exit_code == 0 and "retry_max 2 (3 deliveries" in r.output and "customized:1s,2s" in r.output, r.output
    r = run("group", "create", "few", *ep)
    assert r.exit_code == 1 and "has settings already" in r.output
    assert run("group", "create", "bad", "--retry-policy", "linear:1", *ep).exit_code == 2
    assert run("group", "update", "few", *ep).exit_code == 2, "nothing to change"
    assert run("group", "update", "nobody", "--orderly", *ep).exit_code == 1
    r = run("group", "status", "few", *ep)
    assert r.exit_code == 0 and "settings (its own): retry_max 2" in r.output, r.output

    producer, consumer = clients
    p = producer(broker.endpoint, ["Retry"])

    class Listener(MessageListener):
        def consume(self, message):
            return ConsumeResult.SUCCESS

    pc = start(lambda: PushConsumer(ClientConfiguration(broker.endpoint, Credentials(),
                                                        request_timeout=REQUEST_TIMEOUT_S),
                                    "few", Listener(), {"Retry": FilterExpression()}))
    try:
        policy = pc._PushConsumer__consumption.backoff_policy      # what Telemetry told the client
        assert policy.max_attempts == 3 and policy.get_next_attempt_delay(1) == 1 and not pc.fifo
    finally:
        pc.shutdown()

    mid = p.send(msg("Retry", b"poison")).message_id
    c = consumer(broker.endpoint, "few", "Retry")
    attempts = []
    while len(attempts) < 3:
        for m in receive_some(c, 8, invisible_s=1):               # never acked
            assert m.message_id == mid
            attempts.append(m.delivery_attempt)
    assert attempts == [1, 2, 3]

    def dead_lettered():
        assert c.receive(8, 1) == [], "after retry_max + 1 deliveries it is not delivered again"
        return topic_end(broker.endpoint, "%DLQ%few") == 1

    wait_until(dead_lettered, "the message to go to the dead-letter queue")
    [dead] = receive_all(consumer(broker.endpoint, "dlq-reader", "%DLQ%few"), 1)
    assert dead.message_id == mid and dead.body == b"poison"

    r = run("group", "update", "few", "--consume-disable", "--json", *ep)
    assert r.exit_code == 0 and json.loads(r.output)["settings"]["consume_enable"] is False
    assert run("group", "delete", "few", *ep).exit_code == 0
    assert run("group", "delete", "few", *ep).exit_code == 1
    r = run("group", "status", "few", *ep)
    assert "settings (the broker defaults): retry_max 15" in r.output, r.output


def test_a_groups_settings_answered_ok_survive_kill_9(tmp_path, broker_factory):
    import signal

    from ..support.brokers import SMALL
    root = str(tmp_path / "store")
    b = broker_factory(root, env=SMALL)
    assert run("group", "create", "kept", "--retry-max", 7, "--orderly", "--endpoint", b.endpoint).exit_code == 0
    b.stop(signal.SIGKILL)
    b2 = broker_factory(root, env=SMALL)
    r = run("group", "status", "kept", "--json", "--endpoint", b2.endpoint)
    assert r.exit_code == 0
    r = run("group", "update", "kept", "--consume-disable", "--json", "--endpoint", b2.endpoint)
    s = json.loads(r.output)["settings"]
    assert (s["retry_max"], s["orderly"], s["consume_enable"]) == (7, True, False), "kept across kill -9"
