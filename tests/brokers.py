"""A tidemq broker in a subprocess on a free loopback port, for tests that need a real one."""

import contextlib
import os
import signal
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class BrokerProcess:
    def __init__(self, root: str, env: dict | None = None, args=()) -> None:
        self.root = root
        e = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
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


@contextlib.contextmanager
def brokers(default_root: str, home: str, default_args=()):
    """start(root=None, env=None, args=None) -> BrokerProcess; whatever is still running at
    the end is killed (tests stop their brokers themselves when the stop matters)."""
    started = []

    def start(root=None, env=None, args=None):
        b = BrokerProcess(root or default_root, dict(env or {}, HOME=home),
                          default_args if args is None else args)
        started.append(b)
        return b

    try:
        yield start
    finally:
        for b in started:
            if b.proc.poll() is None:
                b.stop(signal.SIGKILL)
