"""The store workload the store benchmarks and profile_store.py share: topic ``Bench`` of 8 queues,
1 KiB bodies (16 distinct, seeded), a store with the index off (the messages carry no keys), a
pre-built pool of Message objects (building them is the producer's cost, not the store's), and
the fill and read-everything loops.

    store = MessageStore(store_config(root, 1024 * MIB)).start(); store.create_topic(TOPIC, QUEUES)
    fill(store, make_bodies(), 100_000); n, nbytes, calls = get_all(store, 32, 256 * 1024, 30.0)
"""

from __future__ import annotations

import random
import time

import _report  # noqa: F401  (first: puts the code measured, TIDEMQ_BENCH_SRC or src/, first on sys.path)

from tidemq.config import StoreConfig
from tidemq.store import Message, MessageStore
from tidemq.store.types import GetStatus

TOPIC = "Bench"
QUEUES = 8
BODY_SIZE = 1024
POOL = 1024                 # Message objects in a pool


def make_bodies(n: int = 16, size: int = BODY_SIZE) -> list[bytes]:
    rnd = random.Random(42)
    return [rnd.randbytes(size) for _ in range(n)]


def store_config(root: str, segment_bytes: int, flush_disk_type: str = "ASYNC_FLUSH", **overrides) -> StoreConfig:
    return StoreConfig(root_dir=root, segment_size_bytes=segment_bytes, flush_disk_type=flush_disk_type,
                       index_enabled=False, topic_queues_default=QUEUES, **overrides)


def message_pool(bodies: list[bytes], explicit_qid: bool) -> list[Message]:
    """POOL messages of topic TOPIC; ``explicit_qid``: queue i % QUEUES, else None (round-robin)."""
    return [Message(topic=TOPIC, body=bodies[i % len(bodies)], queue_id=(i % QUEUES) if explicit_qid else None)
            for i in range(POOL)]


def fill(store: MessageStore, bodies: list[bytes], count: int) -> float:
    """put_batch of 1024 (round-robin over the queues) until ``count`` messages; returns the seconds."""
    pool = [Message(topic=TOPIC, body=bodies[i % len(bodies)]) for i in range(1024)]
    t0 = time.perf_counter()
    done = 0
    while done < count:
        k = min(1024, count - done)
        rs = store.put_batch(pool[:k])
        if not rs[-1].ok:
            raise RuntimeError(f"put_batch failed: {rs[-1]}")
        done += k
    return time.perf_counter() - t0


def get_all(store: MessageStore, max_count: int, max_bytes: int, max_s: float) -> tuple[int, int, int]:
    """(messages, body bytes, get calls) reading every queue from offset 0 to its end."""
    get = store.get
    found = GetStatus.FOUND
    n = nbytes = calls = 0
    end = time.perf_counter() + max_s
    for q in range(QUEUES):
        off = 0
        while True:
            g = get("BenchGroup", TOPIC, q, off, max_count=max_count, max_bytes=max_bytes)
            calls += 1
            if g.status is not found:
                break
            ms = g.messages
            n += len(ms)
            for m in ms:
                nbytes += len(m.body)
            off = g.next_offset
            if time.perf_counter() >= end:
                return n, nbytes, calls
    return n, nbytes, calls
