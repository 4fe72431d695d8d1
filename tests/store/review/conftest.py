"""Shared helpers for the review tests: small configurations, a pessimistic power loss,
and a fixture that shuts every started store down."""

from __future__ import annotations

import random

import pytest

from tidemq.io import ManualClock
from tidemq.store import MessageStore, StoreConfig

ROOT = "/r"


def small_cfg(**kw) -> StoreConfig:
    base = dict(root_dir=ROOT, segment_size_bytes=32 * 1024, preallocate_next_segment=False,
                consume_queue_units_per_segment=16, index_slots=64, index_entries=512, topic_queues_default=1,
                flush_interval_ms=60_000, flush_thorough_interval_ms=600_000,
                flush_consume_queue_interval_ms=60_000, checkpoint_interval_ms=60_000,
                clean_resource_interval_ms=3_600_000, delete_commit_log_files_interval_ms=0)
    base.update(kw)
    return StoreConfig(**base)


class NothingUnsyncedSurvives(random.Random):
    """An rng for FaultyFileIO.after_power_loss that picks the most pessimistic legal outcome:
    every page and file length that was not fsynced goes back to what the disk had."""

    def random(self):
        return 0.99

    def choice(self, seq):
        return seq[-1]

    def randrange(self, *a, **k):
        return 0


@pytest.fixture
def stores():
    """stores(cfg, fio, clock=None) -> a started store; every one is shut down after the test."""
    made: list[MessageStore] = []

    def start(cfg, fio, clock=None) -> MessageStore:
        s = MessageStore(cfg, fio=fio, clock=clock or ManualClock())
        made.append(s)
        return s.start()

    yield start
    for s in reversed(made):
        try:
            s.shutdown()
        except Exception:       # noqa: BLE001 - a store a test broke on purpose
            pass
