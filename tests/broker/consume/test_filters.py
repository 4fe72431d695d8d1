"""Subscriptions' filters on the consumption paths, without a server: ReceiveMessage (Consumption)
and PullMessage (Pull) over a real store, with SQL92 and tag filters. A filtered-out message is
never delivered; a pull's next offset passes it; pop consumption passes it for the group."""

from __future__ import annotations

import asyncio

from tidemq.broker.consume.filters import sql_filter, subscription
from tidemq.broker.consume.group_offsets import GroupOffsets
from tidemq.broker.consume.pull import Pull
from tidemq.protocol.stubs import Code, pb, spb
from tidemq.store import Message


class Context:
    def time_remaining(self):
        return 3600.0


def _fill(store):
    for i in range(10):
        store.put(Message("T", b"m%d" % i, tags="even" if i % 2 == 0 else "odd", queue_id=0,
                          properties={"n": str(i), **({"region": "eu"} if i < 5 else {})}))


def _receive(consumption, group, expr, kind=pb.FilterType.SQL):
    async def go():
        return [r async for r in consumption.receive(spb.ReceiveMessageRequest(
            group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name="T")),
            filter_expression=pb.FilterExpression(type=kind, expression=expr), batch_size=32,
            invisible_duration={"seconds": 300}, long_polling_timeout={"seconds": 0}), Context())]
    return asyncio.run(go())


def _pull(pulls, expr, offset=0, kind=pb.FilterType.SQL):
    async def go():
        return [r async for r in pulls.pull(spb.PullMessageRequest(
            group=pb.Resource(name="p"), message_queue=pb.MessageQueue(topic=pb.Resource(name="T"), id=0),
            filter_expression=pb.FilterExpression(type=kind, expression=expr), offset=offset, batch_size=32,
            long_polling_timeout={"seconds": 0}), Context())]
    return asyncio.run(go())


def bodies(rs):
    return [r.message.body for r in rs if r.HasField("message")]


def test_receive_delivers_only_what_the_sql_filter_matches_and_passes_the_rest(world):
    store, _clock, consumption = world
    _fill(store)
    c = consumption()
    got = _receive(c, "g", "region = 'eu' AND n > 1")
    assert bodies(got) == [b"m2", b"m3", b"m4"]
    assert _receive(c, "g", "*", pb.FilterType.TAG)[0].status.code == Code.MESSAGE_NOT_FOUND, \
        "the filtered-out ones were passed for the group (acked internally), not left to come later"
    assert c.pop.state("g", "T", 0).cursor == 10
    assert bodies(_receive(c, "other", "TAGS = 'even' AND n NOT IN ('0')")) == [b"m2", b"m4", b"m6", b"m8"]


def test_an_invalid_sql_filter_is_refused_with_its_position_and_reads_nothing(world):
    store, _clock, consumption = world
    _fill(store)
    c = consumption()
    [r, *_] = _receive(c, "g", "region = 'eu' AND")
    assert r.status.code == Code.ILLEGAL_FILTER_EXPRESSION and "position 17" in r.status.message
    assert c.pop.state("g", "T", 0).cursor == 0


def test_pull_filters_by_the_filter_type_and_its_next_offset_passes_filtered_messages(world, tmp_path):
    store, _clock, consumption = world
    _fill(store)
    offsets = GroupOffsets(store.fio, str(tmp_path))
    pulls = Pull(store, offsets, asyncio.Event())
    got = _pull(pulls, "n >= 8 OR region IS NULL AND n = 5")
    assert bodies(got) == [b"m5", b"m8", b"m9"] and got[-1].next_offset == 10
    none = _pull(pulls, "n > 100")
    assert none[0].status.code == Code.MESSAGE_NOT_FOUND and none[-1].next_offset == 10, "passed, not stuck"
    # a SQL text is never read as tags (it used to be split on ||), and tags still work
    assert bodies(_pull(pulls, "TAGS = 'odd' OR TAGS = 'even'")) == [b"m%d" % i for i in range(10)]
    assert bodies(_pull(pulls, "odd || nothing", kind=pb.FilterType.TAG)) == [b"m1", b"m3", b"m5", b"m7", b"m9"]
    bad = _pull(pulls, "n >> 1")
    assert bad[0].status.code == Code.ILLEGAL_FILTER_EXPRESSION and "position 3" in bad[0].status.message


