"""tidemq.cli.send: what `tidemq send` refuses before it sends anything, and a broker that does not
answer. (Sending to a real broker, human and --json: tests/cli/test_group.py, test_query.py.)"""

from ..support.cli import run

NOBODY = ("--endpoint", "127.0.0.1:1")


def test_a_property_without_a_value_is_a_usage_error():
    r = run("send", "T", "x", "--property", "novalue", *NOBODY)
    assert r.exit_code == 2 and "KEY=VALUE" in r.output
    r = run("send", "T", "x", "--property", "=v", *NOBODY)
    assert r.exit_code == 2 and "KEY=VALUE" in r.output


def test_nothing_to_send_is_an_error():
    r = run("send", "T", *NOBODY, input="")
    assert r.exit_code == 1 and "nothing to send" in r.output


def test_a_broker_that_does_not_answer_is_exit_2():
    r = run("send", "T", "x", *NOBODY)
    assert r.exit_code == 2 and "broker at 127.0.0.1:1: UNAVAILABLE" in r.output
