"""Broker tests: a broker in a subprocess on a free loopback port, the official client here.

The official client writes logs under ~/logs/rocketmq_python/ when imported: HOME
points at a scratch directory for the whole test process before anything imports it.
"""

import os
import tempfile

import pytest

_HOME = tempfile.mkdtemp(prefix="tidemq-test-home-")
os.environ["HOME"] = _HOME

from tests.brokers import REPO, BrokerProcess as _BrokerProcess, brokers  # noqa: F401 (REPO: for the tests here)


def BrokerProcess(root: str, env: dict | None = None, args=()):
    return _BrokerProcess(root, dict(env or {}, HOME=_HOME), args)


@pytest.fixture
def broker_factory(tmp_path):
    with brokers(str(tmp_path / "store"), _HOME) as start:
        yield start
