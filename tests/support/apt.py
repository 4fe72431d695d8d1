"""Debian packages a test needs, installed with apt-get when missing (tests run as root on CI
machines that start fresh). One install at a time on the machine: parallel test workers (the
suite runs under pytest-xdist) would otherwise race for dpkg's lock and one of them would fail.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess

LOCK = "/tmp/tidemq-tests-apt.lock"
ENV = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def install(package: str, present, update: bool = False, timeout_s: float = 900) -> str | None:
    """Make ``present()`` true by installing ``package``: None when it is (or already was), else
    why not. ``present`` is checked again under the lock: another worker may have installed it."""
    if present():
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return f"Debian's {package} package is not installed and cannot be (not root, or no apt-get)"
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if present():
            return None
        env = {**os.environ, **ENV}
        if update:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, text=True,
                           timeout=timeout_s)
        r = subprocess.run(["apt-get", "install", "-y", "-qq", package], env=env, capture_output=True,
                           text=True, timeout=timeout_s)
        if r.returncode != 0:
            return f"apt-get install {package} failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-400:]}"
    if not present():
        return f"the {package} package installed, but what the tests need from it is not there"
    return None
