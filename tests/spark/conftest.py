"""Spark tests: one SparkSession for the whole run (local[2], UI off, 2 shuffle partitions)
and brokers in subprocesses on free loopback ports.

Both readers: a test module that reads with ``format("tidemq")`` says
``pytestmark = pytest.mark.usefixtures("reader")`` and each of its tests runs twice, with
the JVM reader (the session conf spark.tidemq.reader=auto: the JVM reader holds the name
and hands only writes and tiered reads to the Python one) and with ``reader=python``. The
JVM run is skipped, saying why, only where the JVM reader could not be built (no javac)."""

import os
import tempfile

import pytest

from ..support.brokers import REPO, SMALL, brokers
from ..support.spark import checkout_jar

_HOME = tempfile.mkdtemp(prefix="tidemq-spark-home-")
READERS = ("jvm", "python")


# The JVM reader's jar is built once for the checkout, not once per test process: its cache
# (tidemq.spark.jar: $XDG_CACHE_HOME/tidemq, keyed by the sources, Spark's and javac's versions)
# is under build/ for every worker and run (HOME is a fresh scratch directory per process; the
# build under a lock: tests/support/spark.py's checkout_jar); tests/spark/test_jar.py builds in its
# own caches.
os.environ.setdefault("XDG_CACHE_HOME", os.path.join(REPO, "build", "test-cache"))


@pytest.fixture(scope="session")
def spark():
    from tidemq.spark import session
    checkout_jar()
    # local[2,2]: two cores, and a failed task is retried once (the sink's retry test needs it)
    s = session("local[2,2]", "tidemq-tests", spark_sql_session_timeZone="UTC")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def jvm_reader(spark):
    """Whether the JVM reader holds the name ``tidemq`` in the test session."""
    from tidemq.spark import PROVIDER, _provider_class
    return _provider_class(spark) == PROVIDER


@pytest.fixture
def jvm(spark, jvm_reader):
    """The JVM reader's test entry (org.tidemq.spark.ReadOne); the test is skipped, saying why, without it."""
    if not jvm_reader:
        pytest.skip("the JVM reader is not available (no javac: see tidemq.spark.jar's log line)")
    return spark._jvm.org.tidemq.spark.ReadOne


def pytest_generate_tests(metafunc):
    if "reader" in metafunc.fixturenames:
        metafunc.parametrize("reader", READERS, indirect=True)


@pytest.fixture
def reader(request, spark, jvm_reader):
    """The reader this test runs with (see the module docstring); the session's conf for it."""
    if request.param == "jvm" and not jvm_reader:
        from tidemq.spark.jar import JarError, build
        try:
            build()
            why = "built, but not loaded in this session"
        except JarError as e:
            why = str(e)
        pytest.skip(f"the JVM reader is not available: {why}")
    spark.conf.set("spark.tidemq.reader", "auto" if request.param == "jvm" else "python")
    yield request.param
    spark.conf.set("spark.tidemq.reader", "auto")


@pytest.fixture
def broker(tmp_path):
    """A broker on a fresh, small store (auto-created topics unless args say otherwise)."""
    with brokers(str(tmp_path / "store"), _HOME, ("--auto-create-topics",)) as start:
        yield lambda root=None, env=None, args=None: start(root, {**SMALL, **(env or {})}, args)
