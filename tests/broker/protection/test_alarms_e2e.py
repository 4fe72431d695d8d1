"""Resource alarms end to end with the official client: while the memory or the disk alarm is
raised, sends are held and then refused with TOO_MANY_REQUESTS naming the alarm and its numbers,
a send held while the alarm clears goes through, receives, pulls and acks are still served, and
the alarm clears by itself."""

import os
import time

import pytest

from tidemq.protocol import admin

from ...tmpfs import can_mount, env  # noqa: F401  (fixtures)
from ..consume.test_receive_e2e import clients, receive_all  # noqa: F401  (fixture)
from ..produce.test_send_message_e2e import make_topic, msg

MIB = 1 << 20
FAST = {"TIDEMQ_ALARM_CHECK_INTERVAL_MS_MAX": "200", "TIDEMQ_SEND_HOLD_MS_MAX": "1000"}


def alarm_status(b) -> dict:
    return admin.call(b.endpoint, "Alarms")["alarms"]


def wait_for(pred, seconds=10, what="condition"):
    end = time.time() + seconds
    while not pred():
        assert time.time() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


def refused_after_hold(p, topic, alarm):
    from rocketmq.v5.exception import TooManyRequestsException
    t0 = time.monotonic()
    with pytest.raises(TooManyRequestsException) as e:
        p.send(msg(topic, b"refused"))
    held = time.monotonic() - t0
    assert held >= 0.9, f"the send was refused at once ({held:.2f} s), not held"
    assert held < 4.0
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
    b = broker_factory(root, env={"TIDEMQ_SEGMENT_SIZE_BYTES": str(4 * MIB), "TIDEMQ_INDEX_SLOTS": "1000",
                                  "TIDEMQ_INDEX_ENTRIES": "4000", **FAST,
                                  "TIDEMQ_MEMORY_HIGH_WATERMARK_BYTES": str(2 << 30)})
    p = producer(b.endpoint, ["Mem"])
    for i in range(6):
        p.send(msg("Mem", b"before-%d" % i))
    st = alarm_status(b)
    assert not st["memory"]["raised"] and st["memory"]["limit_bytes"] == 2 << 30

    admin.call(b.endpoint, "SetAlarmLimits", {"memory_high_watermark_bytes": 1 * MIB})   # a test-sized watermark
    st = alarm_status(b)
    assert st["memory"]["raised"] and st["memory"]["reading_bytes"] > 1 * MIB
    text = refused_after_hold(p, "Mem", "memory")
    assert "42900" in text and "memory alarm: broker resident memory" in text
    assert "> high watermark 1.0 MiB (memory_high_watermark_bytes)" in text

    c = consumer(b.endpoint, "drainers", "Mem")
    drains(b, c, "Mem", 6)

    fut = p.send_async(msg("Mem", b"held-then-sent"))       # held ...
    time.sleep(0.3)
    admin.call(b.endpoint, "SetAlarmLimits", {"memory_high_watermark_bytes": 0, "memory_high_watermark_ratio": 0.9})
    assert fut.result(timeout=10).message_id                 # ... and sent once the alarm clears
    st = alarm_status(b)
    assert not st["memory"]["raised"] and st["memory"]["raised_count"] == 1 and st["refusal"] is None
    assert st["flow"]["held_total"] >= 2 and st["flow"]["inflight_requests"] == 0
    assert p.send(msg("Mem", b"after")).message_id


def test_disk_alarm_on_a_small_tmpfs_raises_and_clears_by_itself(env, broker_factory, clients):
    producer, consumer = clients
    root = env.tmpfs("root", 24)
    make_topic(root, "Disk", 2)
    b = broker_factory(root, env={"TIDEMQ_SEGMENT_SIZE_BYTES": str(1 * MIB), "TIDEMQ_INDEX_SLOTS": "1000",
                                  "TIDEMQ_INDEX_ENTRIES": "4000", "TIDEMQ_PREALLOCATE_NEXT_SEGMENT": "false",
                                  **FAST})
    st = alarm_status(b)
    assert st["disk"]["limit_bytes"] == 2 * MIB, "default: two commit-log segments"
    admin.call(b.endpoint, "SetAlarmLimits", {"disk_free_limit_bytes": 6 * MIB})
    p = producer(b.endpoint, ["Disk"])
    for i in range(6):
        p.send(msg("Disk", b"before-%d" % i))
    free = os.statvfs(root).f_bavail * os.statvfs(root).f_frsize
    ballast = os.path.join(root, "ballast")
    with open(ballast, "wb") as f:                 # leaves ~4 MiB: under the limit, far from the store's 90 %
        f.write(b"\0" * (free - 4 * MIB))
    wait_for(lambda: alarm_status(b)["disk"]["raised"], what="the disk alarm")

    text = refused_after_hold(p, "Disk", "disk")
    assert "disk alarm: free " in text and "< disk_free_limit_bytes 6.0 MiB under " + root in text
    c = consumer(b.endpoint, "drainers", "Disk")
    drains(b, c, "Disk", 6)

    os.unlink(ballast)                             # space comes back: the alarm clears, no restart
    wait_for(lambda: not alarm_status(b)["disk"]["raised"], what="the disk alarm to clear")
    assert p.send(msg("Disk", b"after")).message_id
    b.stop()
