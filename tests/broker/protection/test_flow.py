"""SendGate with a manual clock and a fake sleep: per-connection bounds, holding, refusing."""

import asyncio

from tidemq.broker.protection.alarms import ResourceAlarms
from tidemq.broker.protection.flow import DEADLINE_MARGIN_S, SendGate
from tidemq.io import ManualClock


class World:
    def __init__(self):
        self.clock = ManualClock()
        self.backlog = 0
        self.rss = 10
        self.on_sleep = None          # called after each sleep: the world changes while a send waits
        self.alarms = ResourceAlarms(100, 1, lambda: self.rss, lambda: {"/d": 1000}, self.clock, 0.1, 10.0)

    async def sleep(self, s):
        self.clock.advance(s)
        if self.on_sleep:
            self.on_sleep()

    def gate(self, hold_s=2.0, requests=2, nbytes=1000):
        return SendGate(self.alarms, lambda: self.backlog, 500, hold_s, requests, nbytes, self.clock, self.sleep)


def run(coro):
    return asyncio.run(coro)


def test_per_connection_request_bound():
    g = World().gate(requests=2)
    assert g.enter("ipv4:127.0.0.1:1", 10) is None
    assert g.enter("ipv4:127.0.0.1:1", 10) is None
    r = g.enter("ipv4:127.0.0.1:1", 10)
    assert "too many requests in flight on this connection: 2 >= inflight_requests_per_connection_max 2" in r
    assert g.enter("ipv4:127.0.0.1:2", 10) is None           # another connection has its own bound
    g.leave("ipv4:127.0.0.1:1", 10)
    assert g.enter("ipv4:127.0.0.1:1", 10) is None
    assert g.status()["inflight_requests"] == 3 and g.status()["connections_sending"] == 2


def test_per_connection_byte_bound_lets_a_lone_big_request_through():
    g = World().gate(requests=100, nbytes=1000)
    assert g.enter("p", 5000) is None                         # alone: passes
    assert "too many bytes in flight" in g.enter("p", 1)
    g.leave("p", 5000)
    assert g.status()["inflight_bytes"] == 0 and g.status()["connections_sending"] == 0
    assert g.enter("p", 600) is None
    assert "600 B + 600 B > inflight_bytes_per_connection_max 1000 B" in g.enter("p", 600)


def test_nothing_blocked_no_wait():
    w = World()
    g = w.gate()
    t0 = w.clock.monotonic_s()
    assert run(g.hold(3.0)) is None
    assert w.clock.monotonic_s() == t0 and g.held_total == 0


def test_alarm_holds_then_refuses_with_its_name():
    w = World()
    w.rss = 200
    w.alarms.check()
    g = w.gate(hold_s=2.0)
    t0 = w.clock.monotonic_s()
    r = run(g.hold(None))
    assert r.startswith("memory alarm: broker resident memory 200 B > high watermark 100 B")
    assert "send held 2.00 s, then refused" in r
    assert w.clock.monotonic_s() - t0 == 2.0 and g.refused_total == 1


def test_hold_never_passes_the_deadline():
    w = World()
    w.rss = 200
    w.alarms.check()
    g = w.gate(hold_s=10.0)
    t0 = w.clock.monotonic_s()
    assert run(g.hold(1.0)) is not None
    assert abs(w.clock.monotonic_s() - t0 - (1.0 - DEADLINE_MARGIN_S)) < 1e-9


def test_a_held_send_goes_on_when_the_alarm_clears():
    w = World()
    w.rss = 200
    w.alarms.check()
    g = w.gate(hold_s=2.0)
    t0 = w.clock.monotonic_s()

    def memory_freed():
        if w.clock.monotonic_s() - t0 >= 0.5:
            w.rss = 50
            w.alarms.check()
    w.on_sleep = memory_freed
    assert run(g.hold(None)) is None
    assert 0.5 <= w.clock.monotonic_s() - t0 < 0.6 and g.held_total == 1 and g.refused_total == 0


def test_flush_backlog_holds_and_clears():
    w = World()
    w.backlog = 600
    g = w.gate(hold_s=0.3)
    r = run(g.hold(None))
    assert r.startswith("flush backlog: 600 B written but not yet flushed > flush_backlog_high_bytes 500 B")
    w.on_sleep = lambda: setattr(w, "backlog", 0)             # the flush catches up
    assert run(g.hold(None)) is None
