"""Spark tests: one SparkSession for the whole run (local[2], UI off, 2 shuffle partitions)
and brokers in subprocesses on free loopback ports."""

import tempfile

import pytest

from ..support.brokers import SMALL, brokers

_HOME = tempfile.mkdtemp(prefix="tidemq-spark-home-")


@pytest.fixture(scope="session")
def spark():
    from tidemq.spark import session
    # local[2,2]: two cores, and a failed task is retried once (the sink's retry test needs it)
    s = session("local[2,2]", "tidemq-tests", spark_sql_session_timeZone="UTC")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


@pytest.fixture
def broker(tmp_path):
    """A broker on a fresh, small store (auto-created topics unless args say otherwise)."""
    with brokers(str(tmp_path / "store"), _HOME, ("--auto-create-topics",)) as start:
        yield lambda root=None, env=None, args=None: start(root, {**SMALL, **(env or {})}, args)

