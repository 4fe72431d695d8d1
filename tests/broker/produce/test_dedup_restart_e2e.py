"""A resent message id is answered, not stored twice, across a kill -9 of the broker: through
SendMessage (the official clients' RPC, the message id in its system properties) and SendRecords
with tidemq's Producer, and through the official rocketmq-python-client's own retry after its
answer was lost (tests/support/proxy.py). With the index lookup off (send_dedup_after_restart_s=0)
each of these stores a second copy."""

import signal

from tidemq.client import Producer, PullConsumer

from ...support.brokers import SMALL
from ...support.wait import PATIENCE_S, patience, wait_until

T = "once"


def stored(endpoint) -> int:
    with PullConsumer(endpoint, group="count") as c:
        return sum(len(c.pull(T, q, 0, batch_size=1000).messages) for q in range(c.queue_count(T)))


def answer_lost_across_a_kill(px, p, m, marker: bytes, landed, what: str, a, restart):
    """The official producer ``p`` sends ``m`` through the HoldingProxy ``px``, which holds its answer;
    once ``landed()`` says the first broker ``a`` has it, ``a`` is killed with -9, ``restart()`` starts
    the next broker on the same store, the proxy points at it and lets go: the client's own retry (the
    same message id) reaches it. (the new broker, the client's receipt, what ``landed()`` answered)"""
    px.hold_after(marker)
    pending = p.send_async(m)
    assert px.held_once.wait(patience()), "the send never went through the proxy"
    first = wait_until(landed, what)
    assert not pending.done(), "its answer was lost on the way back"
    a.stop(signal.SIGKILL)
    b = restart()
    px.retarget(b.port)
    px.release()                                 # the held connection closes: the client retries
    return b, pending.result(timeout=patience()), first


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


def test_the_official_clients_own_retry_across_a_kill_9_is_answered_not_stored_twice(broker_factory, tmp_path,
                                                                                      clients):
    """The official producer sends through a proxy that forwards the SendMessage and loses its
    answer; the broker is killed with -9 once the message is stored, restarted on the same store,
    and the proxy lets go: the client's own retry (same message id) reaches the new broker, which
    answers it from the index: one stored copy, and the receipt carries the first store's offset."""
    import uuid

    from ...support.official import msg
    from ...support.proxy import HoldingProxy

    topic = "once-official"
    root = str(tmp_path / "store")
    env = {**SMALL, "TIDEMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH"}
    a = broker_factory(root, env=env, args=["--auto-create-topics"])
    marker = b"answer-lost-" + uuid.uuid4().hex.encode()

    def copies(endpoint) -> list:
        with PullConsumer(endpoint, group="count") as c:
            return [m for q in range(c.queue_count(topic)) for m in c.pull(topic, q, 0, batch_size=1000).messages
                    if m.body == marker]

    with HoldingProxy(a.port) as px:
        make_producer, _consumer = clients
        # the client's deadline outlasts the kill and the restart: its retry is what the test waits for
        p = make_producer(px.endpoint, [topic], request_timeout_s=PATIENCE_S)
        assert p.send(msg(topic, b"through the proxy")).message_id
        b, receipt, first = answer_lost_across_a_kill(
            px, p, msg(topic, marker), marker, lambda: copies(a.endpoint),
            "the held send to be stored by the first broker", a,
            lambda: broker_factory(root, env=env, args=["--auto-create-topics"]))
        p.shutdown()
    stored_once = copies(b.endpoint)
    assert len(stored_once) == 1, f"{len(stored_once)} copies stored"
    [m] = first
    assert receipt.message_id == m.system_properties.message_id == stored_once[0].system_properties.message_id
    assert receipt.offset == m.system_properties.queue_offset, "answered with the first store's offset"
    assert b.stop() == 0


def test_the_official_clients_retry_of_a_delayed_message_across_a_kill_9_is_parked_once(broker_factory, tmp_path,
                                                                                       clients):
    """The same lost answer for a DELAY message, due long after the restart: the first broker parked
    it in the schedule topic and was killed; the client's retry reaches the new broker, which must
    find it parked (under its real topic) and answer it, not park a second copy that the timer would
    deliver beside the first."""
    import time
    import uuid

    from tidemq.broker.topic_names import SCHEDULE_TOPIC
    from tidemq.spark.files import StoreFiles

    from ...support.official import msg
    from ...support.proxy import HoldingProxy

    topic = "once-delayed"
    root = str(tmp_path / "store")
    env = {**SMALL, "TIDEMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH"}
    a = broker_factory(root, env=env, args=["--auto-create-topics"])
    marker = b"delayed-answer-lost-" + uuid.uuid4().hex.encode()

    def parked() -> int:                     # schedule messages in the store's files (read-only)
        files = StoreFiles(root)
        try:
            return files.queue_range(SCHEDULE_TOPIC, 0)[1]
        finally:
            files.close()

    with HoldingProxy(a.port) as px:
        make_producer, _consumer = clients
        p = make_producer(px.endpoint, [topic], request_timeout_s=PATIENCE_S)
        assert p.send(msg(topic, b"through the proxy")).message_id
        before = parked()
        m = msg(topic, marker)
        m.delivery_timestamp = int(time.time() * 1000) + 3_600_000      # due in an hour: parked all along
        b, receipt, _ = answer_lost_across_a_kill(
            px, p, m, marker, lambda: parked() > before,
            "the held delayed message to be parked by the first broker", a,
            lambda: broker_factory(root, env=env, args=["--auto-create-topics"]))
        p.shutdown()
    assert receipt.message_id
    assert parked() == before + 1, f"{parked() - before} parked copies"
    assert b.stop() == 0
