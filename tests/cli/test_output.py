"""tidemq.cli.output: tables to stdout with every row and lines never cut (outside a terminal),
JSON to stdout, errors to stderr with the exit code asked for."""

import json

import pytest

from tidemq.cli import output


@pytest.fixture
def consoles(monkeypatch, capsys):
    """The module's consoles made again, so they write to pytest's captured stdout and stderr."""
    from rich.console import Console
    monkeypatch.setattr(output, "out", Console(highlight=False, soft_wrap=True, width=output.WIDE))
    monkeypatch.setattr(output, "err", Console(stderr=True, highlight=False, soft_wrap=True, width=output.WIDE))
    return capsys


def test_a_table_holds_its_title_columns_and_rows_whole(consoles):
    long = "/a/" + "very-long-directory-name/" * 8
    output.table("dirs", ["path", "n"], [[long, 1], ["short", None]])
    out, err = consoles.readouterr()
    assert err == "" and "dirs" in out and "path" in out
    assert long in out and "None" in out and "…" not in out


def test_json_goes_to_stdout_and_reads_back():
    import io
    import contextlib
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        output.emit_json({"a": [1, 2], "when": object.__name__})
    assert json.loads(buf.getvalue()) == {"a": [1, 2], "when": "object"}


def test_json_of_what_json_cannot_say_uses_its_text():
    import io
    import contextlib
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        output.emit_json({"path": __import__("pathlib").Path("/x/y")})
    assert json.loads(buf.getvalue()) == {"path": "/x/y"}


def test_fail_writes_to_stderr_and_exits_with_the_code(consoles):
    with pytest.raises(SystemExit) as e:
        output.fail("no store at /x", code=2)
    assert e.value.code == 2
    out, err = consoles.readouterr()
    assert out == "" and "error: no store at /x" in err
    with pytest.raises(SystemExit) as e:
        output.fail("refused")
    assert e.value.code == 1
