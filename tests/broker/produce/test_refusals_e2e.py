"""The store's refusals reach the official producer as clear statuses: a full disk answers
TOO_MANY_REQUESTS naming it (the client does not hammer a full broker with retries), and
sends work again once space is back, without a restart."""

import os

import pytest

from ...support.brokers import make_topic
from ...support.official import REQUEST_TIMEOUT_S, msg
from ...support.wait import wait_until

SMALL = {"TIDEMQ_SEGMENT_SIZE_BYTES": str(1 << 20), "TIDEMQ_INDEX_SLOTS": "1000", "TIDEMQ_INDEX_ENTRIES": "4000",
         "TIDEMQ_PREALLOCATE_NEXT_SEGMENT": "false",
         # the store's own refusal, not the broker's disk alarm (tests/broker/test_alarms_e2e.py)
         "TIDEMQ_DISK_FREE_LIMIT_BYTES": str(64 << 10)}


def test_disk_full_reaches_the_producer_and_clears(env, broker_factory):
    root = env.tmpfs("root", 16)
    make_topic(root, "Full", 1)
    st = os.statvfs(root)
    ballast = os.path.join(root, "ballast")
    with open(ballast, "wb") as f:            # ~93 % used: above the warning ratio
        f.write(b"\0" * int(st.f_blocks * st.f_frsize * 0.93 - (st.f_blocks - st.f_bfree) * st.f_frsize))
    b = broker_factory(root, env=SMALL)
    from rocketmq import ClientConfiguration, Credentials, Producer
    from rocketmq.v5.exception import TooManyRequestsException
    p = Producer(ClientConfiguration(b.endpoint, Credentials(), request_timeout=REQUEST_TIMEOUT_S), ("Full",))
    p.startup()
    try:
        with pytest.raises(TooManyRequestsException) as e:
            p.send(msg("Full", b"refused"))
        assert "disk full" in str(e.value) and root in str(e.value)
        os.unlink(ballast)

        def accepted():
            try:
                return p.send(msg("Full", b"accepted")).message_id
            except TooManyRequestsException:
                return None

        wait_until(accepted, "the full flag to clear by itself (the disk check runs every second: no restart)",
                   interval_s=0.3)
    finally:
        p.shutdown()
        b.stop()
