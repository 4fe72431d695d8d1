"""The seeded store simulation (see store_sim.py). Seeds: --sim-seeds N (default 150 per mode)."""

import pytest

from .store_sim import StoreSim


def pytest_generate_tests(metafunc):
    if "sim_seed" in metafunc.fixturenames:
        n = metafunc.config.getoption("sim_seeds")
        metafunc.parametrize("sim_seed", range(n))


@pytest.mark.parametrize("sync", [True, False], ids=["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_store_survives_crashes(sim_seed, sync):
    sim = StoreSim(sim_seed, sync=sync).run()
    assert sim.model.next_id > 0


def test_store_sim_records_every_segment_transition():
    """Each run checks every transition it saw against segment_state.TRANSITIONS (a move outside it
    fails the run); across a few seeds the runs see the segment's whole life."""
    from collections import Counter

    from tidemq.store.segment_state import SegmentState as S

    seen: Counter = Counter()
    for seed in range(12):
        for sync in (True, False):
            seen.update(StoreSim(seed, sync=sync).run().transitions)
    assert {(S.CREATED, S.WRITABLE), (S.WRITABLE, S.SEALED), (S.LOADED, S.WRITABLE), (S.LOADED, S.SEALED),
            (S.WRITABLE, S.CLOSED), (S.SEALED, S.CLOSED), (S.LOADED, S.DELETING), (S.DELETING, S.DELETED),
            (S.WRITABLE, S.FAILED), (S.FAILED, S.CLOSED)} \
        <= set(seen), sorted((f.value, t.value) for f, t in seen)
