"""Broker start-up: a long store start is said while it runs (what it does, how far)."""

import asyncio
import threading

from tidemq.broker import server
from tidemq.config import BrokerConfig, StoreConfig


class SlowStart:
    """A store whose start waits until the broker has said something about it."""

    def __init__(self) -> None:
        self.said = threading.Event()

    def start(self):
        assert self.said.wait(120), "the broker said nothing while the store started"
        return self

    def start_progress(self) -> str:
        return "recovering: checking the end of the log, 1.0 MiB of 4.0 MiB of log walked (25 %)"


def test_a_long_store_start_is_said_until_it_is_done(monkeypatch):
    monkeypatch.setattr(server, "START_PROGRESS_S", 0.01)
    lines: list[str] = []
    store = SlowStart()

    def progress(line: str) -> None:
        lines.append(line)
        store.said.set()

    b = server.Broker(StoreConfig(), BrokerConfig(), progress)
    assert asyncio.run(b._start_store(store)) is store
    assert lines and lines[0] == "tidemq: starting: " + store.start_progress()


def test_a_second_broker_on_a_port_in_use_is_a_start_up_error(broker_factory, tmp_path):
    """gRPC shares a port through SO_REUSEPORT by default: two brokers would both say ready and
    split the clients between two stores. The second one must refuse to start, before its store."""
    import subprocess
    import sys

    from tests.support.brokers import REPO, SMALL

    first = broker_factory(env=SMALL)
    second_root = tmp_path / "second"
    r = subprocess.run([sys.executable, "-m", "tidemq.cli.main", "serve", "--root", str(second_root),
                        "--port", str(first.port), "--metrics-port", "0"], capture_output=True, text=True,
                       timeout=120, cwd=REPO, env={**SMALL, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 1 and "ready" not in r.stdout, (r.stdout, r.stderr)
    assert f"cannot listen on 127.0.0.1:{first.port}" in r.stderr and "Traceback" not in r.stderr
    assert not (second_root / "commitlog").exists(), "the second broker's store was never opened"
    assert first.stop() == 0


def test_the_start_up_check_refuses_a_listening_port_and_passes_a_free_one():
    import socket

    import pytest

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            server.check_port_free("127.0.0.1", port)
    server.check_port_free("127.0.0.1", port)            # closed now: free
    server.check_port_free("127.0.0.1", 0)
