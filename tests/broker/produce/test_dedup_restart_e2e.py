"""A resent message id is answered, not stored twice, across a kill -9 of the broker: through
SendMessage (the official clients' RPC, the message id in its system properties) and SendRecords."""

import signal

from tidemq.client import Producer, PullConsumer

from ...support.brokers import SMALL

T = "once"


def stored(endpoint) -> int:
    with PullConsumer(endpoint, group="count") as c:
        return sum(len(c.pull(T, q, 0, batch_size=1000).messages) for q in range(c.queue_count(T)))


def test_a_retry_across_a_kill_9_is_answered_not_stored_twice(broker_factory, tmp_path):
    root = str(tmp_path / "store")
    env = {**SMALL, "TIDEMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH"}      # acknowledged: on disk before the kill
    b = broker_factory(root, env=env, args=["--auto-create-topics"])
    ids = {raw: [f"retry-{raw}-{i}" for i in range(20)] for raw in (False, True)}
    first = {}
    for raw in (False, True):
        with Producer(b.endpoint, raw=raw) as p:
            first[raw] = p.send_batch(T, [b"m%d" % i for i in range(20)], message_ids=ids[raw])
        assert all(r.ok and not r.duplicate for r in first[raw])
    assert stored(b.endpoint) == 40
    b.stop(signal.SIGKILL)                                        # no clean stop: the window is gone

    b = broker_factory(root, env=env, args=["--auto-create-topics"])
    for raw in (False, True):
        with Producer(b.endpoint, raw=raw) as p:
            again = p.send_batch(T, [b"m%d" % i for i in range(20)], message_ids=ids[raw])
            assert all(r.ok and r.duplicate for r in again), [(r.status, r.duplicate) for r in again][:3]
            assert [r.offset for r in again] == [r.offset for r in first[raw]]
            new = p.send_batch(T, [b"new"], message_ids=[f"new-{raw}"])
            assert new[0].ok and not new[0].duplicate
    assert stored(b.endpoint) == 42, "each resent id stored once, the new ones stored"
    assert b.stop() == 0
