"""Fixtures of the command tests: a running broker (a subprocess, tests/support/brokers.py) that
creates topics on first use."""

import pytest

from ..support.brokers import SMALL


@pytest.fixture
def broker(broker_factory):
    b = broker_factory(env=SMALL, args=["--auto-create-topics"])
    yield b
    assert b.stop() == 0
