"""What the broker keeps for repeated receives (attempt ids) is bounded in entries, in bytes and in
time; an attempt id past its bound is refused. The repeat itself: test_groups.py
(test_a_repeated_attempt_id_gets_the_same_messages)."""

from types import SimpleNamespace

from tidemq.broker.consume.attempts import ATTEMPT_ID_CHARS_MAX, Attempts
from tidemq.protocol.stubs import Code

from .test_groups import _receive


def msgs(n, size):
    return [SimpleNamespace(body=b"x" * size) for _ in range(n)]


def test_the_entries_hold_at_most_bytes_max_and_end_with_their_invisible_time():
    a = Attempts(None, entries_max=100, bytes_max=1000)
    for i in range(5):
        a.remember("g", "T", f"a{i}", msgs(2, 200), until_ms=10_000, now_ms=0)
        assert a.nbytes <= 1000
    assert [k[2] for k in a._seen] == ["a3", "a4"], "the oldest dropped first"
    a.remember("g", "T", "huge", msgs(1, 2000), until_ms=10_000, now_ms=0)
    assert "huge" not in [k[2] for k in a._seen], "an entry past the bound alone is not kept"
    a.remember("g", "T", "later", msgs(1, 10), until_ms=30_000, now_ms=20_000)
    assert [k[2] for k in a._seen] == ["later"] and a.nbytes == len("later") + 10, "ended entries go"
    a.remember("g", "T", "later", msgs(1, 10), until_ms=40_000, now_ms=20_000)
    assert a.nbytes == len("later") + 10, "the same attempt again replaces its entry"


def test_an_attempt_id_past_its_bound_is_refused_and_pops_nothing(world):
    store, _clock, consumption = world
    from tidemq.store import Message
    c = consumption()
    store.put(Message("T", b"m0", queue_id=0))
    [r] = _receive(c, "g", "a" * (ATTEMPT_ID_CHARS_MAX + 1))
    assert r.status.code == Code.BAD_REQUEST and "attempt_id" in r.status.message
    assert [x.message.body for x in _receive(c, "g", "a" * ATTEMPT_ID_CHARS_MAX) if x.HasField("message")] == [b"m0"]
