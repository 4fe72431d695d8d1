"""Every configuration mistake through `tidemq serve` is one line and a non-zero exit, never a
traceback nor a broker that runs on something else than what was meant: a ratio written as a
fraction, a misspelled section or TIDEMQ_* variable, a port out of range, a root that is a file
or on a read-only file system. A missing root is said, and made."""

import subprocess
import sys

import pytest
from click.testing import CliRunner

from tidemq.cli.main import cli

from ..support.brokers import REPO, SMALL


def serve(tmp_path, *args, env=None):
    """`tidemq serve` in this process (each case fails before anything listens)."""
    return CliRunner().invoke(cli, ["serve", "--root", str(tmp_path / "store"), "--port", "0", "--metrics-port", "0",
                                    *[str(a) for a in args]], env=env, catch_exceptions=False)


def serve_process(root, *args, timeout=120):
    """`tidemq serve` as an operator runs it: a process of its own."""
    return subprocess.run([sys.executable, "-m", "tidemq.cli.main", "serve", "--root", str(root), "--port", "0",
                           "--metrics-port", "0", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env={**SMALL, "PATH": "/usr/bin:/bin", "HOME": str(root) + "-home"})


def the_error(output: str) -> str:
    lines = [x for x in output.splitlines() if x.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def toml(tmp_path, text: str) -> str:
    p = tmp_path / "tidemq.toml"
    p.write_text(text)
    return str(p)


CASES = {
    "a ratio as a fraction": ("[store]\ndisk_space_clean_forcibly_percent = 0.85\n", {},
                              "disk_space_clean_forcibly_percent: 0.85 is not a whole number: this setting is a "
                              "percent (85 means 85 %): did you mean 85?"),
    "a misspelled section": ("[stor]\nsegment_size_bytes = 4194304\n", {},
                             "unknown section [stor] (did you mean [store]?)"),
    "a misspelled setting": ("[store]\nsegment_sise_bytes = 4194304\n", {},
                             "unknown setting 'segment_sise_bytes' (did you mean segment_size_bytes?)"),
    "a misspelled variable": ("", {"TIDEMQ_SEGMNT_SIZE_BYTES": "4194304"},
                              "environment variable TIDEMQ_SEGMNT_SIZE_BYTES is not a tidemq setting (did you mean "
                              "TIDEMQ_SEGMENT_SIZE_BYTES?)"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_configuration_mistake_is_one_line_and_exit_1(tmp_path, case):
    text, env, said = CASES[case]
    args = ["--config", toml(tmp_path, text)] if text else []
    r = serve(tmp_path, *args, env=env)
    assert r.exit_code == 1
    assert said in the_error(r.output)
    assert not (tmp_path / "store").exists(), "nothing made before the settings are right"


@pytest.mark.parametrize("args, said", [
    (["--role", "leader"], "--role leader only means something in a broker group"),
    (["--role", "follower", "--leader", "127.0.0.1:1"], "leader_endpoint (--leader)"),
    (["--leader-port", "9999"], "leader_port (--leader-port) only mean something in a broker group"),
    (["--coordinator", "127.0.0.1:2181"], "coordinator (--coordinator) only mean something in a broker group"),
])
def test_replication_flags_without_a_group_are_refused_with_the_reason(tmp_path, args, said):
    """`serve --role leader` without --group ran a single broker that acknowledged what no follower had."""
    r = serve(tmp_path, *args)
    assert r.exit_code == 1 and said in the_error(r.output) and "--group" in r.output
    assert not (tmp_path / "store").exists(), "nothing made"


def test_an_event_loop_that_is_not_installed_is_one_line_and_exit_1(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)        # import uvloop raises ImportError
    r = serve(tmp_path)
    assert r.exit_code == 1
    assert "event_loop = uvloop, but uvloop is not installed" in the_error(r.output)
    assert not (tmp_path / "store").exists(), "nothing made before the settings are right"
    r = serve(tmp_path, env={"TIDEMQ_EVENT_LOOP": "trio"})
    assert r.exit_code == 1 and "event_loop: 'trio' is not one of uvloop, asyncio" in the_error(r.output)


def test_a_port_out_of_range(tmp_path):
    r = CliRunner().invoke(cli, ["serve", "--root", str(tmp_path / "s"), "--port", "70000"], catch_exceptions=False)
    assert r.exit_code == 1 and "port: 70000 is outside [0, 65535]" in the_error(r.output)
    r = CliRunner().invoke(cli, ["serve", "--root", str(tmp_path / "s"), "--config",
                                 toml(tmp_path, "[broker]\nport = 70000\n")], catch_exceptions=False)
    assert r.exit_code == 1 and "port: 70000 is outside [0, 65535]" in the_error(r.output)
    r = CliRunner().invoke(cli, ["serve", "--root", str(tmp_path / "s"), "--port", "0", "--metrics-port", "-1"],
                           catch_exceptions=False)
    assert r.exit_code == 1 and "metrics_port: -1 is outside [0, 65535]" in the_error(r.output)


def test_a_root_that_is_a_file(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    r = serve_process(f)
    assert r.returncode == 1 and "ready" not in r.stdout
    assert f"the store root {f} is a file, not a directory" in the_error(r.stderr)
    assert f.read_text() == "x"


def test_a_root_on_a_read_only_file_system(env, tmp_path):
    ro = env.tmpfs("ro", 8)
    subprocess.run(["mount", "-o", "remount,ro", ro], check=True, capture_output=True)
    r = serve_process(ro)
    assert r.returncode == 1 and "ready" not in r.stdout
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert "Traceback" not in r.stderr and len(lines) == 2, r.stderr
    assert lines[0] == f"tidemq: {ro} is empty: creating a new store in it"
    assert lines[1].startswith(f"Error: cannot use the store at {ro}: Read-only file system"), lines[1]


def test_a_missing_root_is_said_and_made(tmp_path, broker_factory):
    root = tmp_path / "new" / "store"
    b = broker_factory(str(root), env=SMALL)
    assert b.stop() == 0
    assert f"tidemq: no store at {root}: creating a new one" in b.proc.stderr.read()
    assert (root / "checkpoint").exists()


def test_a_long_start_is_said_in_place_on_a_terminal_and_in_lines_elsewhere(capsys):
    import io

    from rich.console import Console

    from tidemq.cli.serve import StartReporter

    line = "tidemq: starting: recovering: walking the log, 1.0 MiB of 4.0 MiB of log walked (25 %)"
    tty = io.StringIO()
    said = StartReporter(Console(file=tty, force_terminal=True, width=200))
    assert said.interval_s < 1, "redrawn often on a terminal"
    said.progress(line)
    said.progress(line.replace("25 %", "50 %"))
    said.ready("tidemq broker ready on 127.0.0.1:1")
    shown = tty.getvalue()
    assert "50 %" in shown and ("\r" in shown or "\x1b[" in shown), repr(shown)
    assert capsys.readouterr().out == "tidemq broker ready on 127.0.0.1:1\n"

    log = io.StringIO()
    said = StartReporter(Console(file=log, force_terminal=False))
    assert said.interval_s is None, "the broker's START_PROGRESS_S between lines"
    said.progress(line)
    said.progress(line)
    said.ready("tidemq broker ready on 127.0.0.1:1")
    assert log.getvalue() == f"{line}\n{line}\n"


def test_a_root_another_process_holds(tmp_path):
    from tidemq.store import MessageStore, StoreConfig
    root = tmp_path / "held"
    s = MessageStore(StoreConfig(root_dir=str(root), segment_size_bytes=1 << 20, index_slots=100,
                                 index_entries=400)).start()
    try:
        r = serve_process(root)
    finally:
        s.shutdown()
    assert r.returncode == 1 and "ready" not in r.stdout
    line = the_error(r.stderr)
    assert "is in use by another process" in line and "another broker on this root?" in line
