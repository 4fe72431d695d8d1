"""Consumer-group settings (consume/groups.py): the table kept as a checked document, the defaults,
the per-group dead-letter rule (retry_max + 1 deliveries), orderly and consume-enable, what
Telemetry is told, the admin methods (group_admin.py) and the copy a follower gets."""

from __future__ import annotations

import asyncio
import os

import pytest

from tidemq import checked
from tidemq.broker.consume import group_admin
from tidemq.broker.consume.groups import GroupTable, retry_policy_pb
from tidemq.protocol.group_settings import DEFAULT_POLICY, GROUPS_FILE, parse_policy
from tidemq.broker.replication import state
from tidemq.broker.service import MessagingService
from tidemq.config import KIB, BrokerConfig
from tidemq.io import ManualClock, OsFileIO
from tidemq.protocol.stubs import Code, pb, spb
from tidemq.store import Message, MessageStore, StoreConfig

INVISIBLE_MS = 10_000


def table(tmp_path, **kw):
    return GroupTable(OsFileIO(), str(tmp_path / "broker"), **kw).load()


def test_policies_parse_and_refuse():
    p = parse_policy("exponential:100,60000,2")
    assert (p.kind, p.initial_ms, p.max_ms, p.multiplier) == ("exponential", 100, 60000, 2.0)
    assert parse_policy("customized:1000ms,5s,2m,1h").delays_ms == (1000, 5000, 120000, 3600000)
    assert parse_policy(p.text()) == p and parse_policy(DEFAULT_POLICY.text()) == DEFAULT_POLICY
    for bad in ("exponential:100,50,2", "exponential:1,2", "exponential:1,2,0.5", "customized:", "customized:1x",
                "customized:25h", "customized:500ms", "linear:1,2,3", "exponential:1,2,nan"):
        with pytest.raises(ValueError):
            parse_policy(bad)


def test_defaults_settings_survive_a_restart_and_damage_falls_back(tmp_path):
    t = table(tmp_path, delivery_attempts_max=16, fifo_groups=("fifo",))
    assert t.attempts_max("any") == 16 and t.orderly("fifo") and not t.orderly("any")
    assert t.settings("any").retry_policy == DEFAULT_POLICY and t.settings("any").consume_enable
    t.create("g", {"retry_max": 2, "retry_policy": parse_policy("exponential:100,1000,3")})
    t.update("g", {"orderly": True})
    t.create("fifo", {"orderly": False})            # an explicit setting wins over fifo_consumer_groups
    with pytest.raises(KeyError):
        t.create("g", {})
    with pytest.raises(KeyError):
        t.update("nobody", {"orderly": True})
    again = table(tmp_path, delivery_attempts_max=16, fifo_groups=("fifo",))
    assert again.groups == t.groups and again.attempts_max("g") == 3 and again.orderly("g")
    assert not again.orderly("fifo")
    path = os.path.join(str(tmp_path / "broker"), GROUPS_FILE)
    with open(path, "r+b") as f:                    # damage the file: its previous version is used
        f.seek(20)
        f.write(b"XX")
    back = table(tmp_path, delivery_attempts_max=16, fifo_groups=("fifo",))
    assert "g" in back.groups and back.groups["g"].retry_max == 2
    t.delete("g")
    assert table(tmp_path).attempts_max("g") == 16
    with pytest.raises(KeyError):
        t.delete("g")


def test_telemetry_policy_is_the_groups_own(tmp_path):
    t = table(tmp_path, delivery_attempts_max=16)
    d = retry_policy_pb(t.settings("x"))
    assert d.max_attempts == 16 and [x.seconds for x in d.customized_backoff.next][:3] == [1, 5, 10]
    t.create("g", {"retry_max": 4, "retry_policy": parse_policy("exponential:250,60000,1.5")})
    e = retry_policy_pb(t.settings("g"))
    assert e.max_attempts == 5
    assert (e.exponential_backoff.initial.nanos, e.exponential_backoff.max.seconds,
            e.exponential_backoff.multiplier) == (250_000_000, 60, 1.5)


def test_admin_requests_are_checked_and_answered_typed(tmp_path):
    t = table(tmp_path)
    r = group_admin.create(t, {"group": "g", "retry_max": 3, "retry_policy": "customized:1s,2s", "orderly": True})
    assert r["ok"] and r["settings"]["retry_max"] == 3 and r["settings"]["retry_policy"]["delays_ms"] == [1000, 2000]
    assert group_admin.create(t, {"group": "g"})["code"] == "EXISTS"
    assert group_admin.update(t, {"group": "h", "orderly": True})["code"] == "NOT_FOUND"
    for bad in ({"group": "g", "retry_max": -1}, {"group": "g", "retry_max": "3"}, {"group": "bad name"},
                {"group": "g", "orderly": "yes"}, {"group": "g", "retry_policy": "sometimes"}, {"group": "g"},
                {"group": "g", "colour": "red"}, [1]):
        assert group_admin.update(t, bad)["code"] == "BAD_REQUEST", bad
    assert group_admin.update(t, {"group": "g", "consume_enable": False})["settings"]["consume_enable"] is False
    assert group_admin.shown(t, "g")["created"] and not group_admin.shown(t, "other")["created"]
    assert group_admin.delete(t, {"group": "g"})["ok"] and group_admin.delete(t, {"group": "g"})["code"] == "NOT_FOUND"


