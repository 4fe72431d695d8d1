"""A tidemq broker in a subprocess on a free loopback port, for tests that need a real one; the
``broker_factory`` fixture; environment presets for small stores; a topic made and a store read
while no broker holds it.

The official client writes logs under ~/logs/rocketmq_python/ when imported: HOME points at a
scratch directory for the whole test process (set when this module is imported, by the root
conftest.py, before anything imports the client); brokers get it too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile

import pytest

from tidemq.store import MessageStore, StoreConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CLIENT_HOME = tempfile.mkdtemp(prefix="tidemq-test-home-")
os.environ["HOME"] = CLIENT_HOME

KIB = 1 << 10
# small segments and index: the defaults preallocate 2 GiB of segments and 400 MiB of index per store
SMALL = {"TIDEMQ_SEGMENT_SIZE_BYTES": str(4 << 20), "TIDEMQ_INDEX_SLOTS": "1000", "TIDEMQ_INDEX_ENTRIES": "4000"}
# nothing is flushed for ten minutes (no round finds enough dirty pages before the thorough one):
# every byte sent stays in the flush backlog
NO_FLUSH = {**SMALL, "TIDEMQ_FLUSH_INTERVAL_MS": "60000", "TIDEMQ_FLUSH_LEAST_PAGES": "1000000",
            "TIDEMQ_FLUSH_THOROUGH_INTERVAL_MS": "600000",
            "TIDEMQ_FLUSH_BACKLOG_HIGH_BYTES": str(64 * KIB), "TIDEMQ_SEND_HOLD_MS_MAX": "600"}


def free_port() -> int:
    """A port nothing listens on now (for a second port of a broker: its metrics)."""
    return free_ports(1)[0]


def free_ports(k: int) -> list[int]:
    """``k`` different ports nothing listens on now: each socket stays bound until all are picked
    (one by one, the system may hand the port just closed out again: a broker given it as its port
    and its leader port could not start)."""
    socks = []
    try:
        for _ in range(k):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class BrokerProcess:
    def __init__(self, root: str, env: dict | None = None, args=()) -> None:
        self.root = root
        # no metrics port unless a test asks for one (the default 8082 is one port for the whole machine)
        e = {**os.environ, "PYTHONUNBUFFERED": "1", "TIDEMQ_METRICS_PORT": "0", **(env or {})}
        self.proc = subprocess.Popen([sys.executable, "-m", "tidemq.cli.main", "serve", "--root", root, "--port", "0",
                                      *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                                     cwd=REPO)
        line = self.proc.stdout.readline()
        if "ready on" not in line:
            self.proc.kill()
            raise AssertionError(f"broker did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(line.split("ready on ")[1].split()[0].rsplit(":", 1)[1])
        self.endpoint = f"127.0.0.1:{self.port}"
        self.metrics_port = int(line.split("metrics on ")[1].split()[0].rstrip(")").rsplit(":", 1)[1]) \
            if "metrics on " in line else 0

    def stop(self, sig=signal.SIGTERM, timeout=60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"broker did not stop on signal {sig} within {timeout} s")
        return self.proc.returncode


@contextlib.contextmanager
def brokers(default_root: str, home: str = CLIENT_HOME, default_args=()):
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
        stuck = None
        for b in started:
            try:
                if b.proc.poll() is None:
                    b.stop(signal.SIGKILL)
            except AssertionError as e:          # the others are stopped all the same
                stuck = stuck or e
            finally:
                for pipe in (b.proc.stdout, b.proc.stderr):     # (read by tests until now)
                    if pipe is not None:
                        pipe.close()
        if stuck is not None:
            raise stuck


@pytest.fixture
def broker_factory(tmp_path):
    """broker_factory(root=None, env=None, args=None) -> a started BrokerProcess (default root:
    tmp_path / "store"); every one still running at the end is killed."""
    with brokers(str(tmp_path / "store")) as start:
        yield start


def _small_store(root: str) -> MessageStore:
    return MessageStore(StoreConfig(root_dir=root, segment_size_bytes=4 << 20, index_slots=1000,
                                    index_entries=4000)).start()


def make_topic(root, name, queues=4):
    """Create a topic in the store at ``root`` (no broker may hold it)."""
    s = _small_store(root)
    try:
        s.create_topic(name, queues)
    finally:
        s.shutdown()


def stored(root, topic):
    """Every message of ``topic`` in the store at ``root`` (no broker may hold it), queue by queue."""
    s = _small_store(root)
    try:
        out = []
        for q in range(s.queue_count(topic)):
            off = s.min_offset(topic, q)
            while True:
                g = s.get("t", topic, q, off, max_count=32)
                if not g.messages:
                    break
                out += g.messages
                off = g.next_offset
        return out
    finally:
        s.shutdown()


def admin_call(endpoint: str, method: str, request: dict | None = None, keys: tuple | None = None,
               tls=False) -> dict:
    """tidemq.client.admin.call with a deadline no stall reaches; signed with ``keys`` (access key,
    secret key) when given, over TLS (a client.settings.TlsOptions) when given."""
    import time

    from tidemq.client.admin import call
    from tidemq.protocol.signing import date_time, signed_metadata
    md = signed_metadata(keys[0], keys[1], date_time(time.time())) if keys else None
    return call(endpoint, method, request, timeout_s=60.0, metadata=md, tls=tls)


def topic_end(endpoint: str, topic: str) -> int:
    """The number of messages ``topic`` holds on the broker (0 while it does not exist)."""
    for t in admin_call(endpoint, "ListTopics")["topics"]:
        if t["topic"] == topic:
            return sum(q["max_offset"] for q in t["queues"])
    return 0
