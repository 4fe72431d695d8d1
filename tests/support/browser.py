"""A real headless Chromium (Debian's ``chromium``) for tests of web pages: installed with apt
when missing (we run as root), the test skipped with the reason where that cannot be done.
Loopback pages only; no sandbox (root in a container)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from . import apt

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-extensions", "--hide-scrollbars")


def chromium_path() -> str:
    why = apt.install("chromium", lambda: shutil.which("chromium") is not None)
    if why is not None:
        pytest.skip(f"cannot use chromium: {why}")
    return shutil.which("chromium")


def run(exe: str, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *FLAGS, *args], capture_output=True, text=True, timeout=timeout_s)


def dom(exe: str, url: str) -> str:
    """The page's DOM after it was loaded and rendered."""
    r = run(exe, "--dump-dom", url)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def screenshot(exe: str, url: str, path: str, size: str = "1100,1250") -> None:
    r = run(exe, f"--screenshot={path}", f"--window-size={size}", url)
    assert r.returncode == 0, r.stderr[-2000:]
