"""A real headless Chromium (Debian's ``chromium``) for tests of web pages: installed with apt
when missing (we run as root), the test skipped with the reason where that cannot be done.
Loopback pages only; no sandbox (root in a container)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-extensions", "--hide-scrollbars")


def chromium_path() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if shutil.which("apt-get") is None:
        pytest.skip("chromium is not installed and there is no apt-get to install it")
    r = subprocess.run(["apt-get", "install", "-y", "chromium"], capture_output=True, text=True, timeout=900,
                       env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    found = shutil.which("chromium")
    if r.returncode != 0 or not found:
        pytest.skip(f"cannot install chromium: apt-get exit {r.returncode}: {r.stderr.strip()[-300:]}")
    return found


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
