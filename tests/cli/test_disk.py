"""`tidemq disk` on a stopped store: the human output (directories with their state and ratios,
the writes, the last cleanup, the forecast), exit 0 with room and exit 1 once the disk is at its
warning ratio; and, as any table of the command, lines whole when stdout is not a terminal; --json
of a running broker (--endpoint)."""

import json
import os
import subprocess
import sys

from click.testing import CliRunner

from tidemq.cli.main import cli

from ..support.brokers import REPO, make_topic
from ..support.cli import run

MIB = 1 << 20


def used_percent(path: str) -> float:
    st = os.statvfs(path)
    return 100.0 * (st.f_blocks - st.f_bfree) / st.f_blocks


def test_disk_human_output_and_exit_1_at_the_warning_ratio(env, tmp_path):
    root = os.path.join(env.tmpfs("disk", 32), "store")
    make_topic(root, "T", 2)
    r = CliRunner().invoke(cli, ["disk", "--root", root], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out = r.output
    assert "directories" in out and os.path.join(root, "commitlog") in out and "writable" in out
    assert "75/85/90" in out and "writes: accepted" in out
    assert "last cleanup: nothing deleted since start" in out and "forecast:" in out

    with open(os.path.join(os.path.dirname(root), "ballast"), "wb") as f:
        while used_percent(root) < 91:
            f.write(b"\0" * MIB)
    r = CliRunner().invoke(cli, ["disk", "--root", root], catch_exceptions=False)
    assert r.exit_code == 1, r.output
    assert "full" in r.output and "writes: refused: disk full" in r.output
    assert "90% now" in r.output and "forecast: writes are refused now" in r.output, r.output


def test_tables_are_not_cut_when_stdout_is_not_a_terminal(tmp_path):
    deep = tmp_path / ("a-directory-with-a-long-name-" * 4) / "store"
    make_topic(str(deep), "T", 2)
    r = subprocess.run([sys.executable, "-m", "tidemq.cli.main", "disk", "--root", str(deep)], capture_output=True,
                       text=True, timeout=120, cwd=REPO, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                              "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    assert str(deep / "commitlog") in r.stdout and str(deep / "consumequeue") in r.stdout
    assert "…" not in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) > 80, "lines as long as they need to be"


def test_disk_through_the_broker(tmp_path, broker_factory):
    b = broker_factory(str(tmp_path / "store"))
    r = run("disk", "--endpoint", b.endpoint, "--json")
    st = json.loads(r.output)
    assert {d["role"] for d in st["directories"]} == {"commitlog", "consumequeue", "index"}
    assert "forecast" in st and st["flags"]["write_refusal"] is None
