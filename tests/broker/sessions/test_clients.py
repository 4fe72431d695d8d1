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


def test_a_flood_never_forgets_a_client_with_something_at_stake_nor_another_users():
    """Lite subscriptions (hold) pin a client as an open stream does; past clients_per_user_max a
    user's own clients go first; each forgetting takes the oldest of a list (no scan of the table)."""
    clock = ManualClock()
    c = Clients(clock, IDLE_MS, clients_max=6, clients_per_user_max=3)
    c.seen("victim\tlite")
    c.hold("victim\tlite", True)                  # a lite consumer heard from by heartbeats only
    c.seen("victim\tplain")
    c.stream_opened("victim\tstream")
    for i in range(10_000):
        c.seen(f"mallory\tflood-{i}")
    assert {"victim\tlite", "victim\tplain", "victim\tstream"} <= set(c._c), "another user's flood"
    assert sum(1 for k in c._c if k.startswith("mallory\t")) == 3, "the flooder keeps its own bound"
    for i in range(10_000):
        c.seen(f"victim\tflood-{i}")
    assert {"victim\tlite", "victim\tstream"} <= set(c._c), "its own user's flood: what is at stake stays"
    assert "victim\tplain" not in c._c and len(c) <= 6
    assert c.forgotten == 9_997 + 10_000, "one forgotten per client over the bounds"
    clock.advance(IDLE_MS / 1000 + 1)
    assert not c.alive("victim\tlite", clock.now_ms()), "held, but idle past the bound: gone all the same"
    c.hold("victim\tlite", False)                 # (its subscriptions dropped, consume/lite.py)
    for i in range(10):
        c.seen(f"victim\tlater-{i}")
    assert "victim\tlite" not in c._c, "nothing at stake any more: forgettable"


def test_without_authentication_the_table_is_one_users_and_held_clients_stay():
    clock = ManualClock()
    c = Clients(clock, IDLE_MS, clients_max=3, clients_per_user_max=1)
    c.hold("lite", True)
    for cid in "abcdef":
        c.seen(cid)
    assert set(c._c) == {"lite", "e", "f"}, "no per-user bound without users; the held one stays"


def test_a_user_within_its_own_bound_never_forgets_another_users_live_client():
    """The table full (clients_max) of live clients: a user adding clients within its own bound
    (clients_per_user_max) forgets its own, never another user's live one (an auto-renewing consumer
    heard from by heartbeats only: forgotten, it counted as gone and its messages were handed out
    again); a client that is gone already (left, idle past the bound) goes first, whoever's."""
    clock = ManualClock()
    c = Clients(clock, IDLE_MS, clients_max=6, clients_per_user_max=4)
    for cid in ("alice\ta", "alice\tb", "bob\ta", "bob\tb"):
        c.seen(cid)
    clock.advance(1.0)
    for i in range(4):                            # mallory: within its own bound, past the table's
        c.seen(f"mallory\tm{i}")
    assert {"alice\ta", "alice\tb", "bob\ta", "bob\tb"} <= set(c._c), "another user's live clients"
    assert all(c.alive(k, clock.now_ms()) for k in ("alice\ta", "alice\tb", "bob\ta", "bob\tb"))
    assert len(c) == 6 and sum(1 for k in c._c if k.startswith("mallory\t")) == 2, "its own pay"
    c.terminated("bob\tb")                        # gone: the first forgotten, whoever's
    c.seen("mallory\tm9")
    assert "bob\tb" not in c._c and {"alice\ta", "alice\tb", "bob\ta"} <= set(c._c)
    clock.advance(IDLE_MS / 1000 + 0.5)           # alice's and bob's idle past the bound (mallory's not)
    c.seen("mallory\tm10")
    assert "alice\ta" not in c._c, "idle past client_idle_s_max: gone already, forgotten first"


def test_a_user_that_filled_the_table_pays_for_another_users_new_client():
    """One user fills the table within its own bound (clients_per_user_max as large as clients_max):
    another user's new client then forgets the filler's oldest, not that user's own live
    auto-renewing consumer (test_clients_users_e2e.py: forgotten, it counted as gone and its message was
    handed to the user's second consumer while the first was consuming it)."""
    clock = ManualClock()
    c = Clients(clock, IDLE_MS, clients_max=6, clients_per_user_max=6)
    c.seen("alice\tconsumer-1")
    clock.advance(1.0)
    for i in range(6):                            # mallory: within its own bound, the table full
        c.seen(f"mallory\tm{i}")
    assert "alice\tconsumer-1" in c._c and len(c) == 6
    c.seen("alice\tconsumer-2")
    assert {"alice\tconsumer-1", "alice\tconsumer-2"} <= set(c._c) and len(c) == 6, "mallory's oldest went"
    assert "mallory\tm1" not in c._c and c.alive("alice\tconsumer-1", clock.now_ms())
    for i in range(6, 9):                         # mallory again: its own, never alice's
        c.seen(f"mallory\tm{i}")
    assert {"alice\tconsumer-1", "alice\tconsumer-2"} <= set(c._c) and len(c) == 6
    for i in range(3, 9):                         # alice grows past mallory: then alice's own go
        c.seen(f"alice\tc{i}")
    assert sum(1 for k in c._c if k.startswith("mallory\t")) == 3 and len(c) == 6
