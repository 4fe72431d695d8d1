"""./tidemq, the launcher: `./tidemq archive --help` (or -h) installs nothing, a real archive run
installs the spark extra first. Run on a copy of the launcher over a stand-in .venv whose python
records what it is asked to do (the real .venv is never touched)."""

import os
import shutil
import subprocess

from tests.support.brokers import REPO

STUB = """#!/bin/sh
echo "$0 $*" >> "{log}"
"""


def launcher(tmp_path):
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    for f in ("tidemq", "pyproject.toml", "setup.py", "scripts/bootstrap.sh"):
        shutil.copy2(os.path.join(REPO, f), root / f)
    shutil.copytree(os.path.join(REPO, "src", "tidemq", "accel_c"), root / "src" / "tidemq" / "accel_c")
    bin_ = root / ".venv" / "bin"
    bin_.mkdir(parents=True)
    log = tmp_path / "calls"
    for exe in ("python", "tidemq"):
        (bin_ / exe).write_text(STUB.format(log=log))
        (bin_ / exe).chmod(0o755)
    want = subprocess.run(["bash", "-c", "source scripts/bootstrap.sh && install_stamp"], cwd=root, check=True,
                          capture_output=True, text=True).stdout.strip()
    (root / ".venv" / ".installed-base").write_text(want + "\n")      # installed, without the spark extra
    return root, log


def calls(log) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_archive_help_installs_nothing_and_a_real_run_installs_spark(tmp_path):
    root, log = launcher(tmp_path)
    for flag in ("--help", "-h"):
        r = subprocess.run([str(root / "tidemq"), "archive", flag], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "installing" not in r.stderr and not any("pip" in c for c in calls(log)), (r.stderr, calls(log))
        assert calls(log)[-1].endswith(f"tidemq archive {flag}")
    assert not (root / ".venv" / ".installed-spark").exists()

    r = subprocess.run([str(root / "tidemq"), "archive", "--root", "x"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "installing dependencies (spark)" in r.stderr, r.stderr
    pip = [c for c in calls(log) if "pip install" in c]
    assert len(pip) == 1 and pip[0].endswith(f"-e {root}[spark]"), pip
    assert calls(log)[-1].endswith("tidemq archive --root x")
