"""A leader's lease (replication/lease.py) on the Clock seam: a fraction of the session timeout in
effect, which is the smaller of the one asked and the one the coordinator granted."""

from tidemq.broker.replication.lease import Lease
from tidemq.io import ManualClock


def test_a_session_granted_shorter_than_asked_shortens_the_lease_held_and_the_next():
    clock = ManualClock()
    lease = Lease(clock, 0.5, 10.0)                 # asked 10 s: 5 s leases
    lease.renew(clock.monotonic_s())
    assert 4.9 < lease.left_s() <= 5.0
    lease.session_granted(4.0)                      # the server granted 4 s: a lease may not outlive it
    assert lease.left_s() <= 2.0 and lease.valid()
    clock.advance(2.01)
    assert not lease.valid() and lease.refusal() is not None
    lease.renew(clock.monotonic_s())
    assert 1.9 < lease.left_s() <= 2.0


def test_a_session_granted_longer_than_asked_keeps_the_lease_of_the_one_asked():
    clock = ManualClock()
    lease = Lease(clock, 0.5, 10.0)
    lease.session_granted(40.0)
    lease.renew(clock.monotonic_s())
    assert 4.9 < lease.left_s() <= 5.0
