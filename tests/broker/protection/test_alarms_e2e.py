"""Resource alarms end to end with the official client: while the memory or the disk alarm is
raised, sends are held and then refused with TOO_MANY_REQUESTS naming the alarm and its numbers,
a send held while the alarm clears goes through, receives, pulls and acks are still served, and
the alarm clears by itself."""

import os
import time

import pytest


from ...support.brokers import admin_call, make_topic
from ...support.official import msg, receive_all
from ...support.wait import PATIENCE_S, wait_until

MIB = 1 << 20
FAST = {"TIDEMQ_ALARM_CHECK_INTERVAL_MS_MAX": "200", "TIDEMQ_SEND_HOLD_MS_MAX": "1000"}
SMALL_STORE = {"TIDEMQ_SEGMENT_SIZE_BYTES": str(4 * MIB), "TIDEMQ_INDEX_SLOTS": "1000", "TIDEMQ_INDEX_ENTRIES": "4000"}


def alarm_status(b) -> dict:
    return admin_call(b.endpoint, "Alarms")["alarms"]


def refused_after_hold(p, topic):
    """A send while an alarm is raised: held send_hold_ms_max (1 s here), then refused."""
    from rocketmq.v5.exception import TooManyRequestsException
    t0 = time.monotonic()
    with pytest.raises(TooManyRequestsException) as e:
        p.send(msg(topic, b"refused"))
    held = time.monotonic() - t0
    assert held >= 0.9, f"the send was refused at once ({held:.2f} s), not held"
    assert "(send held " in str(e.value) and "then refused" in str(e.value)
    return str(e.value)


def drains(b, c, topic, want):
    """Consumers go on during an alarm: pop receive + ack, and offset pulls."""
    from tidemq.client import PullConsumer
    got = receive_all(c, want)
    assert len(got) == want
    for m in got:
        c.ack(m)
    with PullConsumer(b.endpoint, "pullers") as pc:
        pulled = sum(len(pc.pull(topic, q, 0).messages) for q in range(pc.queue_count(topic)))
    assert pulled == want


def test_memory_alarm_holds_then_refuses_sends_while_consumers_drain(tmp_path, broker_factory, clients):
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Mem", 2)
    b = broker_factory(root, env={**SMALL_STORE, **FAST, "TIDEMQ_MEMORY_HIGH_WATERMARK_BYTES": str(2 << 30)})
    p = producer(b.endpoint, ["Mem"])
    for i in range(6):
        p.send(msg("Mem", b"before-%d" % i))
    st = alarm_status(b)
    assert not st["memory"]["raised"] and st["memory"]["limit_bytes"] == 2 << 30

    admin_call(b.endpoint, "SetAlarmLimits", {"memory_high_watermark_bytes": 1 * MIB})   # a test-sized watermark
    st = alarm_status(b)
    assert st["memory"]["raised"] and st["memory"]["reading_bytes"] > 1 * MIB
    text = refused_after_hold(p, "Mem")
    assert "42900" in text and "memory alarm: broker resident memory" in text
    assert "> high watermark 1.0 MiB (memory_high_watermark_bytes)" in text

    c = consumer(b.endpoint, "drainers", "Mem")
    drains(b, c, "Mem", 6)

    admin_call(b.endpoint, "SetAlarmLimits", {"memory_high_watermark_bytes": 0, "memory_high_watermark_ratio": 0.9})
    st = alarm_status(b)
    assert not st["memory"]["raised"] and st["memory"]["raised_count"] == 1 and st["refusal"] is None
    assert st["flow"]["held_total"] >= 1 and st["flow"]["inflight_requests"] == 0
    assert p.send(msg("Mem", b"after")).message_id


def test_a_send_held_while_the_alarm_clears_goes_through(tmp_path, broker_factory, clients):
    """Held for up to a minute here: the send is seen held by the broker before the alarm clears."""
    producer, _consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Mem", 2)
    b = broker_factory(root, env={**SMALL_STORE, "TIDEMQ_SEND_HOLD_MS_MAX": "60000"})
    p = producer(b.endpoint, ["Mem"], request_timeout_s=PATIENCE_S)
    assert p.send(msg("Mem", b"before")).message_id
    admin_call(b.endpoint, "SetAlarmLimits", {"memory_high_watermark_bytes": 1 * MIB})
    fut = p.send_async(msg("Mem", b"held-then-sent"))
    wait_until(lambda: alarm_status(b)["flow"]["inflight_requests"] == 1, "the send to be held")
    admin_call(b.endpoint, "SetAlarmLimits", {"memory_high_watermark_bytes": 0, "memory_high_watermark_ratio": 0.9})
    assert fut.result(timeout=PATIENCE_S).message_id          # ... and sent once the alarm cleared
    st = alarm_status(b)
    assert not st["memory"]["raised"] and st["refusal"] is None
    assert st["flow"]["held_total"] == 1 and st["flow"]["refused_total"] == 0 and st["flow"]["inflight_requests"] == 0


def test_disk_alarm_on_a_small_tmpfs_raises_and_clears_by_itself(env, broker_factory, clients):
    producer, consumer = clients
    root = env.tmpfs("root", 24)
    make_topic(root, "Disk", 2)
    b = broker_factory(root, env={"TIDEMQ_SEGMENT_SIZE_BYTES": str(1 * MIB), "TIDEMQ_INDEX_SLOTS": "1000",
                                  "TIDEMQ_INDEX_ENTRIES": "4000", "TIDEMQ_PREALLOCATE_NEXT_SEGMENT": "false",
                                  **FAST})
    st = alarm_status(b)
    assert st["disk"]["limit_bytes"] == 2 * MIB, "default: two commit-log segments"
    admin_call(b.endpoint, "SetAlarmLimits", {"disk_free_limit_bytes": 6 * MIB})
    p = producer(b.endpoint, ["Disk"])
    for i in range(6):
        p.send(msg("Disk", b"before-%d" % i))
    free = os.statvfs(root).f_bavail * os.statvfs(root).f_frsize
    ballast = os.path.join(root, "ballast")
    with open(ballast, "wb") as f:                 # leaves ~4 MiB: under the limit, far from the store's 90 %
        f.write(b"\0" * (free - 4 * MIB))
    wait_until(lambda: alarm_status(b)["disk"]["raised"], "the disk alarm")

    text = refused_after_hold(p, "Disk")
    assert "disk alarm: free " in text and "< disk_free_limit_bytes 6.0 MiB under " + root in text
    c = consumer(b.endpoint, "drainers", "Disk")
    drains(b, c, "Disk", 6)

    os.unlink(ballast)                             # space comes back: the alarm clears, no restart
    wait_until(lambda: not alarm_status(b)["disk"]["raised"], "the disk alarm to clear")
    assert p.send(msg("Disk", b"after")).message_id
    b.stop()
