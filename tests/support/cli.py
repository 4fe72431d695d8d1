"""The `tidemq` command run in-process through click's CliRunner, for the tests of tidemq.cli."""

from __future__ import annotations

from click.testing import CliRunner, Result

from tidemq.cli.main import cli

# small segments and index for the commands that make a store (demo): the defaults preallocate GiBs
SMALL_STORE = {"TIDEMQ_SEGMENT_SIZE_BYTES": str(1 << 20), "TIDEMQ_INDEX_SLOTS": "1000",
               "TIDEMQ_INDEX_ENTRIES": "20000"}


def run(*args, input=None, env=None) -> Result:
    """``tidemq ARGS...`` (each argument str()'d); exceptions other than SystemExit propagate."""
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, env=env, catch_exceptions=False)
