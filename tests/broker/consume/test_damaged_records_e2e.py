"""Damaged records through a real broker (issue 12): messages sent, the broker stopped, bytes of a
few records flipped in the commit-log files by hand (after a clean stop, or with the state a crash
leaves: an abort file and an empty checkpoint), the broker started again, every queue read back
through PullMessage and PullRecords. Every intact message arrives exactly once, the damaged ones
never, consumers are never stuck on them, and tidemq_records_damaged_total counts them."""

from __future__ import annotations

import hashlib
import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tidemq.client import Producer, PullConsumer
from tidemq.protocol.stubs import Code
from tidemq.store import MessageStore, StoreConfig

from ...support.brokers import SMALL, free_port, make_topic

TOPIC = "Dmg"
QUEUES = 3
N = 600
SEG = 4 << 20


def body_of(i: int) -> bytes:
    return b"dmg-%05d-" % i + bytes([i % 251]) * 300


def _records(root: str) -> dict[bytes, tuple[int, int]]:
    """body -> (commit-log offset, size) of every message, read with no broker holding the store."""
    s = MessageStore(StoreConfig(root_dir=root, segment_size_bytes=SEG, index_slots=1000, index_entries=4000)).start()
    try:
        out = {}
        for q in range(QUEUES):
            off = 0
            while off < s.max_offset(TOPIC, q):
                g = s.get("t", TOPIC, q, off, max_count=32)
                out.update({m.body: (m.commitlog_offset, m.store_size) for m in g.messages})
                off = g.next_offset
        return out
    finally:
        s.shutdown()


def _flip(root: str, offset: int, length: int) -> None:
    path = os.path.join(root, "commitlog", "%020d" % (offset // SEG * SEG))
    with open(path, "r+b") as f:
        f.seek(offset % SEG)
        old = f.read(length)
        f.seek(offset % SEG)
        f.write(bytes(b ^ 0xFF for b in old))


def _pull_all(c: PullConsumer) -> dict[bytes, int]:
    got: dict[bytes, int] = {}
    for q in range(QUEUES):
        off = 0
        while True:
            r = c.pull(TOPIC, q, off, batch_size=16)
            for m in r.messages:
                assert m.system_properties.body_digest.checksum == hashlib.md5(m.body).hexdigest().upper()
                got[m.body] = got.get(m.body, 0) + 1
            if r.code != Code.OK and r.next_offset <= off:
                break                                          # the queue's end
            assert r.next_offset > off, f"stuck at {TOPIC}/{q}@{off}: code {r.code}"
            off = r.next_offset
    return got


def _pull_records_all(c: PullConsumer) -> dict[bytes, int]:
    got: dict[bytes, int] = {}
    for q in range(QUEUES):
        for r in c.iter_records(TOPIC, q, 0, max_count=64):
            for m in r.messages():
                assert m.intact()
                got[m.body] = got.get(m.body, 0) + 1
    return got


def _damaged_total(port: int) -> float:
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name == "tidemq_records_damaged_total")


@pytest.mark.parametrize("crash", [False, True], ids=["clean-stop", "abort-empty-checkpoint"])
def test_damaged_records_are_skipped_counted_and_never_served(tmp_path, broker_factory, crash):
    root = str(tmp_path / "store")
    make_topic(root, TOPIC, QUEUES)
    b = broker_factory(root, env=SMALL)
    with Producer(b.endpoint) as p:
        for k in range(0, N, 100):
            assert all(r.ok for r in p.send_batch(TOPIC, [body_of(i) for i in range(k, k + 100)]))
    assert b.stop() == 0
    recs = _records(root)
    assert len(recs) == N
    victims = [body_of(i) for i in (7, 250, 251, 599)]      # 250 and 251: neighbours in the log
    for v in victims:
        phys, size = recs[v]
        _flip(root, phys + size // 2, 8)                    # in the body
    if crash:
        open(os.path.join(root, "abort"), "wb").close()
        open(os.path.join(root, "checkpoint"), "wb").close()
    b = broker_factory(root, env=SMALL, args=["--metrics-port", str(free_port())])
    with PullConsumer(b.endpoint) as c:
        pulled = _pull_all(c)
        raw = _pull_records_all(c)
    intact = {body_of(i) for i in range(N)} - set(victims)
    for name, got in (("PullMessage", pulled), ("PullRecords", raw)):
        lost = sorted(x[:9] for x in intact if got.get(x) != 1)
        served = sorted(x[:9] for x in got if x not in intact)
        assert lost == [], f"{name}: intact messages lost or repeated: {lost[:10]}"
        assert served == [], f"{name}: damaged records served: {served[:10]}"
    # each read path met each victim (599, the last record, is a torn tail after a crash: cut)
    assert _damaged_total(b.metrics_port) >= 2 * (len(victims) - crash)
    assert b.stop() == 0
