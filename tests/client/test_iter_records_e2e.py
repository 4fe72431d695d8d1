"""PullConsumer.iter_records against `tidemq serve`: every record once and in order with pulls
under way, bounded by `end` or the queue's end, polls at the end going on until a send brings
the rest, an iterator carried over a fork (with gRPC's fork support on), a broker killed
mid-stream raising at the next result."""

import os
import signal
import subprocess
import sys
import threading

import grpc
import pytest

from tidemq.client import Producer, PullConsumer

from ..support.brokers import REPO, SMALL, make_topic
from ..support.wait import PATIENCE_S


def bodies(rs):
    return [m.body for r in rs for m in r.messages()]


def test_prefetched_pulls_in_order_bounds_wait_and_fork(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "P", 1)
    b = broker_factory(root, env=SMALL)
    sent = [b"p-%d" % i for i in range(3000)]
    with Producer(b.endpoint) as p, PullConsumer(b.endpoint) as c:
        for i in range(0, 3000, 500):          # one at a time: stored in this order
            p.send_batch("P", sent[i:i + 500])
        rs = list(c.iter_records("P", 0, 0, max_count=128, prefetch=3))
        assert bodies(rs) == sent and rs[-1].next_offset == 3000
        assert [m.queue_offset for m in rs[5].messages()] == list(range(640, 768))
        assert bodies(c.iter_records("P", 0, 100, 250, max_count=64)) == sent[100:250]
        # at the end: waits, and a send wakes it
        it = c.iter_records("P", 0, 2990, 3002, max_count=64, wait_s=5)
        assert bodies([next(it)]) == sent[2990:]
        threading.Timer(0.3, lambda: p.send_batch("P", [b"late-0", b"late-1"])).start()
        assert bodies(it) == [b"late-0", b"late-1"]
        # forked with pulls under way: the child asks again on a channel of its own (in a process
        # of its own, with gRPC's fork support on: see tests/support/fork_child.py)
        child = subprocess.run([sys.executable, "-m", "tests.support.fork_child", b.endpoint, "P", "3000"],
                               capture_output=True, text=True, timeout=PATIENCE_S, cwd=REPO,
                               env=dict(os.environ, GRPC_ENABLE_FORK_SUPPORT="1"))
        assert child.returncode == 0, child.stdout + child.stderr[-3000:]
        # the broker dies mid-stream: the error comes where the iteration gets to it
        it = c.iter_records("P", 0, 0, max_count=10, prefetch=2)
        next(it)
        os.kill(b.proc.pid, signal.SIGKILL)
        b.proc.wait()
        with pytest.raises(grpc.RpcError):
            for _ in it:
                pass


def test_a_broker_without_the_stream_is_read_with_the_unary_pulls(tmp_path):
    """An older broker (PullRecords only) answers PullRecordsStream UNIMPLEMENTED: iter_records
    reads the same stretch with its unary pulls, from where it was."""
    import asyncio
    import json
    from concurrent import futures

    from tidemq.broker.consume.pull_records import Records
    from tidemq.protocol import data
    from tidemq.store import Message, MessageStore, StoreConfig

    class Ctx:
        def time_remaining(self):
            return 30.0

    s = MessageStore(StoreConfig(root_dir=str(tmp_path / "store"), segment_size_bytes=1 << 20, index_slots=100,
                                 index_entries=400)).start()
    server = grpc.server(futures.ThreadPoolExecutor(2))
    try:
        s.create_topic("O", 1)
        s.put_batch([Message("O", b"o-%d" % i) for i in range(300)])
        records = Records(s, asyncio.Event(), 4 << 20)
        asked: list[int] = []

        def pull(raw, context):
            asked.append(json.loads(raw)["offset"])
            return asyncio.run(records.pull(raw, Ctx()))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            data.SERVICE, {data.PULL_RECORDS: grpc.unary_unary_rpc_method_handler(pull)}),))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        with PullConsumer(f"127.0.0.1:{port}") as c:
            got = bodies(c.iter_records("O", 0, 20, 290, max_count=64, prefetch=2))
        assert got == [b"o-%d" % i for i in range(20, 290)] and asked[0] == 20
    finally:
        server.stop(0)
        s.shutdown()
