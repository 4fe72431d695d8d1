"""Stores in tests: small configurations (on the real file system, or in memory over
FaultyFileIO with every background service quiet), a file layer without fsync, a pessimistic
power loss, reading a topic back.

Fixtures over these live in tests/store/conftest.py.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from tidemq.config import KIB
from tidemq.io import OsFileIO
from tidemq.store import MessageStore, StoreConfig

if TYPE_CHECKING:
    import numpy as np

# Small sizes: every store a test makes is cheap to create, fill and delete. Topics are created on
# first put (auto_create_topics), as most store tests put to a topic they never created.
SMALL = dict(
    auto_create_topics=True,
    segment_size_bytes=64 * KIB,
    index_slots=1000,
    index_entries=4000,
    consume_queue_units_per_segment=64,
    preallocate_next_segment=False,
)

MEMORY_ROOT = "/r"      # the root of the in-memory stores (FaultyFileIO)


def small_config(root, **overrides) -> StoreConfig:
    """A StoreConfig under ``root`` with the small test sizes (overrides win)."""
    values = dict(SMALL)
    values.update(overrides)
    return StoreConfig(root_dir=str(root), **values)


def memory_config(**overrides) -> StoreConfig:
    """A tiny StoreConfig rooted at MEMORY_ROOT for a FaultyFileIO, one queue per topic, whose
    background services (flush, queue flush, checkpoint, cleanup) wait a minute or more: the test
    calls flush_queues() / clean() itself."""
    base = dict(root_dir=MEMORY_ROOT, segment_size_bytes=32 * KIB, preallocate_next_segment=False,
                consume_queue_units_per_segment=16, index_slots=64, index_entries=512, topic_queues_default=1, auto_create_topics=True,
                flush_interval_ms=60_000, flush_thorough_interval_ms=600_000,
                flush_consume_queue_interval_ms=60_000, checkpoint_interval_ms=60_000,
                clean_resource_interval_ms=3_600_000, delete_commit_log_files_interval_ms=0)
    base.update(overrides)
    return StoreConfig(**base)


class NoSyncFileIO(OsFileIO):
    """The real file system without fsync: for tests where durability is not the subject."""

    def fsync(self, handle) -> None:
        pass

    def fsync_dir(self, path: str) -> None:
        pass


class NothingUnsyncedSurvives(random.Random):
    """An rng for FaultyFileIO.after_power_loss that picks the most pessimistic legal outcome:
    every page and file length that was not fsynced goes back to what the disk had."""

    def random(self):
        return 0.99

    def choice(self, seq):
        return seq[-1]

    def randrange(self, *a, **k):
        return 0


def topic_messages(store: MessageStore, topic: str) -> list[tuple[int, bytes]]:
    """(commit-log offset, body) of every message of ``topic``, all queues, in log order."""
    out = []
    for q in range(store.queue_count(topic)):
        off = 0
        while True:
            g = store.get("t", topic, q, off, max_count=32)
            if not g.messages:
                break
            out += [(m.commitlog_offset, m.body) for m in g.messages]
            off = g.next_offset
    return sorted(out)


def topic_bodies(store: MessageStore, topic: str) -> list[bytes]:
    """The bodies of every message of ``topic``, all queues, sorted."""
    return sorted(b for _, b in topic_messages(store, topic))


def slices(ids, bodies, tags=None, keys=None, properties=None) -> tuple[bytes, "np.ndarray"]:
    """(data, fields) of MessageStore.put_slices: per message its id, tags, keys, user properties
    and body (bytes; None or b"": none) back to back in ``data``; ``fields`` n x 10 uint32, the
    offsets of the five then their lengths (store.record_loop.SLICE_FIELDS)."""
    import numpy as np

    n = len(bodies)
    cols = [ids, tags or [b""] * n, keys or [b""] * n, properties or [b""] * n, bodies]
    fields = np.zeros((n, 10), np.uint32)
    parts, pos = [], 0
    for i in range(n):
        for j in range(5):
            v = cols[j][i] or b""
            fields[i, j], fields[i, 5 + j] = pos, len(v)
            parts.append(v)
            pos += len(v)
    return b"".join(parts), fields


def lose_message(store: MessageStore, topic: str, queue_id: int, queue_offset: int) -> None:
    """A message lost as a rebuild past a damaged record leaves it: its record's body damaged in the
    log (its CRC fails) and its consume-queue unit a hole (size 0). A hole over an intact record is
    a damaged unit, which the read path mends from the log (store/unit_repair.py)."""
    from tidemq.record import codec
    m = store.get("", topic, queue_id, queue_offset, max_count=1).messages[0]
    mf = store.segments.find(m.commitlog_offset)
    at = m.commitlog_offset - mf.start_offset + codec.OFF_BODY
    mf.mapping[at] ^= 0xFF
    store.queues.get(topic, queue_id).put_unit_checked(queue_offset, 0, 0, 0)
