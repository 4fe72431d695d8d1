"""tidemq.cli.receive: the ways to read `tidemq receive` refuses before it connects (a position
needs a queue, a group receives from every queue), and a broker that does not answer. (Receiving
from a real broker as a group and from a position: tests/cli/test_group.py.)"""

import pytest

from ..support.cli import run

NOBODY = ("--endpoint", "127.0.0.1:1")


@pytest.mark.parametrize("args, says", [
    (["--offset", "0"], "--offset needs --queue"),
    (["--group", "g", "--offset", "3"], "--offset needs --queue"),
    ([], "give --group"),
    (["--queue", "1"], "give --group"),
    (["--group", "g", "--queue", "0"], "--queue goes with --offset or --from"),
    (["--count", "0", "--group", "g"], "--count"),
    (["--from", "middle"], "--from"),
])
def test_what_cannot_be_read_is_a_usage_error(args, says):
    r = run("receive", "T", *args, *NOBODY)
    assert r.exit_code == 2 and says in r.output, r.output


@pytest.mark.parametrize("args", [["--group", "g"], ["--from", "beginning"], ["--queue", "0", "--offset", "0"]])
def test_a_broker_that_does_not_answer_is_exit_2(args):
    r = run("receive", "T", *args, *NOBODY)
    assert r.exit_code == 2 and "broker at 127.0.0.1:1: UNAVAILABLE" in r.output, r.output
