"""Shared fixtures for the store tests: small configurations and stores that are always shut
down, on the real file system or in memory (FaultyFileIO)."""

from __future__ import annotations

import pytest

from tidemq.io import ManualClock
from tidemq.store import MessageStore, StoreConfig

from ..support.store import NoSyncFileIO, small_config


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


@pytest.fixture
def stores():
    """stores(cfg, fio, clock=None) -> a started store (default clock: a ManualClock); every one is
    shut down after the test, including those a test broke on purpose (killed, crashed)."""
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
