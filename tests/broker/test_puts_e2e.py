"""broker/puts.py through a real broker: under SYNC_FLUSH the official client's send_async with 64
sends in flight (each appended on the broker's loop, its fsync awaited there) is answered OK for every
send, and after a kill -9 right after the last receipt every acknowledged message is there once (0
lost, 0 twice). A kill -9 keeps the page cache: that nothing is answered before its fsync is proven
through the FileIO seam (tests/broker/test_puts.py), a failed fsync through a real broker by
tests/store/test_log_failure_e2e.py."""

import concurrent.futures
import signal

from tidemq.client import PullConsumer

from ..support.brokers import SMALL
from ..support.official import msg
from ..support.wait import PATIENCE_S, patience

T = "durable"
SENDS = 300
IN_FLIGHT = 64


def stored_ids(endpoint) -> list[str]:
    with PullConsumer(endpoint, group="count") as c:
        out = []
        for q in range(c.queue_count(T)):
            offset = 0
            while True:
                got = c.pull(T, q, offset, batch_size=1000).messages
                if not got:
                    break
                out += [m.system_properties.message_id for m in got]
                offset = got[-1].system_properties.queue_offset + 1
        return out


def test_sync_flush_send_async_acknowledged_survives_a_kill_9(broker_factory, tmp_path, clients):
    root = str(tmp_path / "store")
    env = {**SMALL, "TIDEMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH", "TIDEMQ_SYNC_FLUSH_TIMEOUT_MS": "60000"}
    b = broker_factory(root, env=env, args=["--auto-create-topics"])
    make_producer, _ = clients
    p = make_producer(b.endpoint, [T], request_timeout_s=PATIENCE_S)
    acked, pending = [], set()
    for i in range(SENDS):
        while len(pending) >= IN_FLIGHT:
            done, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            acked += [f.result().message_id for f in done]
        pending.add(p.send_async(msg(T, b"durable-%d" % i)))
    acked += [f.result(timeout=patience()).message_id for f in concurrent.futures.as_completed(pending)]
    assert len(set(acked)) == SENDS
    b.stop(signal.SIGKILL)                       # no clean stop: only what was fsynced is there

    b = broker_factory(root, env=env, args=["--auto-create-topics"])
    ids = stored_ids(b.endpoint)
    lost = set(acked) - set(ids)
    twice = len(ids) - len(set(ids))
    assert not lost and not twice, f"{len(lost)} lost, {twice} twice"
    assert b.stop() == 0
