"""The broker's HTTP port (metrics_port on metrics_host, loopback by default): Prometheus and orchestrators.

    GET /metrics       Prometheus text format (metrics.py)                     } a credential when one
    GET /              the status page (page.py)                               } is set (below)
    GET /status.json   what `tidemq status --json` prints                      }
    GET /healthz       200 "ok": the process answers                           always open
    GET /readyz        200 "ready" once the store has recovered and the gRPC   always open
                       port serves; 503 with the reason before (recovering) and after (stopping)

**Who may read it.** With ``metrics_auth_token`` set, the three views need ``Authorization: Bearer
<token>`` (Prometheus's ``authorization`` scrape option); with ``metrics_auth_user`` /
``metrics_auth_password``, HTTP basic authentication (its ``basic_auth``); either one is accepted
when both are set. Others get 401. Credentials are compared in constant time. A ``metrics_host``
off loopback without a credential is refused at start unless ``metrics_allow_unauthenticated``
says it is meant (config.BrokerConfig).

**What it costs the broker.** One thread runs an asyncio loop that serves every connection
(HTTP/1.1, keep-alive): no thread per connection. At most ``metrics_connections_max`` are open at
once (one more is closed at once, a line logged at most once a minute); one that sends nothing for
``metrics_idle_timeout_s`` is closed; a request head is at most 16 KiB. The views are rendered on a
pool of two threads (a slow render holds neither /healthz nor the broker's own loop). A peer that
goes away is not an error: no traceback, no line. It starts before the store recovers (so /readyz
can say "recovering"). A port in use is an error at start, never a silent second broker.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import hmac
import json
import logging
import socket
import threading
import time

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from . import page
from ..topic_names import SYSTEM_TOPICS
from .lag import groups_summary
from .metrics import registry_for

log = logging.getLogger("tidemq.broker")

HEAD_BYTES_MAX = 16 << 10           # a request's line and headers
OPEN_PATHS = frozenset(("/healthz", "/readyz"))
RENDER_THREADS = 2
REFUSED_LOG_INTERVAL_S = 60.0
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
           408: "Request Timeout", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
           503: "Service Unavailable"}


def topics_table(store) -> list[dict]:
    """The page's topics: queues, messages, record bytes (exact up to 4096 messages a queue,
    estimated beyond: ``bytes_exact``), the sums of the queues' min..max offsets."""
    out = []
    for t in sorted(set(store.topic_names()) - SYSTEM_TOPICS):
        n = store.queue_count(t)
        lo = [store.min_offset(t, q) for q in range(n)]
        hi = [store.max_offset(t, q) for q in range(n)]
        sized = [store.queue_bytes(t, q) for q in range(n)]
        out.append({"topic": t, "queues": n, "messages": sum(h - m for h, m in zip(hi, lo)),
                    "bytes": sum(b for b, _ in sized), "bytes_exact": all(e for _, e in sized),
                    "range": f"{sum(lo)}..{sum(hi)}"})
    return out


class Credentials:
    """What the protected views accept: a bearer token, a basic-auth user and password (either, or
    both; none: open)."""

    def __init__(self, token: str = "", user: str = "", password: str = "") -> None:
        self.token = token.encode()
        self.basic = base64.b64encode(f"{user}:{password}".encode()) if user else b""

    @property
    def required(self) -> bool:
        return bool(self.token or self.basic)

    def accept(self, header: str | None) -> bool:
        if not self.required:
            return True
        scheme, _, value = (header or "").strip().partition(" ")
        given = value.strip().encode("latin-1", "replace")
        scheme = scheme.lower()
        if scheme == "bearer" and self.token:
            return hmac.compare_digest(given, self.token)
        if scheme == "basic" and self.basic:
            return hmac.compare_digest(given, self.basic)
        return False

    def challenge(self) -> str:
        return ", ".join(x for x, on in (('Bearer realm="tidemq"', self.token), ('Basic realm="tidemq"', self.basic))
                         if on)


