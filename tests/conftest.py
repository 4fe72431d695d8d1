"""Fixtures every test directory may use, and the command-line options.

Importing tests.support.brokers first points HOME at a scratch directory, before anything
imports the official RocketMQ client (it writes logs under ~/logs/)."""

import pytest

from tests.support.brokers import broker_factory  # noqa: F401  (fixture)
from tests.support.auth import ca_certificates, certificate  # noqa: F401  (fixtures)
from tests.support.tmpfs import can_mount, env  # noqa: F401  (fixtures)


def pytest_addoption(parser):
    parser.addoption("--sim-seeds", type=int, default=150,
                     help="seeds per flush mode for the store simulation, and two thirds of it per "
                          "replication mode for the broker group's (tests/sim)")


# the order of the files on the xdist workers: the longest first (tests/support/schedule.py)
_FILE_CLOCK = None


def _controller(config) -> bool:
    """This process hands the files to xdist workers (not a worker, not a run with -n 0)."""
    return not hasattr(config, "workerinput") and config.getoption("dist", "no") != "no"


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") == "loadfile":
        from tests.support.schedule import CACHE_KEY, LongestFileFirst
        cache = getattr(config, "cache", None)          # None with -p no:cacheprovider
        return LongestFileFirst(config, log, cache.get(CACHE_KEY, {}) if cache is not None else {})
    return None


def pytest_configure(config):
    global _FILE_CLOCK
    # the default suite leaves out tests marked slow (a shorter test of the same promise runs in it):
    # -m slow runs them, -m "slow or not slow" everything
    if not config.option.markexpr:
        config.option.markexpr = "not slow"
    if _controller(config) and getattr(config, "cache", None) is not None:
        from tests.support.schedule import FileClock
        _FILE_CLOCK = FileClock()


def _patience_budget_s(item) -> float | None:
    """What the waits of ``item`` may share: its pytest-timeout (marker, --timeout, ini) less a fifth
    (at least 30 s) for its teardown and the report; None without a timeout."""
    marker = item.get_closest_marker("timeout")
    timeout = None
    if marker is not None:
        timeout = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    if timeout is None:
        try:
            timeout = item.config.getoption("timeout", None) or item.config.getini("timeout")
        except ValueError:              # (pytest-timeout not loaded: -p no:timeout)
            return None
    try:
        timeout = float(timeout)
    except (TypeError, ValueError):
        return None
    return timeout - max(30.0, timeout / 5) if timeout > 60 else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    from tests.support.wait import begin_test
    begin_test(_patience_budget_s(item))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    from tests.support.wait import end_test
    end_test()           # a teardown's waits (stopping what the test started) keep their own bounds


def pytest_runtest_logreport(report):
    if _FILE_CLOCK is not None:
        _FILE_CLOCK.add(report.nodeid, report.duration)


def pytest_sessionfinish(session):
    if _FILE_CLOCK is not None:
        _FILE_CLOCK.save(session.config.cache)
