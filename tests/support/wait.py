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


def wait_until(cond: Callable[[], T], what: str = "the condition", timeout_s: float = PATIENCE_S,
               interval_s: float = 0.005) -> T:
    """Call ``cond()`` until it returns something truthy, and return that. AssertionError naming
    ``what`` if it is still false after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() >= end:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)