def test_a_subscription_is_parsed_once():
    a = sql_filter("x = 'once'")
    assert sql_filter("x = 'once'") is a
    sub, bad = subscription(pb.FilterExpression(type=pb.FilterType.SQL, expression="x = 'once'"))
    assert bad is None and sub.match is a and sub.tags is None


def test_a_long_stretch_the_filter_passes_is_crossed_in_steps(world, monkeypatch):
    from tidemq.broker.consume import receive
    from tidemq.store import reader
    monkeypatch.setattr(reader, "MATCH_SCAN_UNITS_MAX", 4)
    monkeypatch.setattr(receive, "FILTER_PASS_UNITS_MAX", 4)
    store, _clock, consumption = world
    for i in range(20):
        store.put(Message("T", b"no%d" % i, queue_id=0, properties={"x": "0"}))
    store.put(Message("T", b"yes", queue_id=0, properties={"x": "1"}))
    c = consumption()
    assert _receive(c, "g", "x = 1")[0].status.code == Code.MESSAGE_NOT_FOUND, "no wait: one step, then answered"
    assert c.pop.state("g", "T", 0).cursor == 4

    async def waiting():
        return [r async for r in c.receive(spb.ReceiveMessageRequest(
            group=pb.Resource(name="g"), message_queue=pb.MessageQueue(topic=pb.Resource(name="T")),
            filter_expression=pb.FilterExpression(type=pb.FilterType.SQL, expression="x = 1"), batch_size=32,
            invisible_duration={"seconds": 300}, long_polling_timeout={"seconds": 600}), _Context())]
    assert bodies(asyncio.run(waiting())) == [b"yes"], "with time to wait, it goes on step by step"


def test_a_long_stretch_of_other_tags_is_crossed_in_steps(world, monkeypatch):
    from tidemq.broker.consume import receive
    from tidemq.store import reader
    monkeypatch.setattr(reader, "FILTER_SCAN_UNITS_MAX", 4)
    monkeypatch.setattr(receive, "TAG_PASS_UNITS_MAX", 4)
    store, _clock, consumption = world
    for i in range(20):
        store.put(Message("T", b"no%d" % i, queue_id=0, tags="other"))
    store.put(Message("T", b"yes", queue_id=0, tags="wanted"))
    c = consumption()
    assert _receive(c, "g", "wanted", kind=pb.FilterType.TAG)[0].status.code == Code.MESSAGE_NOT_FOUND, \
        "no wait: one step, then answered"
    assert c.pop.state("g", "T", 0).cursor == 4

    async def waiting():
        return [r async for r in c.receive(spb.ReceiveMessageRequest(
            group=pb.Resource(name="g"), message_queue=pb.MessageQueue(topic=pb.Resource(name="T")),
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="wanted"), batch_size=32,
            invisible_duration={"seconds": 300}, long_polling_timeout={"seconds": 600}), _Context())]
    assert bodies(asyncio.run(waiting())) == [b"yes"], "with time to wait, it goes on step by step"


class _Context:
    def time_remaining(self):
        return 3600.0


def test_a_tags_only_sql_expression_is_a_tag_filter():
    sub, _ = subscription(pb.FilterExpression(type=pb.FilterType.SQL, expression="TAGS IN ('b', 'a')"))
    assert sub.tags == ["a", "b"] and sub.match is None
    sub, _ = subscription(pb.FilterExpression(type=pb.FilterType.SQL, expression="TAGS = 'a' AND n > 1"))
    assert sub.tags == ["a"] and sub.match is not None
