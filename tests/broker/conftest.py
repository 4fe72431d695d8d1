"""Broker tests: a broker in a subprocess on a free loopback port, the official client here.

The official client writes logs under ~/logs/rocketmq_python/ when imported: HOME
points at a scratch directory for the whole test process before anything imports it.
"""

import os
import signal
import subprocess
import sys
import tempfile

import pytest

_HOME = tempfile.mkdtemp(prefix="tidemq-test-home-")
os.environ["HOME"] = _HOME

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class BrokerProcess:
    def __init__(self, root: str, env: dict | None = None, args=()) -> None:
        self.root = root
        e = dict(os.environ, HOME=_HOME, PYTHONUNBUFFERED="1", **(env or {}))
        self.proc = subprocess.Popen([sys.executable, "-m", "tidemq.cli.main", "serve", "--root", root, "--port", "0",
                                      *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                                     cwd=REPO)
        line = self.proc.stdout.readline()
        if "ready on" not in line:
            self.proc.kill()
            raise AssertionError(f"broker did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(line.split("ready on ")[1].split()[0].rsplit(":", 1)[1])
        self.endpoint = f"127.0.0.1:{self.port}"

    def stop(self, sig=signal.SIGTERM, timeout=30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("broker did not stop on SIGTERM")
        return self.proc.returncode


@pytest.fixture
def broker_factory(tmp_path):
    started = []

    def start(root=None, env=None, args=()):
        b = BrokerProcess(root or str(tmp_path / "store"), env, args)
        started.append(b)
        return b

    yield start
    for b in started:
        if b.proc.poll() is None:
            b.stop(signal.SIGKILL)
