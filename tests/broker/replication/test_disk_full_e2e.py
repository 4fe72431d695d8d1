"""A follower whose disk is full, for real: three broker processes (a static group, SYNC,
in_sync_replicas_min=2), the third member's store on a small tmpfs that the copy fills. It leaves
the in-sync set once and stays out while its disk refuses the leader's bytes (no flapping as it
retries, no traceback per retry); puts then are refused before anything is written (issue 27: 49
writes were answered "appended, but fewer than in_sync_replicas_min stayed connected" and stored,
as the full follower came back in sync at every reconnect); what was appended while it was being
dropped is answered appended-and-unconfirmed, and its resend is never stored twice.

A feature across modules, kept whole: acks.py (the in-sync set by replica_lag_time_max_ms),
node.py (a static group's set), follower.py (its own disk's errors: said once, retried with a
growing pause), leader.py (a follower gone mid-stream ends its stream quietly)."""

import os

from tidemq.client import Producer
from tidemq.protocol.stubs import Code

from ...support.group import Group
from ...support.tmpfs import env  # noqa: F401  (fixture)
from ...support.wait import wait_until


def test_a_full_follower_leaves_the_set_once_and_puts_are_refused_unwritten(tmp_path, env):  # noqa: F811
    base = str(tmp_path / "mnt")
    g = Group(base, 3, mode="SYNC", env={"TIDEMQ_IN_SYNC_REPLICAS_MIN": "2", "TIDEMQ_REPLICA_LAG_TIME_MAX_MS": "1000",
                                          "TIDEMQ_REPLICATION_TIMEOUT_MS": "5000"})
    env.tmpfs("g-2", 14)                          # g-2's store root: room for about two 4 MiB segments
    codes: dict[int, int] = {}
    try:
        g.start_static()
        with Producer(g.endpoint(0), timeout_s=60) as p:
            k = 0

            def send() -> int:
                nonlocal k
                rs = p.send_batch("T", [b"m%06d-" % (k + j) + os.urandom(2000) for j in range(50)])
                k += 50
                for r in rs:
                    codes[r.code] = codes.get(r.code, 0) + 1
                return rs[0].code
            # fill g-2's disk: the puts go on while it is in the set, it falls out, then they are refused
            wait_until(lambda: send() == Code.HA_NOT_AVAILABLE, "puts refused: the full follower left the set",
                       timeout_s=300, interval_s=0)
            follower = {f["member"]: f for f in g.status(0)["followers"]}["g-2"]
            assert not follower["in_sync"] and follower["left_isr"] == 1
            end = g.status(0)["log_end"]
            for _ in range(30):                       # it keeps retrying meanwhile
                assert send() == Code.HA_NOT_AVAILABLE
            assert g.status(0)["log_end"] == end, "refused before anything was written"
            st = g.status(0)
            assert {f["member"]: f for f in st["followers"]}["g-2"]["left_isr"] == 1, "no flapping"
            assert g.status(2)["replica"]["local_errors"] >= 1
        print(codes)
        assert codes.get(Code.OK, 0) > 0 and codes[Code.HA_NOT_AVAILABLE] >= 30 * 50
        # appended while g-2 was being dropped: answered appended-unconfirmed (never OK, never stored twice)
        assert codes.get(Code.SLAVE_PERSISTENCE_TIMEOUT, 0) <= 50
    finally:
        g.kill_all()
    for i in range(3):
        text = open(g.root(i) + ".log").read()
        assert "ExecuteBatchError" not in text and "Traceback" not in text, f"g-{i}: {text[-3000:]}"
