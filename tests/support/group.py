"""A broker group in tests and scripts: N real broker processes on loopback ports, each with its
own store root, electing their leader on a real ZooKeeper (zookeeper.py) or set up statically;
what each says of its role (admin Replication); killing, stopping, restarting them; reading a
topic back whole from one of them.

Ports are fixed per member for the life of the group (a restarted member comes back at the same
endpoint, under the same id): ``ports[i]`` its own, ``leader_ports[i]`` its leader port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from typing import Iterator

from .brokers import CLIENT_HOME, REPO, SMALL, admin_call, free_ports
from .wait import PATIENCE_S, wait_until


class Member:
    """One broker process of a group; its log in ``<root>.log`` (never a pipe that could fill)."""

    def __init__(self, root: str, env: dict, args: list[str]) -> None:
        self.log_path = root + ".log"
        e = {**os.environ, "PYTHONUNBUFFERED": "1", "TIDEMQ_METRICS_PORT": "0", "HOME": CLIENT_HOME, **env}
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "tidemq.cli.main", "serve", "--root", root, *args],
                                         stdout=subprocess.PIPE, stderr=log, text=True, env=e, cwd=REPO)
        line = self.proc.stdout.readline()
        if "ready on" not in line:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"broker did not start: {line!r}: {open(self.log_path).read()[-3000:]}")

    def stop(self, sig=signal.SIGTERM, timeout_s: float = PATIENCE_S) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"broker did not stop on signal {sig} within {timeout_s} s") from None


class Group:
    def __init__(self, base_dir: str, n: int = 3, coordinator: str | list[str] = "", mode: str = "SYNC",
                 name: str = "g", env: dict | None = None, leader_ports: bool = True,
                 client: dict | None = None) -> None:
        """``leader_ports``: members serve leader ports (routes name them); False: routes name the leader.
        ``coordinator``: one for every member, or one per member (each through its own proxy).
        ``client``: how the group is called from the test (tidemq.client's access_key, secret_key, tls)
        when the members have authentication or TLS on."""
        self.client = client or {}
        self.base_dir = base_dir
        self.n = n
        self.name = name
        self.coordinator = coordinator
        ports = free_ports(2 * n if leader_ports else n)      # all different: ports[i] != leader_ports[i]
        self.ports, self.leader_ports = ports[:n], ports[n:]
        self.env = {**SMALL, "TIDEMQ_REPLICATION_MODE": mode, "TIDEMQ_COORDINATOR_SESSION_TIMEOUT_MS": "1500",
                    "TIDEMQ_ELECTION_WAIT_MS": "300", "TIDEMQ_AUTO_CREATE_TOPICS": "true", **(env or {})}
        self.procs: list[Member | None] = [None] * n

    # members ----------------------------------------------------------------------------------
    def root(self, i: int) -> str:
        return os.path.join(self.base_dir, f"{self.name}-{i}")

    def endpoint(self, i: int) -> str:
        return f"127.0.0.1:{self.ports[i]}"

    @property
    def official_endpoints(self) -> str:
        """What an official client is given: every member's leader port (pick_first finds the leader)."""
        return ";".join(f"127.0.0.1:{p}" for p in self.leader_ports)

    def start(self, i: int, role: str | None = None, leader: int | None = None, env: dict | None = None) -> None:
        args = ["--port", str(self.ports[i]), "--group", self.name]
        if self.leader_ports:
            args += ["--leader-port", str(self.leader_ports[i])]
        if self.coordinator:
            c = self.coordinator
            args += ["--coordinator", c[i] if isinstance(c, list) else c]
        elif leader is not None:
            args += ["--role", "follower", "--leader", self.endpoint(leader)]
        else:
            args += ["--role", role or "leader"]
        e = {**self.env, "TIDEMQ_BROKER_ID": f"{self.name}-{i}", **(env or {})}
        self.procs[i] = Member(self.root(i), e, args)

    def start_all(self) -> None:
        for i in range(self.n):
            self.start(i)

    def start_static(self, followers=None, leader_env: dict | None = None) -> None:
        """No coordinator: member 0 leads (``leader_env`` its own settings), ``followers`` (every other
        member by default) follow it; returns once they are in sync with it."""
        followers = range(1, self.n) if followers is None else followers
        self.start(0, role="leader", env=leader_env)
        for i in followers:
            self.start(i, leader=0)
        self.wait_in_sync(0, followers)

    def alive(self, i: int) -> bool:
        p = self.procs[i]
        return p is not None and p.proc.poll() is None

    def kill(self, i: int) -> None:
        self.procs[i].proc.send_signal(signal.SIGKILL)
        self.procs[i].proc.wait()

    def signal(self, i: int, sig) -> None:
        self.procs[i].proc.send_signal(sig)

    def stop_all(self) -> None:
        for i in range(self.n):
            if self.alive(i):
                self.procs[i].stop()

    def kill_all(self) -> None:
        for i in range(self.n):
            if self.alive(i):
                self.kill(i)

    # roles --------------------------------------------------------------------------------------
    def status(self, i: int) -> dict | None:
        """Member i's replication status, or None when it does not answer."""
        if not self.alive(i):
            return None
        try:
            return self.admin(i, "Replication").get("replication")
        except Exception:  # noqa: BLE001 - killed, stopped, starting
            return None

    def admin(self, i: int, method: str, request: dict | None = None) -> dict:
        """An admin call to member i, signed and over TLS as ``client`` says."""
        c = self.client
        keys = (c["access_key"], c["secret_key"]) if c.get("access_key") else None
        return admin_call(self.endpoint(i), method, request, keys=keys, tls=c.get("tls", False))

    def leader(self, exclude: set[int] = frozenset()) -> int | None:
        """The member that leads now (not fenced), if exactly one does."""
        found = [i for i in range(self.n) if i not in exclude and (s := self.status(i)) is not None
                 and s["role"] == "leader"]
        return found[0] if len(found) == 1 else None

    def wait_leader(self, exclude: set[int] = frozenset(), timeout_s: float = PATIENCE_S) -> int:
        return wait_until(lambda: (self.leader(exclude),) if self.leader(exclude) is not None else None,
                          f"a leader of group {self.name}", timeout_s, 0.02)[0]

    def wait_all_in_sync(self) -> int:
        """The leader, once one leads and every other member is in sync with it."""
        leader = self.wait_leader()
        self.wait_in_sync(leader, [i for i in range(self.n) if i != leader])
        return leader

    def in_sync(self, leader: int, i: int) -> bool:
        s = self.status(leader)
        if s is None or s["role"] != "leader":
            return False
        me = f"{self.name}-{i}"
        return any(f["member"] == me and f["in_sync"] and f["lag_bytes"] == 0 for f in s.get("followers", []))

    def wait_in_sync(self, leader: int, members, timeout_s: float = PATIENCE_S) -> None:
        wait_until(lambda: all(self.in_sync(leader, i) for i in members),
                   f"members {list(members)} in sync with {leader}", timeout_s, 0.05)

    # reading back -------------------------------------------------------------------------------
    def read_topic(self, i: int, topic: str) -> list[bytes]:
        """Every body of ``topic`` on member i, queue by queue (PullRecords)."""
        return [bytes(m.body) for m in self.read_records(i, topic)]

    def read_records(self, i: int, topic: str) -> list:
        """Every record of ``topic`` on member i, queue by queue (PullRecords): StoredMessages (queue,
        queue offset, commit-log offset, properties: where a record counted twice comes from)."""
        from tidemq.client import PullConsumer
        out = []
        with PullConsumer(self.endpoint(i), timeout_s=60, **self.client) as c:
            for q in range(c.queue_count(topic)):
                off, end = 0, c.query_offset(topic, q, "END")
                while off < end:
                    r = c.pull_records(topic, q, off)
                    out += r.messages()
                    off = r.next_offset
        return out




@contextmanager
def running_group(base_dir: str, n: int = 2, **kw) -> Iterator[Group]:
    """A Group(base_dir, n, **kw) with every member started and in sync with the leader -- without a
    coordinator member 0 leads and the others follow it (Group.start_static), with one they elect
    (Group.wait_all_in_sync) -- and every member killed at the end."""
    g = Group(base_dir, n, **kw)
    try:
        if g.coordinator:
            g.start_all()
            g.wait_all_in_sync()
        else:
            g.start_static()
        yield g
    finally:
        g.kill_all()
