"""The leader's view of its followers and the SYNC wait (threads gated on events, no timing)."""

import threading

from tidemq.broker.replication.acks import ReplicaAcks
from tidemq.store import PutReason


def make(sync=True, n=1, lag_max=1000):
    end = [0]
    return ReplicaAcks(sync, n, 60_000, lag_max, lambda: end[0]), end


def test_async_never_waits_nor_refuses():
    a, end = make(sync=False)
    end[0] = 500
    assert a.refusal() is None and a.wait(500, 0.0) is None


def test_refused_until_enough_followers_are_in_sync():
    a, end = make(n=2)
    assert "0 are" in a.refusal()
    a.connect("f1", "e1", 0)
    a.connect("f2", "e2", 0)
    assert a.refusal() is None
    end[0] = 5000                        # f2 far behind: not in sync
    a.confirm("f1", 4500)
    assert "1 is" in a.refusal()
    assert a.refusals == 2


def test_wait_returns_once_enough_confirm():
    a, end = make(n=1)
    a.connect("f1", "e1", 0)
    end[0] = 100
    got = []
    started = threading.Event()

    def put():
        started.set()
        got.append(a.wait(100, 60.0))
    t = threading.Thread(target=put)
    t.start()
    started.wait()
    a.confirm("f1", 99)
    a.confirm("f1", 100)
    t.join(60)
    assert got == [None]
    st = a.status()[0]
    assert st["lag_bytes"] == 0 and st["in_sync"] and st["lag_seconds"] == 0.0


def test_timeout_or_lost_follower():
    a, end = make(n=1)
    a.connect("f1", "e1", 0)
    end[0] = 100
    assert a.wait(100, 0.0) is PutReason.REPLICATION_TIMEOUT
    a.disconnect("f1")
    assert a.wait(100, 0.0) is PutReason.REPLICA_LOST
    assert "stayed connected" in a.describe(PutReason.REPLICA_LOST)
