"""The official RocketMQ 5 Python client (rocketmq-python-client) in tests: messages, receiving
until enough came, and the ``clients`` fixture (producers and simple consumers, shut down after
the test).

Invisible times: a message a test receives and then acks, changes or compares must not come
back meanwhile because the machine stalled, so receives default to ``LONG_INVISIBLE_S``; a
test that wants a redelivery asks for a short invisible time on the messages it never acks (or
shortens one with change_invisible_duration) and waits for the redelivery, however long it
takes.
"""

from __future__ import annotations

import time

import pytest

from .wait import PATIENCE_S, patience, ran_out

LONG_INVISIBLE_S = 300          # no stall makes a message received with it come back during a test
REQUEST_TIMEOUT_S = 30          # the client's deadline per call (its default is 3 s)


def msg(topic, body, tag=None, keys=None, group=None, props=None):
    from rocketmq import Message
    m = Message()
    m.topic = topic
    m.body = body
    if tag:
        m.tag = tag
    if keys:
        m.keys = keys
    if group:
        m.message_group = group
    for k, v in (props or {}).items():
        m.add_property(k, v)
    return m


def telemetry_open(client) -> bool:
    """Whether an official client has its Telemetry stream to the broker (its settings, the
    broker's commands: orphan checks, FIFO settings of push consumers)."""
    return any(ch.telemetry_stream_stream_call is not None for ch in client.rpc_client.channels.values())


def start(make, attempts: int = 3):
    """``make()`` -> an official client (Producer, SimpleConsumer, PushConsumer), started, with its
    Telemetry stream open.

    rocketmq-python-client 5.x has a startup race of its own: it starts the first route query on
    its I/O loop and then adds the query's done-callback; when the query has already finished by
    then (the starting thread was descheduled: a busy CPU), the callback runs in the starting
    thread, which has no asyncio loop, so the Telemetry stream is never made ("create
    stream_steam_call ... no current event loop in thread 'MainThread'" in its log) and a push
    consumer fails with "failed to receive initial settings from server within 10s". Only that
    is tried again, with a new client; any other failure is raised as it is."""
    for _ in range(attempts):
        c = make()
        try:
            c.startup()
        except Exception as e:  # noqa: BLE001 - told apart just below
            if "failed to receive initial settings" not in f"{e} {e.__context__}":
                raise
        else:
            if telemetry_open(c):
                return c
        try:
            c.shutdown()
        except Exception:  # noqa: BLE001 - a client that did not start
            pass
    raise AssertionError(f"the official client did not start with a Telemetry stream in {attempts} attempts")


def receive_all(consumer, want, invisible_s=LONG_INVISIBLE_S, timeout_s=PATIENCE_S):
    """Receive until ``want`` messages came, asking each time for at most the ones still missing
    (a long poll answers as soon as there is something); AssertionError if they did not come
    within ``timeout_s``."""
    got = []
    limit_s = patience(timeout_s)
    end = time.monotonic() + limit_s
    while len(got) < want:
        assert time.monotonic() < end, \
            f"received {len(got)} of {want} message(s) in {limit_s:.0f} s{ran_out(limit_s)}: {got}"
        got += consumer.receive(min(want - len(got), 32), invisible_s)
    return got


def receive_some(consumer, batch, invisible_s=LONG_INVISIBLE_S, timeout_s=PATIENCE_S):
    """The first non-empty answer of receive(batch, invisible_s)."""
    limit_s = patience(timeout_s)
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        got = consumer.receive(batch, invisible_s)
        if got:
            return got
    raise AssertionError(f"nothing received in {limit_s:.0f} s{ran_out(limit_s)}")


@pytest.fixture
def clients():
    """(producer(endpoint, topics, request_timeout_s=30), consumer(endpoint, group, topic, await_s=1)),
    all shut down after the test."""
    made = []

    def producer(endpoint, topics, request_timeout_s=REQUEST_TIMEOUT_S, checker=None):
        from rocketmq import ClientConfiguration, Credentials, Producer
        conf = ClientConfiguration(endpoint, Credentials(), request_timeout=int(request_timeout_s))   # an int: it
        # becomes a protobuf Duration's seconds
        p = start(lambda: Producer(conf, tuple(topics)) if checker is None else Producer(conf, tuple(topics), checker))
        made.append(p)
        return p

    def consumer(endpoint, group, topic, await_s=1, request_timeout_s=REQUEST_TIMEOUT_S):
        from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
        conf = ClientConfiguration(endpoint, Credentials(), request_timeout=int(request_timeout_s))
        c = start(lambda: SimpleConsumer(conf, group, {topic: FilterExpression("*")}, await_duration=await_s))
        made.append(c)
        return c

    yield producer, consumer
    for c in made:
        try:
            c.shutdown()
        except Exception:  # noqa: BLE001 - a client of a broker the test killed
            pass
