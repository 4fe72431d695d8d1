"""Waiting for something to happen, without betting on how fast the machine is.

A test waits for an outcome (a segment pre-made, an alarm raised, a message delivered), never
for a time. ``wait_until`` polls a condition and returns as soon as it holds (normally in
milliseconds); its bound, ``PATIENCE_S``, only turns a hang into a failure that says what was
awaited. It is never an assertion about speed: a machine whose CPUs are busy with other work
takes longer and still passes.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")

PATIENCE_S = 120.0      # "wait until X happens": a bound for a hang, far above any stall

# The waits of one test share a deadline below pytest-timeout's limit for the test (tests/conftest.py
# sets it when the test's setup begins, clears it at its teardown): three waits of PATIENCE_S each add
# up past the 300 s limit, and a hung test then failed by pytest-timeout's signal, which can land
# inside pytest's own reporting (INTERNALERROR) instead of as an assertion naming what was awaited.
_test_deadline_s: float | None = None       # monotonic time the running test's waits end by
_test_budget_s = 0.0


def begin_test(budget_s: float | None) -> None:
    """The running test's waits share ``budget_s`` from now (None: no shared bound)."""
    global _test_deadline_s, _test_budget_s
    _test_budget_s = budget_s or 0.0
    _test_deadline_s = None if budget_s is None else time.monotonic() + budget_s


def end_test() -> None:
    global _test_deadline_s
    _test_deadline_s = None


def patience(timeout_s: float = PATIENCE_S) -> float:
    """``timeout_s``, or what is left of the running test's shared patience when that is less (0 once
    it ran out): the bound for one wait of a test (``event.wait(patience())``)."""
    if _test_deadline_s is None:
        return timeout_s
    return max(0.0, min(timeout_s, _test_deadline_s - time.monotonic()))


def ran_out(limit_s: float) -> str:
    """What an assertion adds when ``limit_s`` was cut by the test's shared patience."""
    if _test_deadline_s is not None and _test_deadline_s - time.monotonic() <= 0.0:
        return f" (the test's waits share {_test_budget_s:.0f} s, below its pytest-timeout; they are used up)"
    return ""


def wait_until(cond: Callable[[], T], what: str = "the condition", timeout_s: float = PATIENCE_S,
               interval_s: float = 0.005) -> T:
    """Call ``cond()`` until it returns something truthy, and return that. AssertionError naming
    ``what`` if it is still false after ``timeout_s`` (or once the test's shared patience ran out)."""
    limit_s = patience(timeout_s)
    end = time.monotonic() + limit_s
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() >= end:
            raise AssertionError(f"timed out after {limit_s:.0f} s waiting for {what}{ran_out(limit_s)}")
        time.sleep(interval_s)