class OpsServer:
    def __init__(self, host: str, port: int, credentials: Credentials | None = None, connections_max: int = 64,
                 idle_timeout_s: float = 30.0) -> None:
        self.observer = None            # set once the store has recovered
        self.not_ready = "recovering: the store is starting"
        self._registry = None
        self.credentials = credentials or Credentials()
        self.connections_max = connections_max
        self.idle_timeout_s = idle_timeout_s
        self.open_connections = 0
        self.refused_connections = 0
        self._refused_logged_s = 0.0
        self._sock = _listen(host, port)                # OSError when the port is taken
        self.port = self._sock.getsockname()[1]
        self._render = concurrent.futures.ThreadPoolExecutor(RENDER_THREADS, thread_name_prefix="tidemq-http-render")
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(self._loop_error)
        self._server = None
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), name="tidemq-http", daemon=True)
        self._thread.start()
        started.wait()
        if self._server is None:
            raise OSError(f"cannot serve on {host}:{port}")

    # the loop ------------------------------------------------------------------------------------
    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._serve, sock=self._sock, limit=HEAD_BYTES_MAX))
        except OSError as e:
            log.error("metrics port: %s", e)
        finally:
            started.set()
        if self._server is not None:
            self._loop.run_forever()
            self._server.close()
            tasks = asyncio.all_tasks(self._loop)
            for t in tasks:
                t.cancel()
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    def _loop_error(self, loop, context: dict) -> None:
        """One line, no traceback (asyncio says so when accept() finds the open-file limit reached)."""
        exc = context.get("exception")
        if isinstance(exc, (asyncio.CancelledError, ConnectionError)):
            return                                       # a connection ended by close(), or by its peer
        log.warning("metrics port: %s%s", context.get("message", "error"), f": {exc!r}" if exc else "")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open_connections >= self.connections_max:
            self.refused_connections += 1
            now = time.monotonic()
            if now - self._refused_logged_s >= REFUSED_LOG_INTERVAL_S:
                self._refused_logged_s = now
                log.warning("metrics port: %d connections open (metrics_connections_max): closing new ones "
                            "(%d so far)", self.open_connections, self.refused_connections)
            writer.close()
            return
        self.open_connections += 1
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError, OSError):
            pass                                         # the peer went away, or was idle: nothing to say
        except Exception as e:  # noqa: BLE001 - a connection must never take the port down
            log.error("metrics port: %r", e)
        finally:
            self.open_connections -= 1
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """One request answered; whether the connection stays open for the next."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.idle_timeout_s)
        except asyncio.LimitOverrunError:
            await self._write(writer, 431, "text/plain; charset=utf-8", b"request head too large\n", False, False)
            return False
        except asyncio.IncompleteReadError:
            return False
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await self._write(writer, 400, "text/plain; charset=utf-8", b"bad request\n", False, False)
            return False
        method, target, version = parts
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        conn = headers.get("connection", "").lower()
        keep = ("close" not in conn) if version == "HTTP/1.1" else ("keep-alive" in conn)
        if headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers:
            keep = False                                 # a body we do not read: the connection ends after
        if method not in ("GET", "HEAD"):
            await self._write(writer, 405, "text/plain; charset=utf-8", b"GET only\n", keep, method == "HEAD",
                              [("Allow", "GET, HEAD")])
            return keep
        path = target.split("?", 1)[0]
        if path not in OPEN_PATHS and not self.credentials.accept(headers.get("authorization")):
            await self._write(writer, 401, "text/plain; charset=utf-8", b"authentication required\n", keep,
                              method == "HEAD", [("WWW-Authenticate", self.credentials.challenge())])
            return keep
        try:
            if path in OPEN_PATHS:
                code, ctype, body = self.answer(path)
            else:
                code, ctype, body = await asyncio.get_running_loop().run_in_executor(self._render, self.answer, path)
        except Exception as e:  # noqa: BLE001 - a view must never take the broker down
            log.error("status view %s failed: %r", path, e)
            code, ctype, body = 500, "text/plain; charset=utf-8", f"error: {e!r}\n".encode()
        await self._write(writer, code, ctype, body, keep, method == "HEAD")
        return keep

    async def _write(self, writer, code: int, ctype: str, body: bytes, keep: bool, head_only: bool,
                     extra: list | None = None) -> None:
        lines = [f"HTTP/1.1 {code} {REASONS.get(code, '')}", f"Content-Type: {ctype}",
                 f"Content-Length: {len(body)}", "Connection: " + ("keep-alive" if keep else "close")]
        lines += [f"{k}: {v}" for k, v in extra or ()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body))
        await asyncio.wait_for(writer.drain(), self.idle_timeout_s)

    # the views -----------------------------------------------------------------------------------
    def ready(self, observer) -> None:
        self.observer = observer
        self._registry = registry_for(observer)
        self.not_ready = None

    def stopping(self) -> None:
        self.not_ready = "stopping"

    def answer(self, path: str) -> tuple[int, str, bytes]:
        text = "text/plain; charset=utf-8"
        if path == "/healthz":
            return 200, text, b"ok\n"
        if path == "/readyz":
            return (200, text, b"ready\n") if self.not_ready is None else (503, text, f"{self.not_ready}\n".encode())
        o = self.observer
        if o is None:
            return 503, text, f"{self.not_ready}\n".encode()
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self._registry)
        if path == "/status.json":
            return 200, "application/json", json.dumps(o.status(), default=str).encode()
        if path in ("/", "/index.html"):
            html = page.render(o.status(), o.history.series(), topics_table(o.store), groups_summary(o.lag()))
            return 200, "text/html; charset=utf-8", html.encode()
        return 404, text, b"not found: /metrics /healthz /readyz / /status.json\n"

    def close(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._render.shutdown(wait=False)


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (OSError when it cannot be bound)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, addr = infos[0]
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(addr)
        s.listen(128)
        s.setblocking(False)
    except OSError:
        s.close()
        raise
    return s
