"""A real ZooKeeper from Debian's ``zookeeper`` package, standalone on a free loopback port, for
the tests of automatic failover (broker/replication/coordinator.py).

``ensure_installed()`` installs the package with apt-get when it is missing (CI machines start
fresh; tests run as root); where it cannot be installed, the tests that need it are skipped with
the reason printed. ``ZooKeeperServer`` runs one in the foreground of a child process (its
data in a scratch directory, a short tick so that sessions may be short) and stops it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from . import apt
from .brokers import free_port
from .wait import wait_until

JAR = "/usr/share/java/zookeeper.jar"
CONF = "/etc/zookeeper/conf"
TICK_MS = 100                      # sessions may be as short as 2 ticks (coordinator_session_timeout_ms)


def ensure_installed() -> str | None:
    """None when ZooKeeper (and a Java) can run here, installing the Debian package if needed;
    else why not."""
    return apt.install("zookeeper", lambda: os.path.exists(JAR) and shutil.which("java") is not None,
                       update=True)


def require() -> None:
    """Skip the calling test (reason printed) when ZooKeeper cannot run here."""
    why = ensure_installed()
    if why is not None:
        print(f"SKIPPED: {why}")
        pytest.skip(why)


def _srvr(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"srvr")
            s.settimeout(2)
            out = b""
            while chunk := s.recv(4096):
                out += chunk
            return out.decode("utf-8", "replace")
    except OSError:
        return ""


class ZooKeeperServer:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="tidemq-zk-")
        self.port = free_port()
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as fh:
            fh.write(f"tickTime={TICK_MS}\ndataDir={self.dir}/data\nclientPort={self.port}\n"
                     f"clientPortAddress=127.0.0.1\nadmin.enableServer=false\nminSessionTimeout={2 * TICK_MS}\n"
                     f"maxSessionTimeout=60000\n4lw.commands.whitelist=srvr,ruok\n")
        self.log = open(os.path.join(self.dir, "zk.log"), "w")
        self.proc = subprocess.Popen(["java", "-Xmx128m", "-XX:+UseSerialGC", "-cp", f"{CONF}:{JAR}",
                                      f"-Dzookeeper.log.dir={self.dir}", "-Dzookeeper.root.logger=WARN,CONSOLE",
                                      "org.apache.zookeeper.server.ZooKeeperServerMain", cfg],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.endpoint = f"127.0.0.1:{self.port}"
        try:
            wait_until(lambda: self.proc.poll() is not None or "Mode: standalone" in _srvr(self.port),
                       "ZooKeeper to serve")
        except AssertionError:
            self.stop()
            raise
        if self.proc.poll() is not None:
            self.stop()
            raise AssertionError(f"ZooKeeper exited: {open(os.path.join(self.dir, 'zk.log')).read()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def zookeeper():
    """A running ZooKeeper (its 'HOST:PORT'), stopped after the test; skipped where it cannot run."""
    require()
    zk = ZooKeeperServer()
    try:
        yield zk.endpoint
    finally:
        zk.stop()


def wait_port_closed(port: int, timeout_s: float = 60) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return
        time.sleep(0.05)
