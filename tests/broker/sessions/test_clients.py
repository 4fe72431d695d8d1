"""Who is alive: an open Telemetry stream, or a heartbeat / receive within client_idle_s_max;
gone at once on NotifyClientTermination or when its last stream ends, unless heard from again."""

from tidemq.broker.sessions.clients import Clients
from tidemq.io import ManualClock

IDLE_MS = 30_000


def test_heartbeats_keep_a_client_alive_for_client_idle_max_s():
    clock = ManualClock()
    c = Clients(clock, IDLE_MS)
    c.seen("a")
    clock.advance(30.0)
    assert c.alive("a", clock.now_ms())
    clock.advance(0.001)
    assert not c.alive("a", clock.now_ms())
    c.seen("a")
    assert c.alive("a", clock.now_ms()), "heard from again"


def test_an_open_stream_keeps_it_alive_and_its_end_is_a_departure():
    clock = ManualClock()
    c = Clients(clock, IDLE_MS)
    c.stream_opened("a")
    c.stream_opened("a")
    clock.advance(3600.0)
    assert c.alive("a", clock.now_ms())
    c.stream_closed("a")
    assert c.alive("a", clock.now_ms()), "another stream is still open"
    c.stream_closed("a")
    assert not c.alive("a", clock.now_ms())
    c.seen("a")
    assert c.alive("a", clock.now_ms())


def test_termination_is_a_departure_even_with_a_stream_open():
    clock = ManualClock()
    c = Clients(clock, IDLE_MS)
    c.stream_opened("a")
    c.terminated("a")
    assert not c.alive("a", clock.now_ms())


def test_unknown_clients_get_client_idle_max_s_from_the_start_and_ids_are_bounded():
    clock = ManualClock()
    c = Clients(clock, IDLE_MS)
    assert c.alive("never-seen", clock.now_ms() + IDLE_MS)
    assert not c.alive("never-seen", clock.now_ms() + IDLE_MS + 1)
    c.clients_max = 3
    c.stream_opened("s")
    for cid in "abcd":
        c.seen(cid)
    assert set(c._c) == {"s", "c", "d"}, "the oldest without a stream are forgotten"
    assert c.alive("s", clock.now_ms() + 10 * IDLE_MS)
