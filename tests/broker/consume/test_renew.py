"""Auto-renewal with a manual clock: a message received with auto_renew stays invisible while its
client is alive (its original handle still acks), up to auto_renew_s_max; it comes back once the
client is gone (terminated, stream closed, heartbeats stopped) or nacks; the pop journal keeps
the renewals and whom they are for across a restart."""

import pytest

from tidemq.broker.sessions.clients import Clients
from tidemq.protocol.stubs import Code, pb, spb
from tidemq.broker.consume.renew import AutoRenew

from ...support.pop import ORDERED, ack, bodies, put

INVISIBLE_MS = 5_000
SETTINGS = dict(auto_renew_ahead_s=2.0, auto_renew_step_s=10.0, auto_renew_s_max=120.0, client_idle_s_max=30.0)


@pytest.fixture
def renewing(world):
    store, clock, consumption = world

    def make():
        c = consumption(**SETTINGS)
        clients = Clients(clock, int(SETTINGS["client_idle_s_max"] * 1000))
        return c, clients, AutoRenew(c.pop, clients, c.config, clock)

    return store, clock, make


def run_for(clock, renewer, seconds, heartbeat=None):
    """Ticks every second; a heartbeat from ``heartbeat`` every 10 s."""
    for i in range(seconds):
        clock.advance(1.0)
        if heartbeat and i % 10 == 0:
            renewer.clients.seen(heartbeat)
        renewer.tick()


def test_a_message_stays_invisible_while_its_client_heartbeats_and_its_handle_still_acks(renewing):
    store, clock, make = renewing
    c, clients, renewer = make()
    put(store, 0, b"a0", b"a1")
    clients.seen("c1")
    [a0] = c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None, renew_for="c1")
    run_for(clock, renewer, 60, heartbeat="c1")
    assert c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == [], \
        "a minute on (invisible time 5 s): not delivered again, and the FIFO queue is still held"
    assert c.pop_batch("other", "T", 8, INVISIBLE_MS, None), "other groups are not held"
    ack(c, ORDERED, a0)
    assert c.pop.renewing == {}, "acked: no more renewal ('other' did not ask for it)"
    assert bodies(c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None, renew_for="c1")) == [b"a1"]
    assert c.pop.renewing == {"c1": {(ORDERED, "T", 0, 1)}}


def test_without_auto_renew_nothing_is_renewed(renewing):
    store, clock, make = renewing
    c, clients, renewer = make()
    put(store, 0, b"a0")
    c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None)
    run_for(clock, renewer, 5, heartbeat="c1")
    assert [(m.body, m.system_properties.delivery_attempt) for m in
            c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)] == [(b"a0", 2)]


@pytest.mark.parametrize("leaves", ["terminated", "stream closed", "heartbeats stop"])
def test_the_messages_of_a_client_that_is_gone_come_back(renewing, leaves):
    store, clock, make = renewing
    c, clients, renewer = make()
    put(store, 0, b"a0")
    clients.stream_opened("c1")
    c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None, renew_for="c1")
    run_for(clock, renewer, 40)                       # no heartbeat needed while the stream is open
    assert c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == []
    if leaves == "terminated":
        clients.terminated("c1")
        run_for(clock, renewer, 1)
    elif leaves == "stream closed":
        clients.stream_closed("c1")
        run_for(clock, renewer, 1)
    else:
        clients.stream_closed("c1")
        clients.seen("c1")                            # its stream broke; it still heartbeats ...
        run_for(clock, renewer, 25, heartbeat="c1")
        assert c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == [], "... so it is alive"
        run_for(clock, renewer, 31)                   # ... then no more
    assert [(m.body, m.system_properties.delivery_attempt) for m in
            c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)] == [(b"a0", 2)]
    assert c.pop.renewing == {}


