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
