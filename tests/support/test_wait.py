"""The waits of one test share a deadline below its pytest-timeout (tests/support/wait.py, set by
tests/conftest.py): a hang ends as an assertion naming what was awaited, not as pytest-timeout's
signal inside pytest's reporting."""

import pytest

from tests.support import wait


def test_a_tests_waits_share_a_bound_below_its_pytest_timeout():
    assert wait.patience(10_000.0) <= 300 - 30, "the default 300 s limit leaves its teardown time"
    assert wait.patience(1.0) == 1.0, "a shorter wait keeps its own bound"


@pytest.mark.timeout(900)
def test_the_shared_bound_follows_the_tests_own_timeout_marker():
    assert 300 < wait.patience(10_000.0) <= 900 - 180


def test_once_the_shared_patience_is_used_up_a_wait_looks_once_and_fails_naming_what_it_awaited():
    looks = []
    wait.begin_test(0.0)
    try:
        assert wait.patience() == 0.0
        with pytest.raises(AssertionError, match="the message to arrive"):
            wait.wait_until(lambda: looks.append(1), "the message to arrive")
        assert looks == [1]
        assert wait.wait_until(lambda: "here") == "here", "a condition that holds is seen even then"
    finally:
        wait.begin_test(240.0)          # (the conftest's bound again, for the rest of this test)
    wait.end_test()
    assert wait.patience(10_000.0) == 10_000.0, "outside a test (its teardown): each wait its own bound"