def _receive(c, group, attempt_id=""):
    class Context:
        def time_remaining(self):
            return 3600.0

    async def go():
        return [r async for r in c.receive(spb.ReceiveMessageRequest(
            group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name="T")),
            batch_size=8, invisible_duration={"seconds": INVISIBLE_MS // 1000}, long_polling_timeout={"seconds": 0},
            attempt_id=attempt_id), Context())]
    return asyncio.run(go())


def test_a_group_is_dead_lettered_after_exactly_retry_max_plus_one_deliveries(world):
    store, clock, consumption = world
    c = consumption(delivery_attempts_max=16)
    c.groups.create("few", {"retry_max": 2})
    store.put(Message("T", b"poison", queue_id=0, properties={"TRACE_CONTEXT": "00-trace-span-01"}))
    attempts = []
    for _ in range(6):
        got = [r.message for r in _receive(c, "few") if r.HasField("message")]
        attempts += [m.system_properties.delivery_attempt for m in got]
        clock.advance(INVISIBLE_MS / 1000)
    assert attempts == [1, 2, 3], "retry_max 2: three deliveries, then the dead-letter queue"
    [dead] = store.get("x", "%DLQ%few", 0, 0).messages
    assert dead.body == b"poison"
    # the dead letter carries where it came from (the dead_letter_queue system property)
    c2 = consumption()
    [r] = [x.message for x in _receive_topic(c2, "reader", "%DLQ%few") if x.HasField("message")]
    assert r.system_properties.dead_letter_queue.topic == "T"
    assert r.system_properties.dead_letter_queue.message_id == dead.msg_id
    assert r.system_properties.trace_context == "00-trace-span-01", "a trace follows its message into the DLQ"


def _receive_topic(c, group, topic):
    class Context:
        def time_remaining(self):
            return 3600.0

    async def go():
        return [r async for r in c.receive(spb.ReceiveMessageRequest(
            group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic)),
            batch_size=8, invisible_duration={"seconds": 10}, long_polling_timeout={"seconds": 0}), Context())]
    return asyncio.run(go())


def test_orderly_and_consume_disable_by_group_setting(world):
    store, clock, consumption = world
    c = consumption()
    for b in (b"a0", b"a1"):
        store.put(Message("T", b, queue_id=0))
    c.groups.create("ord", {"orderly": True})
    [a0] = c.pop_batch("ord", "T", 1, INVISIBLE_MS)
    assert c.pop_batch("ord", "T", 8, INVISIBLE_MS) == [], "orderly: the queue is held while a0 is in flight"
    c.groups.create("off", {"consume_enable": False})
    [r] = _receive(c, "off")
    assert r.status.code == Code.FORBIDDEN


def test_a_repeated_attempt_id_gets_the_same_messages(world):
    store, clock, consumption = world
    c = consumption()
    for i in range(4):
        store.put(Message("T", b"m%d" % i, queue_id=i % 2))
    first = [r.message for r in _receive(c, "g", "att-1") if r.HasField("message")]
    assert len(first) == 4
    c.pop.ack("g", first[0].system_properties.receipt_handle)
    store.put(Message("T", b"new", queue_id=0))
    again = [r.message for r in _receive(c, "g", "att-1") if r.HasField("message")]
    assert [m.system_properties.receipt_handle for m in again] == \
        [m.system_properties.receipt_handle for m in first[1:]], "the same (still in flight), nothing new"
    assert [r.message.body for r in _receive(c, "g", "att-2") if r.HasField("message")] == [b"new"]
    clock.advance(INVISIBLE_MS / 1000)          # over: the attempt is forgotten, an ordinary receive
    assert sorted(r.message.system_properties.delivery_attempt for r in _receive(c, "g", "att-1")
                  if r.HasField("message")) == [2, 2, 2, 2]


def test_a_follower_gets_the_groups_and_a_promoted_one_loads_them(tmp_path):
    clock = ManualClock()
    cfg = lambda r: StoreConfig(root_dir=str(tmp_path / r), segment_size_bytes=256 * KIB, index_slots=1000,  # noqa
                                index_entries=4000, preallocate_next_segment=False)
    store, f_store = MessageStore(cfg("l"), clock=clock).start(), MessageStore(cfg("f"), clock=clock).start()
    svc = MessagingService(store, BrokerConfig())
    f_svc = MessagingService(f_store, BrokerConfig(), leading=False)
    try:
        svc.groups.create("g", {"retry_max": 5, "orderly": True})
        doc = state.snapshot(store, svc)
        with pytest.raises(ValueError):
            state.apply({**doc, "groups": {"version": 1, "groups": {"g": {"retry_max": -3}}}}, f_store, f_svc,
                        f_svc.state_dir)
        assert f_svc.groups.groups == {}
        state.apply(doc, f_store, f_svc, f_svc.state_dir)
        assert f_svc.groups.groups == svc.groups.groups
        f_svc.discard()
        f_svc = MessagingService(f_store, BrokerConfig())         # promoted: opened from the copy
        assert f_svc.groups.attempts_max("g") == 6 and f_svc.groups.orderly("g")
        assert checked.load(OsFileIO(), f_svc.groups.path, "groups").source is checked.Source.FILE
    finally:
        svc.close()
        f_svc.close()
        store.shutdown()
        f_store.shutdown()
