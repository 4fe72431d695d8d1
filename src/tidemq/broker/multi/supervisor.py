"""The parent of ``tidemq serve --processes N``: starts N members, restarts one that dies, stops them.

* Start: member i is ``tidemq serve --member i/N`` over ``<root>/p<i>`` on port ``port + i``
  (metrics ``metrics_port + i``, or right after the members' ports when those would overlap, as the
  defaults 8081 / 8082 do; port 0: any free port, kept across its restarts). Once every member
  said it is ready, ``members.json`` names their endpoints and the parent says one ready line. A
  member that exits before it is ready stops the start: every member is stopped, the parent exits 1.
* A member that dies afterwards (a crash, kill -9) is restarted on the same port over the same store
  (its own recovery runs), and ``members.json`` names its new pid; clients retry the send that failed
  on another queue (the official producers do, up to their attempts). More than ``RESTARTS_MAX``
  restarts within ``RESTART_WINDOW_S``: every member is stopped and the parent exits 1 (a member that
  cannot stay up is an operator's problem, not a loop's).
* SIGTERM / SIGINT to the parent: SIGTERM to every member (each stops cleanly: RPCs, flush, store
  closed), SIGKILL to one still running after ``STOP_S_MAX``; then the parent exits 0. A terminal's
  Ctrl-C reaches the members too (one process group): each stops cleanly, and the parent, stopping,
  restarts none. Members die with the parent (member.py): no member outlives it. (Members are not
  put in sessions of their own: with the kernel's autogroup scheduling each would then be its own
  scheduling group, and on this busy 2-CPU machine that halved N = 2's throughput again; bench/README.md.)
* One parent per root (``multi/lock``); a root keeps its N (``members.json``): the queues' owners
  are q % N, so another N would hide messages.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from ...layout import STORE_SIGNS
from . import MEMBERS_FILE, PARENT_LOCK, member_root, multi_dir
from .siblings import MultiError, read_json, write_json

log = logging.getLogger("tidemq.broker")

READY = "ready on "
RESTARTS_MAX = 5
RESTART_WINDOW_S = 60.0
STOP_S_MAX = 60.0
POLL_S = 0.2


def member_ports(port: int, metrics_port: int, count: int) -> tuple[int, int]:
    """The first member's port and metrics port (member i: ``+ i``; 0: any free port). Metrics ports that
    would fall among the members' ports (the defaults, 8081 and 8082, with N > 1) start right after them
    instead; MultiError for ports past 65535."""
    if port and metrics_port and metrics_port < port + count and port < metrics_port + count:
        metrics_port = port + count
    for first, what in ((port, "port"), (metrics_port, "metrics port")):
        if first and first + count - 1 > 65535:
            raise MultiError(f"{count} members from {what} {first} go past 65535: give a lower one")
    return port, metrics_port


@dataclass
class Member:
    index: int
    port: int
    metrics_port: int
    proc: subprocess.Popen | None = None
    endpoint: str = ""
    metrics: str = ""
    ready: threading.Event = field(default_factory=threading.Event)
    restarts: list[float] = field(default_factory=list)
    announced: subprocess.Popen | None = None      # the process members.json names


class Supervisor:
    def __init__(self, root: str, count: int, host: str, port: int, metrics_port: int, member_args: list[str],
                 command: list[str] | None = None, say=print) -> None:
        """``member_args``: options every member gets (--config, --host, ...) besides its own root,
        ports and --member; ``command``: what runs a member (default ``python -m tidemq.cli.main serve``);
        ``say``: where the ready line goes."""
        self.root = root
        self.count = count
        self.host = host
        self.member_args = member_args
        self.command = command or [sys.executable, "-m", "tidemq.cli.main", "serve"]
        self.say = say
        self.stopping = threading.Event()
        port, metrics_port = member_ports(port, metrics_port, count)
        self.members = [Member(i, port + i if port else 0, metrics_port + i if metrics_port else 0)
                        for i in range(count)]
        self._lock_fh = None

    # the root --------------------------------------------------------------------------------
    def claim_root(self) -> None:
        """The parent's lock, and a root that is this N's (MultiError otherwise)."""
        if os.path.isdir(self.root) and any(os.path.exists(os.path.join(self.root, s)) for s in STORE_SIGNS):
            raise MultiError(f"{self.root} holds one broker's store: --processes needs a root of its own "
                             f"(the members' stores are its p0, p1, ...)")
        d = multi_dir(self.root)
        os.makedirs(d, exist_ok=True)
        fh = open(os.path.join(d, PARENT_LOCK), "a+b")     # noqa: SIM115 - held for the parent's life
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise MultiError(f"another `tidemq serve --processes` runs on {self.root}") from None
        self._lock_fh = fh
        had = read_json(os.path.join(d, MEMBERS_FILE))
        if isinstance(had, dict) and had.get("processes") not in (None, self.count):
            self.release_root()
            raise MultiError(f"{self.root} was made with --processes {had['processes']} (a topic's queue q lives "
                             f"in member q % N): give --processes {had['processes']}")

    def release_root(self) -> None:
        if self._lock_fh is not None:
            self._lock_fh.close()
            self._lock_fh = None

    # members ---------------------------------------------------------------------------------
    def _spawn(self, m: Member) -> None:
        argv = [*self.command, "--root", member_root(self.root, m.index),
                "--port", str(m.port), "--metrics-port", str(m.metrics_port),
                "--member", f"{m.index}/{self.count}/{os.getpid()}", "--processes", "1", *self.member_args]
        m.ready.clear()
        m.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        threading.Thread(target=self._read, args=(m, m.proc), name=f"member-{m.index}-out", daemon=True).start()

    def _read(self, m: Member, proc: subprocess.Popen) -> None:
        """The member's stdout: its ready line (its port), then drained."""
        for raw in proc.stdout:
            line = raw.decode(errors="replace").strip()
            if READY in line and not m.ready.is_set() and m.proc is proc:
                ep = line.split(READY, 1)[1].split()[0]
                m.port = int(ep.rsplit(":", 1)[1])
                m.endpoint = f"{self.host}:{m.port}"
                if "metrics on " in line:
                    m.metrics = line.split("metrics on ", 1)[1].split(")")[0].split(",")[0].strip()
                    m.metrics_port = int(m.metrics.rsplit(":", 1)[1])
                m.ready.set()
        proc.stdout.close()

    def write_members(self) -> None:
        doc = {"processes": self.count,
               "members": [{"endpoint": m.endpoint, "pid": m.proc.pid if m.proc else 0, "metrics": m.metrics}
                           for m in self.members]}
        write_json(os.path.join(multi_dir(self.root), MEMBERS_FILE), doc)
        for m in self.members:
            m.announced = m.proc

    def start(self) -> bool:
        """Every member started and ready (True), or stopped again (False: one exited, or a stop came)."""
        for m in self.members:
            self._spawn(m)
        while not all(m.ready.is_set() for m in self.members):
            if self.stopping.wait(POLL_S):
                return False
            for m in self.members:
                if m.proc.poll() is not None and not m.ready.is_set():
                    log.error("member %d exited during the start (code %s): stopping", m.index, m.proc.returncode)
                    return False
        self.write_members()
        return True

    def watch(self) -> int:
        """Restart members that die until a stop (0) or too many restarts (1)."""
        while not self.stopping.wait(POLL_S):
            for m in self.members:
                code = m.proc.poll()
                if code is None:
                    if m.ready.is_set() and m.announced is not m.proc:
                        self.write_members()              # a restarted member is ready: its pid named
                    continue
                if self.stopping.is_set():
                    break
                now = time.monotonic()
                m.restarts = [t for t in m.restarts if now - t < RESTART_WINDOW_S] + [now]
                if len(m.restarts) > RESTARTS_MAX:
                    log.error("member %d died %d times within %.0f s (last code %s): stopping every member",
                              m.index, len(m.restarts), RESTART_WINDOW_S, code)
                    return 1
                log.warning("member %d (pid %d) died (code %s): restarting it on port %d", m.index, m.proc.pid,
                            code, m.port)
                self._spawn(m)
        return 0

    def stop(self) -> None:
        """SIGTERM to every member, SIGKILL to one still running after STOP_S_MAX; waited for."""
        self.stopping.set()
        procs = [m.proc for m in self.members if m.proc is not None]
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        end = time.monotonic() + STOP_S_MAX
        for p in procs:
            try:
                p.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("member pid %d did not stop within %.0f s: killed", p.pid, STOP_S_MAX)
                p.kill()
                p.wait()

    def run(self) -> int:
        """Start, say ready, watch until SIGTERM / SIGINT; the exit code."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        self.claim_root()
        try:
            code = 1
            if self.start():
                first = self.members[0]
                eps = ", ".join(m.endpoint for m in self.members)
                extras = f", metrics on {first.metrics}" if first.metrics else ""
                self.say(f"tidemq broker ready on {first.endpoint} ({self.count} processes: {eps}; "
                         f"store {self.root}{extras})")
                code = self.watch()
            elif self.stopping.is_set():
                code = 0
            return code
        finally:
            self.stop()
            self.release_root()
