"""A tidemq broker subprocess for the broker benchmarks: ``python -m tidemq.cli.main serve --root R
--port 0`` on loopback, running the code being measured (TIDEMQ_BENCH_SRC or the checkout's src/),
with HOME in a scratch directory (importing the official client package writes ~/logs/).

    with BrokerProcess(root, home, env={"TIDEMQ_PULL_IN_MEMORY_COUNT_MAX": "256"}) as b:
        b.create_topic("Bench", 8)
        ... b.endpoint ...
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from _report import BENCH_SRC

READY = "ready on "


class BrokerError(RuntimeError):
    pass


class BrokerProcess:
    def __init__(self, root: str, home: str, env: dict | None = None, args=(), start_timeout_s: float = 60.0,
                 log_path: str | None = None, module: str = "tidemq.cli.main", src: str = BENCH_SRC) -> None:
        """``module``: what ``python -m`` runs with ``serve ...`` (a benchmark's variant of the broker:
        a module of bench/ that changes one thing and runs tidemq.cli.main); ``src``: the tidemq source
        tree it runs (a benchmark comparing two trees in one run)."""
        self.root = root
        os.makedirs(home, exist_ok=True)
        # no HTTP port unless asked: another broker on this shared machine may hold the default one
        e = dict(os.environ, HOME=home, PYTHONUNBUFFERED="1", **{"TIDEMQ_METRICS_PORT": "0", **(env or {})})
        e["PYTHONPATH"] = src + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
        if module != "tidemq.cli.main":
            e["PYTHONPATH"] += os.pathsep + os.path.dirname(os.path.abspath(__file__))
        self.log_path = log_path or os.path.join(home, "broker.stderr")
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", module, "serve", "--root", root, "--port", "0",
                                      *args], stdout=subprocess.PIPE, stderr=self._log, env=e, cwd=home)
        self.pid = self.proc.pid
        line = self._readline(start_timeout_s)
        if READY not in line:
            self.kill()
            raise BrokerError(f"broker did not start: {line!r}; stderr: {self.stderr_tail()}")
        self.port = int(line.split(READY)[1].split()[0].rsplit(":", 1)[1])
        self.endpoint = f"127.0.0.1:{self.port}"
        # keep draining stdout so the broker never blocks on a full pipe
        threading.Thread(target=self._drain, daemon=True).start()

    def _readline(self, timeout_s: float) -> str:
        out: list[bytes] = []
        t = threading.Thread(target=lambda: out.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(timeout_s)
        return out[0].decode(errors="replace") if out else ""

    def _drain(self) -> None:
        try:
            for _ in self.proc.stdout:
                pass
        except (OSError, ValueError):
            pass

    def stderr_tail(self, n: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, 2)
                size = fh.tell()
                fh.seek(max(0, size - n))
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def create_topic(self, name: str, queues: int) -> None:
        from tidemq.client.admin import call
        r = call(self.endpoint, "CreateTopic", {"name": name, "queues": queues})
        if not r.get("ok") or r.get("queues") != queues:
            raise BrokerError(f"CreateTopic {name}: {r}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 60.0) -> float:
        """SIGTERM and wait (the store flushes and closes); SIGKILL if it does not stop in time.
        Returns the seconds the stop took."""
        t0 = time.perf_counter()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
                raise BrokerError(f"broker did not stop within {timeout_s}s of SIGTERM; stderr: {self.stderr_tail()}")
        self._log.close()
        return time.perf_counter() - t0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self._log.closed:
            self._log.close()

    def __enter__(self) -> "BrokerProcess":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            try:
                self.stop()
            except BrokerError:
                pass
        self.kill()


def proc_cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of a process (and its finished children not counted), from /proc."""
    if not pid:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as fh:
            parts = fh.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class TidemqSystem:
    """tidemq as one of the systems of a broker benchmark, with the peers' interface
    (start / produce / stored / consume / stop): a broker subprocess on a fresh store in
    ``workdir``, topic ``topic`` with ``queues`` queues, tidemq.client for everything."""

    name = "tidemq"
    label = "tidemq (tidemq.client batches)"

    def __init__(self, workdir: str, topic: str = "Bench", queues: int = 8, env: dict | None = None) -> None:
        self.workdir = workdir
        self.topic = topic
        self.queues = queues
        self.env = env or {}
        self.broker: BrokerProcess | None = None

    @property
    def pid(self) -> int | None:
        return self.broker.pid if self.broker else None

    def start(self) -> None:
        self.broker = BrokerProcess(os.path.join(self.workdir, "store"), os.path.join(self.workdir, "home"),
                                    env=self.env)
        self.broker.create_topic(self.topic, self.queues)

    def restart(self, env: dict | None = None) -> None:
        """Stop the broker and start it again on the same store (e.g. with other settings)."""
        self.stop()
        if env is not None:
            self.env = env
        self.broker = BrokerProcess(os.path.join(self.workdir, "store"), os.path.join(self.workdir, "home"),
                                    env=self.env)

    def stop(self) -> None:
        if self.broker is not None:
            b, self.broker = self.broker, None
            try:
                b.stop()
            finally:
                b.kill()

    def __enter__(self) -> "TidemqSystem":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def check_alive(self) -> None:
        if self.broker is None or not self.broker.alive():
            raise BrokerError(f"the broker died; stderr: {self.broker.stderr_tail() if self.broker else ''}")

    def produce(self, body: bytes, count: int, batch: int, max_s: float, in_flight: int = 4, raw: bool = True) -> dict:
        """Producer.send_batches: ``batch`` messages per request (SendRecords; ``raw=False``:
        SendMessage), ``in_flight`` requests under way; stops at ``count`` messages or ``max_s``
        seconds (the batches already under way finish)."""
        from tidemq.client import Producer
        bodies = [body] * batch
        sent = 0
        with Producer(self.broker.endpoint, max_in_flight=in_flight, timeout_s=60, raw=raw) as p:
            p.queue_count(self.topic)            # untimed: the channel is connected
            t0 = time.perf_counter()
            end = t0 + max_s

            def batches():
                nonlocal sent
                while sent < count and time.perf_counter() < end:
                    n = min(batch, count - sent)
                    sent += n
                    yield bodies if n == batch else bodies[:n]

            res = p.send_batches(self.topic, batches())
            dt = time.perf_counter() - t0
        # every answer checked OK, from its code (SendResults; a snapshot's client before it: a list)
        bad = res.failed() if hasattr(res, "failed") else [r for r in res if not r.ok]
        if len(res) != sent or bad:
            raise BrokerError(f"tidemq: {len(res)} results for {sent} messages, {len(bad)} not OK"
                              + (f" (first: {bad[0].code} {bad[0].error})" if bad else ""))
        return {"messages": sent, "seconds": dt}

    def offsets(self) -> list[tuple[int, int]]:
        from tidemq.client import PullConsumer
        with PullConsumer(self.broker.endpoint) as c:
            return [(c.query_offset(self.topic, q, "BEGINNING"), c.query_offset(self.topic, q, "END"))
                    for q in range(self.queues)]

    def stored(self) -> int:
        return sum(hi - lo for lo, hi in self.offsets())

    def consume(self, expected: int, batch: int, max_s: float, threads: int = 1, api: str = "records",
                prefetch: int = 2) -> dict:
        """Read every queue from its first offset until its end (queried before timing), ``batch``
        per request; ``threads`` > 1: the queues split over that many threads, each with its own
        consumer (channel). ``api``: ``records`` is PullConsumer.iter_records (raw pulls, with
        ``prefetch`` more pulls under way while a response is decoded here into StoredMessage
        objects, each one's body and queue offset read, as the peers' clients hand out
        per-message objects with body and id; ``prefetch=0``: one pull at a time); ``pull`` is
        PullConsumer.pull (PullMessage: the protocol's stream of one protobuf Message each)."""
        import concurrent.futures as cf

        from tidemq.client import PullConsumer
        if api not in ("records", "pull"):
            raise ValueError(f"api must be records or pull, not {api!r}")
        ranges = self.offsets()
        total = sum(hi - lo for lo, hi in ranges)
        if total < expected:
            raise BrokerError(f"tidemq: the queues hold {total} messages, {expected} expected")
        consumers = [PullConsumer(self.broker.endpoint, group="bench") for _ in range(threads)]
        for c in consumers:
            c.queue_count(self.topic)            # untimed: connected
        t0 = time.perf_counter()
        end = t0 + max_s

        def read(c, qids) -> tuple[int, int]:
            got = nbytes = 0
            for q in qids:
                off, hi = ranges[q]
                if api == "records":
                    if off >= hi or time.perf_counter() >= end:
                        continue
                    for r in c.iter_records(self.topic, q, off, hi, max_count=batch, prefetch=prefetch):
                        msgs = r.messages()
                        for m in msgs:
                            nbytes += len(m.body)
                            if m.queue_offset < off:
                                raise BrokerError(f"tidemq: queue {q} offset {m.queue_offset} before {off}")
                        if not msgs:
                            raise BrokerError(f"tidemq: records of queue {q} at {off} (< end {hi}) found nothing "
                                              f"(code {r.code}, next {r.next_offset})")
                        got += len(msgs)
                        off = r.next_offset
                        if time.perf_counter() >= end:
                            break                   # closes the iteration: the pulls under way are cancelled
                    continue
                while off < hi and time.perf_counter() < end:
                    r = c.pull(self.topic, q, off, batch_size=batch)
                    msgs = r.messages
                    for m in msgs:
                        nbytes += len(m.body)
                    if not msgs:
                        raise BrokerError(f"tidemq: {api} of queue {q} at {off} (< end {hi}) found nothing "
                                          f"(code {r.code}, next {r.next_offset})")
                    got += len(msgs)
                    off = r.next_offset
            return got, nbytes

        try:
            if threads == 1:
                parts = [read(consumers[0], range(self.queues))]
            else:
                with cf.ThreadPoolExecutor(threads) as ex:
                    parts = list(ex.map(lambda i: read(consumers[i], range(i, self.queues, threads)), range(threads)))
            dt = time.perf_counter() - t0
        finally:
            for c in consumers:
                c.close()
        return {"messages": sum(p[0] for p in parts), "seconds": dt, "bytes": sum(p[1] for p in parts)}
