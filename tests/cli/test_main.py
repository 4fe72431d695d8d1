"""tidemq.cli.main: the `tidemq` group lists every subcommand with its one-line help and imports a
subcommand's module only when it is named."""

import importlib

import pytest

from tidemq.cli.main import SUBCOMMANDS

from ..support.cli import run


def test_help_lists_subcommands():
    r = run("--help")
    assert r.exit_code == 0
    assert "demo" in r.output and "verify" in r.output


def test_help_lists_every_subcommand_with_its_summary():
    r = run("-h")
    assert r.exit_code == 0
    for name, (_module, _attr, summary) in SUBCOMMANDS.items():
        assert any(line.split()[:1] == [name] and summary[:30] in line for line in r.output.splitlines()), name


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_each_subcommand_resolves_to_its_module_and_answers_help(name):
    module, attr, _summary = SUBCOMMANDS[name]
    assert hasattr(importlib.import_module(module), attr)
    r = run(name, "--help")
    assert r.exit_code == 0 and r.output.startswith("Usage: ") and f" {name} " in r.output.splitlines()[0]


def test_an_unknown_subcommand_is_a_usage_error():
    r = run("sned", "T")
    assert r.exit_code == 2 and "No such command" in r.output
