"""Small real file systems for tests: tmpfs mounts (we run as root), always unmounted.

    def test_x(env):                       # skips, with the reason, where mount is not allowed
        d = env.tmpfs("cl", 16)            # a 16 MiB tmpfs under the test's tmp_path
        s = env.open(StoreConfig(...))     # shut down before the mounts go
"""

from __future__ import annotations

import logging
import os
import subprocess

import pytest

from tidemq.store import MessageStore, StoreConfig


def mounted(path: str) -> bool:
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def mounts_under(base: str) -> list[str]:
    base = os.path.realpath(base)
    with open("/proc/self/mounts") as f:
        return [line.split()[1] for line in f
                if line.split()[1] == base or line.split()[1].startswith(base + os.sep)]


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def can_mount(tmp_path_factory):
    """Skip the module (with the reason) when tmpfs cannot be mounted here."""
    probe = tmp_path_factory.mktemp("tmpfs-probe")
    r = run("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe))
    if r.returncode != 0:
        pytest.skip(f"cannot mount tmpfs: {r.stderr.strip() or r.returncode}")
    r = run("umount", str(probe))
    if r.returncode != 0:
        run("umount", "-l", str(probe))
    return True


def fill_to_last_page(d: str, name: str = "ballast") -> str:
    """Fill the file system of ``d`` to its last page (a file ``name`` in ``d``, written in ever
    smaller pieces until the disk refuses even 512 bytes); its path (unlink it: room again)."""
    path = os.path.join(d, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 65536, 4096, 512):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return path


class Env:
    """Mounts and stores of one test. Teardown: stores first, then every mount (top first)."""

    def __init__(self, base) -> None:
        self.base = base
        self.points: list[str] = []
        self.stores: list[MessageStore] = []

    def tmpfs(self, name: str, size_mib: int) -> str:
        d = os.path.join(str(self.base), name)
        os.makedirs(d, exist_ok=True)
        r = run("mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", d)
        if r.returncode != 0:
            pytest.skip(f"cannot mount tmpfs on {d}: {r.stderr.strip()}")
        self.points.append(d)
        return d

    def open(self, cfg: StoreConfig, clock=None) -> MessageStore:
        s = MessageStore(cfg, clock=clock)
        self.stores.append(s)
        return s.start()

    def close(self) -> None:
        for s in reversed(self.stores):
            try:
                s.shutdown()
            except Exception as e:  # noqa: BLE001 - the mounts must go anyway
                logging.getLogger(__name__).error("shutdown in teardown failed: %r", e)
        for d in reversed(self.points):
            for _ in range(5):            # a bind mount may sit on top of the tmpfs
                if not mounted(d):
                    break
                if run("umount", d).returncode != 0:
                    run("umount", "-l", d)
        left = mounts_under(str(self.base))
        if left:
            for d in left:
                run("umount", "-l", d)
            pytest.fail(f"mounts left after the test: {left}")


@pytest.fixture
def env(can_mount, tmp_path):
    e = Env(tmp_path / "mnt")
    try:
        yield e
    finally:
        e.close()


