"""Shared fixtures for the store tests: small configurations and stores that are
always shut down."""

from __future__ import annotations

import pytest

from tidemq.config import KIB
from tidemq.io import OsFileIO
from tidemq.store import MessageStore, StoreConfig

# Small sizes: every store a test makes is cheap to create, fill and delete.
SMALL = dict(
    segment_size_bytes=64 * KIB,
    index_slots=1000,
    index_entries=4000,
    consume_queue_units_per_segment=64,
    preallocate_next_segment=False,
)


def small_config(root, **overrides) -> StoreConfig:
    """A StoreConfig under ``root`` with the small test sizes (overrides win)."""
    values = dict(SMALL)
    values.update(overrides)
    return StoreConfig(root_dir=str(root), **values)


class NoSyncFileIO(OsFileIO):
    """The real file system without fsync: for tests where durability is not the subject."""

    def fsync(self, handle) -> None:
        pass

    def fsync_dir(self, path: str) -> None:
        pass


@pytest.fixture
def make_config(tmp_path):
    """make_config(**overrides) -> a small StoreConfig rooted in tmp_path / "store"."""

    def make(**overrides) -> StoreConfig:
        root = overrides.pop("root_dir", str(tmp_path / "store"))
        return small_config(root, **overrides)

    return make


@pytest.fixture
def open_store():
    """open_store(cfg, fio=None, clock=None) -> a started MessageStore, shut down after the test."""
    stores: list[MessageStore] = []

    def make(cfg: StoreConfig, fio=None, clock=None) -> MessageStore:
        s = MessageStore(cfg, fio=fio, clock=clock)
        stores.append(s)
        s.start()
        return s

    yield make
    for s in reversed(stores):
        s.shutdown()


@pytest.fixture
def nosync_fio() -> NoSyncFileIO:
    return NoSyncFileIO()


@pytest.fixture
def store(make_config, open_store) -> MessageStore:
    """A started store with the small sizes on the real file system."""
    return open_store(make_config())