def test_renewal_stops_after_auto_renew_max_s(renewing):
    store, clock, make = renewing
    c, clients, renewer = make()
    put(store, 0, b"a0")
    c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None, renew_for="c1")
    run_for(clock, renewer, 119, heartbeat="c1")
    assert c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == []
    run_for(clock, renewer, 1, heartbeat="c1")
    assert [m.system_properties.delivery_attempt for m in c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)] == [2], \
        "invisible until received + auto_renew_s_max, not longer"


def test_a_nack_ends_the_renewal(renewing):
    store, clock, make = renewing
    c, clients, renewer = make()
    put(store, 0, b"a0")
    [a0] = c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None, renew_for="c1")
    r = c.change_invisible(spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name=ORDERED), topic=a0.topic, receipt_handle=a0.system_properties.receipt_handle,
        invisible_duration={"seconds": 3}, message_id=a0.system_properties.message_id))
    assert r.status.code == Code.OK and c.pop.renewing == {}
    run_for(clock, renewer, 3, heartbeat="c1")
    assert bodies(c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)) == [b"a0"], "back after the client's backoff"


def test_renewals_and_their_client_survive_a_restart(renewing):
    store, clock, make = renewing
    c, clients, renewer = make()
    put(store, 0, b"a0")
    [a0] = c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None, renew_for="c1")
    run_for(clock, renewer, 30, heartbeat="c1")
    c.pop.flush()
    c2, clients2, renewer2 = make()                   # killed with -9: the journal is read back
    assert c2.pop.renewing == {"c1": {(ORDERED, "T", 0, 0)}}
    assert c2.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == [], "still invisible: renewed before the kill"
    run_for(clock, renewer2, 60, heartbeat="c1")      # the client heartbeats to the new broker
    assert c2.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == []
    ack(c2, ORDERED, a0)                              # the handle it got before the restart
    assert c2.pop.state(ORDERED, "T", 0).inflight == {}


def test_after_a_restart_a_client_that_does_not_come_back_loses_its_messages(renewing):
    store, clock, make = renewing
    c, clients, renewer = make()
    put(store, 0, b"a0")
    c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None, renew_for="c1")
    c.pop.flush()
    c2, clients2, renewer2 = make()
    run_for(clock, renewer2, 30)
    assert c2.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == [], "client_idle_s_max to come back"
    run_for(clock, renewer2, 1)
    assert bodies(c2.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)) == [b"a0"]


def test_another_users_flood_never_releases_a_live_auto_renewing_consumers_message(world):
    """The outcome test_clients_users_e2e.py shows in a real broker, with the clock moved by hand:
    authentication on (ids ``user<TAB>id``), a table of 16 clients, 16 per user. A push consumer heard
    from by heartbeats only receives with auto_renew past client_idle_s_max from the start (a client
    forgotten then counts as gone); another user heartbeats 16 fresh ids (within its own bound, past the
    table's). Before (sessions/clients.py forgot the oldest client of anyone), the consumer was forgotten,
    the renewal released its message and the group's second consumer received it while the first was
    still consuming it."""
    store, clock, consumption = world
    c = consumption(**SETTINGS)
    idle_ms = int(SETTINGS["client_idle_s_max"] * 1000)
    clients = Clients(clock, idle_ms, clients_max=16, clients_per_user_max=16)
    renewer = AutoRenew(c.pop, clients, c.config, clock)
    put(store, 0, b"m1")
    clients.seen("super\tproducer")
    clock.advance(idle_ms / 1000 + 1.0)           # past the start's window: forgotten means gone
    clients.seen("super\tconsumer-1")
    assert bodies(c.pop_batch(ORDERED, "T", 32, INVISIBLE_MS, None, renew_for="super\tconsumer-1")) == [b"m1"]
    for i in range(16):                           # another user, within its own bound
        clients.seen(f"mallory\tflood-{i}")
    clients.seen("super\tconsumer-2")
    clock.advance(1.0)
    assert renewer.tick()[1] == 0, "the live consumer's message was released"
    assert c.pop_batch(ORDERED, "T", 32, INVISIBLE_MS, None) == [], \
        "the first consumer's message was handed out while it consumed it"
