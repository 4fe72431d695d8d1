"""The durable peers the broker benchmarks measure tidemq against, in the same run.

* **Redis streams** (``redis-server`` from Debian, ``redis`` client from PyPI): AOF on with
  ``appendfsync everysec`` (the write is in the AOF before the reply, fsynced once a second:
  the same promise as tidemq's ASYNC_FLUSH), no RDB snapshots, automatic AOF rewrites off (a
  rewrite forks and rewrites the whole data set in the middle of a sample: off, the peer is
  measured at its best). Produce: ``XADD`` pipelined, ``batch`` commands per round trip.
  Consume: ``XREAD COUNT batch`` from id 0 until every entry is read.
* **NATS JetStream** (``nats-server -js`` from Debian, ``nats-py`` from PyPI): a stream with
  file storage. Produce: ``publish_async`` in batches, every ack awaited, up to ``in_flight``
  batches outstanding. Consume: a durable pull consumer (deliver all, ack policy none: a read
  by position like tidemq's pull, no per-message acks) and ``fetch(batch)`` until every message
  is read.

Each server runs as a subprocess bound to 127.0.0.1 on a free port, with its data in a scratch
directory of the caller's, and is stopped (SIGTERM, then SIGKILL) when the ``with`` block ends.
Every loop is bounded in count and in time. ``ensure_installed()`` installs the Debian packages
when a server is missing (``apt-get install -y redis-server nats-server``; ``apt-get update``
first if that fails; needs root).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import time
from collections import deque

PACKAGES = ("redis-server", "nats-server")
SEARCH_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin:/usr/local/bin:/usr/local/sbin"

STREAM = "bench"             # Redis stream key / NATS subject
NATS_STREAM = "BENCH"        # NATS stream name


class PeerError(RuntimeError):
    pass


def which(name: str) -> str | None:
    return shutil.which(name, path=SEARCH_PATH)


def ensure_installed(log=print) -> dict[str, str]:
    """Paths of redis-server and nats-server; installs the Debian packages if one is missing."""
    missing = [p for p in PACKAGES if which(p) is None]
    if missing:
        log(f"peers: installing {' '.join(PACKAGES)} (apt-get)")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        cmd = ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            log("peers: apt-get install failed; running apt-get update first")
            subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True, timeout=600)
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise PeerError(f"apt-get install {' '.join(PACKAGES)} failed: {r.stderr[-2000:]}")
    paths = {p: which(p) for p in PACKAGES}
    if None in paths.values():
        raise PeerError(f"not found after install: {[p for p, v in paths.items() if v is None]}")
    return paths  # type: ignore[return-value]


def versions() -> dict[str, str]:
    out = {}
    for name, args in (("redis-server", ["--version"]), ("nats-server", ["--version"])):
        p = which(name)
        if p:
            try:
                out[name] = subprocess.run([p, *args], capture_output=True, text=True, timeout=10).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                out[name] = "?"
    for mod in ("redis", "nats"):
        try:
            m = __import__(mod)
            out[f"py-{mod}"] = getattr(m, "__version__", None) or _dist_version(mod)
        except ImportError:
            out[f"py-{mod}"] = "missing"
    return out


def _dist_version(mod: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    for dist in {"redis": ("redis",), "nats": ("nats-py",)}.get(mod, (mod,)):
        try:
            return version(dist)
        except PackageNotFoundError:
            pass
    return "?"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise PeerError(f"server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise PeerError(f"nothing listening on 127.0.0.1:{port} after {timeout_s}s")


class _Server:
    """A server subprocess in ``workdir``; stopped by SIGTERM (then SIGKILL) at the end."""

    name = "?"

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self._log = None

    def _spawn(self, argv: list[str]) -> None:
        self._log = open(os.path.join(self.workdir, f"{self.name}.out"), "ab")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, cwd=self.workdir,
                                     start_new_session=True)
        try:
            _wait_port(self.port, self.proc, 20.0)
        except PeerError as e:
            self.stop()
            raise PeerError(f"{self.name}: {e}; log: {self.log_tail()}") from None

    def log_tail(self, n: int = 1500) -> str:
        try:
            with open(os.path.join(self.workdir, f"{self.name}.out"), "rb") as fh:
                return fh.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout_s: float = 30.0) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None


# Redis -------------------------------------------------------------------------------------
class RedisPeer(_Server):
    name = "redis"
    label = "redis streams (AOF everysec)"

    def start(self) -> None:
        conf = os.path.join(self.workdir, "redis.conf")
        with open(conf, "w") as fh:
            fh.write("\n".join([
                "bind 127.0.0.1", f"port {self.port}", "protected-mode yes", "daemonize no",
                f"dir {self.workdir}", "appendonly yes", "appendfsync everysec", 'save ""',
                "auto-aof-rewrite-percentage 0", "no-appendfsync-on-rewrite no", "loglevel warning",
                "io-threads 1", "",
            ]))
        self._spawn([which("redis-server"), conf])
        import redis
        self.client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=30)
        end = time.monotonic() + 20
        while True:
            try:
                if self.client.ping():
                    break
            except redis.exceptions.BusyLoadingError:
                pass
            if time.monotonic() > end:
                raise PeerError("redis: no PING answer")
            time.sleep(0.05)
        info = self.client.config_get("appendfsync")
        if info.get(b"appendfsync", info.get("appendfsync")) not in (b"everysec", "everysec"):
            raise PeerError(f"redis: appendfsync is {info}")

    def stop(self, timeout_s: float = 30.0) -> None:
        c = getattr(self, "client", None)
        if c is not None:
            c.close()
        super().stop(timeout_s)

    def produce(self, body: bytes, count: int, batch: int, max_s: float, in_flight: int = 1) -> dict:
        """XADD pipelined ``batch`` per round trip (``in_flight`` is not used: redis-py's pipeline
        waits for its replies); stops at ``count`` messages or ``max_s`` seconds."""
        pipe = self.client.pipeline(transaction=False)
        field = {b"b": body}
        sent = 0
        t0 = time.perf_counter()
        end = t0 + max_s
        while sent < count and time.perf_counter() < end:
            n = min(batch, count - sent)
            for _ in range(n):
                pipe.xadd(STREAM, field)
            ids = pipe.execute()
            if len(ids) != n or not ids[-1]:
                raise PeerError(f"redis: XADD pipeline answered {len(ids)} of {n}")
            sent += n
        dt = time.perf_counter() - t0
        return {"messages": sent, "seconds": dt}

    def stored(self) -> int:
        return int(self.client.xlen(STREAM))

    def consume(self, expected: int, batch: int, max_s: float) -> dict:
        """XREAD COUNT ``batch`` from the start until ``expected`` entries (or ``max_s``)."""
        last = b"0-0"
        got = nbytes = 0
        xread = self.client.xread
        t0 = time.perf_counter()
        end = t0 + max_s
        while got < expected and time.perf_counter() < end:
            r = xread({STREAM: last}, count=batch)
            if not r:
                break
            entries = r[0][1]
            for _id, fields in entries:
                nbytes += len(fields[b"b"])
            got += len(entries)
            last = entries[-1][0]
        dt = time.perf_counter() - t0
        return {"messages": got, "seconds": dt, "bytes": nbytes}


# NATS JetStream ----------------------------------------------------------------------------
class NatsPeer(_Server):
    name = "nats"
    label = "nats jetstream (file store)"

    def start(self) -> None:
        store = os.path.join(self.workdir, "js")
        self._spawn([which("nats-server"), "-js", "-sd", store, "-a", "127.0.0.1", "-p", str(self.port)])
        self.url = f"nats://127.0.0.1:{self.port}"
        asyncio.run(self._add_stream())

    async def _connect(self):
        import nats
        return await nats.connect(self.url, connect_timeout=10, max_reconnect_attempts=0)

    async def _add_stream(self) -> None:
        from nats.js.api import StorageType, StreamConfig
        nc = await self._connect()
        try:
            js = nc.jetstream()
            end = time.monotonic() + 20
            while True:          # JetStream may need a moment after the port opens
                try:
                    await js.add_stream(StreamConfig(name=NATS_STREAM, subjects=[STREAM], storage=StorageType.FILE))
                    break
                except Exception:
                    if time.monotonic() > end:
                        raise
                    await asyncio.sleep(0.1)
        finally:
            await nc.close()

    def produce(self, body: bytes, count: int, batch: int, max_s: float, in_flight: int = 4) -> dict:
        return asyncio.run(self._produce(body, count, batch, max_s, in_flight))

    async def _produce(self, body: bytes, count: int, batch: int, max_s: float, in_flight: int) -> dict:
        nc = await self._connect()
        try:
            js = nc.jetstream(publish_async_max_pending=max(4000, batch * (in_flight + 1)))
            pending: deque = deque()
            sent = 0

            async def settle_one() -> None:
                futs = pending.popleft()
                acks = await asyncio.wait_for(asyncio.gather(*futs), timeout=30)
                if len(acks) != len(futs) or acks[-1].stream != NATS_STREAM:
                    raise PeerError(f"nats: {len(acks)} acks for {len(futs)} publishes")

            t0 = time.perf_counter()
            end = t0 + max_s
            while sent < count and time.perf_counter() < end:
                n = min(batch, count - sent)
                pending.append([await js.publish_async(STREAM, body) for _ in range(n)])
                sent += n
                if len(pending) >= in_flight:
                    await settle_one()
            while pending:
                await settle_one()
            dt = time.perf_counter() - t0
            return {"messages": sent, "seconds": dt}
        finally:
            await nc.close()

    def stored(self) -> int:
        return asyncio.run(self._stored())

    async def _stored(self) -> int:
        nc = await self._connect()
        try:
            info = await nc.jetstream().stream_info(NATS_STREAM)
            return int(info.state.messages)
        finally:
            await nc.close()

    def consume(self, expected: int, batch: int, max_s: float) -> dict:
        return asyncio.run(self._consume(expected, batch, max_s))

    async def _consume(self, expected: int, batch: int, max_s: float) -> dict:
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
        nc = await self._connect()
        try:
            js = nc.jetstream()
            durable = f"c{time.monotonic_ns()}"
            sub = await js.pull_subscribe(STREAM, durable=durable, stream=NATS_STREAM,
                                          config=ConsumerConfig(ack_policy=AckPolicy.NONE,
                                                                deliver_policy=DeliverPolicy.ALL),
                                          pending_msgs_limit=max(batch * 8, 65536),
                                          pending_bytes_limit=256 << 20)
            got = nbytes = 0
            t0 = time.perf_counter()
            end = t0 + max_s
            while got < expected and time.perf_counter() < end:
                try:
                    msgs = await sub.fetch(min(batch, expected - got), timeout=5)
                except NatsTimeout:
                    break
                for m in msgs:
                    nbytes += len(m.data)
                got += len(msgs)
            dt = time.perf_counter() - t0
            await sub.unsubscribe()
            return {"messages": got, "seconds": dt, "bytes": nbytes}
        finally:
            await nc.close()


PEERS = {"redis": RedisPeer, "nats": NatsPeer}
