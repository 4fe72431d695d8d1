"""Commands on a stopped store (`verify`, `disk`, `topic`) never make one: a --root that does not
exist, is a file or holds no store is said in one line, exit 2, and nothing is created."""

import os

import pytest
from click.testing import CliRunner

from tidemq.cli.main import cli

from ..support.brokers import make_topic

COMMANDS = [["verify"], ["disk"], ["disk", "--json"], ["topic", "list"], ["topic", "status", "T"],
            ["topic", "create", "T"], ["topic", "delete", "T", "--yes"]]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def one_line(text: str) -> str:
    lines = [x for x in text.splitlines() if x.strip()]
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_missing_root_is_an_error_and_no_store_is_made(tmp_path, command):
    typo = tmp_path / "stroe"
    r = run(*command, "--root", typo)
    assert r.exit_code == 2
    line = one_line(r.output)
    assert f"no store at {typo}: the directory does not exist" in line and "tidemq serve" in line
    assert not typo.exists(), "nothing made"


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_root_that_is_a_file_is_named_as_such(tmp_path, command):
    f = tmp_path / "afile"
    f.write_text("x")
    r = run(*command, "--root", f)
    assert r.exit_code == 2
    line = one_line(r.output)
    assert f"the store root {f} is a file, not a directory" in line and "Errno" not in line
    assert f.read_text() == "x"


def test_a_directory_without_a_store_is_not_one(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run("verify", "--root", empty)
    assert r.exit_code == 2 and "OK" not in r.output
    assert f"{empty} is not a tidemq store" in one_line(r.output) and "it is empty" in r.output
    assert os.listdir(empty) == [], "nothing made in it"
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"\xff\xd8")
    r = run("disk", "--root", other)
    assert r.exit_code == 2 and f"{other} is not a tidemq store" in one_line(r.output)
    assert os.listdir(other) == ["cat.jpg"]


def test_a_store_opens_as_before(tmp_path):
    root = tmp_path / "store"
    make_topic(str(root), "T", 2)
    r = run("topic", "list", "--root", root, "--json")
    assert r.exit_code == 0 and '"T"' in r.output
    assert run("verify", "--root", root).exit_code == 0


def test_ascii_int_takes_ascii_digits_only_within_their_bounds():
    from tidemq.cli.common import ascii_int
    assert [ascii_int(t, 3) for t in ("0", "042", "999")] == [0, 42, 999]
    assert [ascii_int(t, 3) for t in ("", "1000", "²", "٣", "-1", " 1", "1_0", "1.0")] == [None] * 8
    assert ascii_int("9223372036854775808", 19) is None and ascii_int("70", 2, most=64) is None
