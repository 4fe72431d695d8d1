"""The broker's HTTP port (metrics_port on metrics_host, loopback by default): Prometheus and orchestrators.

    GET /metrics       Prometheus text format (metrics.py)
    GET /healthz       200 "ok": the process answers
    GET /readyz        200 "ready" once the store has recovered and the gRPC port serves; 503 with
                       the reason before (recovering) and after (stopping)
    GET /              the status page (page.py)
    GET /status.json   what `tidemq status --json` prints

It starts before the store recovers (so /readyz can say "recovering") and runs on its own
threads: a scrape never waits on the event loop, and a slow scraper holds only its thread.
A port in use is an error at start, never a silent second broker.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from . import page
from ..topic_names import SYSTEM_TOPICS
from .lag import groups_summary
from .metrics import registry_for

log = logging.getLogger("tidemq.broker")


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


class OpsServer:
    def __init__(self, host: str, port: int) -> None:
        self.observer = None            # set once the store has recovered
        self.not_ready = "recovering: the store is starting"
        self._registry = None
        ops = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt, *args):      # no line per scrape on stderr
                log.debug("http %s", fmt % args)

            def do_GET(self):
                try:
                    code, ctype, body = ops.answer(self.path.split("?", 1)[0])
                except Exception as e:  # noqa: BLE001 - a view must never take the broker down
                    log.error("status view %s failed: %r", self.path, e)
                    code, ctype, body = 500, "text/plain; charset=utf-8", f"error: {e!r}\n".encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer((host, port), Handler)   # OSError when the port is taken
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="tidemq-http", daemon=True)
        self._thread.start()

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
        self.httpd.shutdown()
        self.httpd.server_close()
