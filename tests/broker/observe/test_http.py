"""The HTTP port without a broker: readiness before the store is ready and while it stops; the
credentials the views require (bearer token, basic auth) while /healthz and /readyz stay open; what
connections cannot do to it: more than metrics_connections_max, idle ones, huge heads, peers that
vanish mid-request (no thread per connection, no traceback per connection); a host off loopback
without a credential refused at start."""

import base64
import logging
import socket
import threading

import pytest

from tidemq.broker.observe.http import Credentials, OpsServer
from tidemq.config import BrokerConfig, ConfigError

from tests.support.scrape import get as code_of
from tests.support.wait import PATIENCE_S, wait_until


class _Observer:
    """Enough of observe/status.Observer for /status.json."""
    def status(self):
        return {"ok": True}


def test_not_ready_while_recovering_and_while_stopping():
    ops = OpsServer("127.0.0.1", 0)
    try:
        assert code_of(ops.port, "/healthz") == (200, "ok\n")
        assert code_of(ops.port, "/readyz") == (503, "recovering: the store is starting\n")
        assert code_of(ops.port, "/metrics")[0] == 503
        ops.ready(object())
        assert code_of(ops.port, "/readyz") == (200, "ready\n")
        ops.stopping()
        assert code_of(ops.port, "/readyz") == (503, "stopping\n")
    finally:
        ops.close()


def raw(port: int, request: bytes) -> bytes:
    """The whole answer to one request on a connection of its own (closed after it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S) as s:
        s.sendall(request)
        out = b""
        while b"\r\n\r\n" not in out or len(out) < out.index(b"\r\n\r\n") + 4 + _length(out):
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        return out


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def answers(port) -> bool | None:
    """Whether /healthz answers now (a connection may be closed while dead ones still fill the cap)."""
    try:
        return code_of(port, "/healthz") == (200, "ok\n") or None
    except OSError:
        return None


def get(port, path, auth=None):
    h = f"Authorization: {auth}\r\n" if auth else ""
    return raw(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{h}\r\n".encode())


@pytest.mark.parametrize("creds, good, bad", [
    (Credentials(token="t0ken"), "Bearer t0ken", "Bearer t0kem"),
    (Credentials(user="prom", password="pw"), "Basic " + base64.b64encode(b"prom:pw").decode(),
     "Basic " + base64.b64encode(b"prom:pX").decode()),
])
def test_the_views_need_the_credential_health_and_readiness_do_not(creds, good, bad):
    ops = OpsServer("127.0.0.1", 0, creds)
    ops.ready(_Observer())
    try:
        for path in ("/status.json", "/metrics", "/"):
            for auth in (None, bad, "Digest x"):
                answer = get(ops.port, path, auth)
                assert answer.startswith(b"HTTP/1.1 401 ") and b"WWW-Authenticate: " in answer, (path, auth)
        assert get(ops.port, "/status.json", good).startswith(b"HTTP/1.1 200 ")
        assert get(ops.port, "/status.json", good).endswith(b'{"ok": true}')
        for path in ("/healthz", "/readyz"):
            assert get(ops.port, path).startswith(b"HTTP/1.1 200 ")
    finally:
        ops.close()


def test_keep_alive_head_and_bad_requests():
    ops = OpsServer("127.0.0.1", 0)
    try:
        with socket.create_connection(("127.0.0.1", ops.port), timeout=PATIENCE_S) as s:
            for _ in range(3):                           # one connection, several requests
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                got = b""
                while not got.endswith(b"ok\n"):
                    got += s.recv(4096)
                assert got.startswith(b"HTTP/1.1 200 ") and b"Connection: keep-alive" in got
        assert raw(ops.port, b"HEAD /healthz HTTP/1.1\r\nConnection: close\r\n\r\n").endswith(b"\r\n\r\n")
        assert raw(ops.port, b"POST /metrics HTTP/1.1\r\nConnection: close\r\n\r\n").startswith(b"HTTP/1.1 405 ")
        assert raw(ops.port, b"nonsense\r\n\r\n").startswith(b"HTTP/1.1 400 ")
        huge = b"GET / HTTP/1.1\r\nX: " + b"a" * (20 << 10) + b"\r\n\r\n"
        assert raw(ops.port, huge).startswith(b"HTTP/1.1 431 ")
    finally:
        ops.close()


def test_connections_are_bounded_served_by_one_thread_and_idle_ones_closed(caplog):
    """300 idle connections against a cap of 8: the ninth on is closed at once, the port still answers
    once they go, no thread per connection; an idle one is closed after the idle timeout; peers that
    vanish mid-request leave no traceback."""
    caplog.set_level(logging.INFO)
    ops = OpsServer("127.0.0.1", 0, connections_max=8, idle_timeout_s=600.0)
    held = []
    try:
        threads_before = threading.active_count()
        for _ in range(300):
            held.append(socket.create_connection(("127.0.0.1", ops.port), timeout=PATIENCE_S))
        wait_until(lambda: ops.open_connections == 8 and ops.refused_connections == 292 or None,
                   "eight connections held, the others closed")
        assert threading.active_count() <= threads_before + 2, "no thread per connection"
        try:
            assert held[-1].recv(1) == b"", "one beyond the cap is closed at once"
        except ConnectionResetError:
            pass                                         # (closed at once, as a reset)
        for s in held:
            s.close()
        held = []
        wait_until(lambda: ops.open_connections == 0 or None, "the held connections closed")
        wait_until(lambda: answers(ops.port), "the port answers again")
        for _ in range(50):                  # a request cut off half way, then a reset: no traceback
            s = socket.create_connection(("127.0.0.1", ops.port), timeout=PATIENCE_S)
            s.sendall(b"GET /metr")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
        wait_until(lambda: answers(ops.port), "the port answers after the cut connections")
        assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
        assert len([r for r in caplog.records if "metrics_connections_max" in r.getMessage()]) == 1
    finally:
        for s in held:
            s.close()
        ops.close()


def test_an_idle_connection_is_closed_after_the_idle_timeout():
    ops = OpsServer("127.0.0.1", 0, idle_timeout_s=0.2)
    try:
        with socket.create_connection(("127.0.0.1", ops.port), timeout=PATIENCE_S) as s:
            assert s.recv(1) == b"", "closed by the server, not by our timeout"
    finally:
        ops.close()


def test_off_loopback_needs_a_credential_or_an_explicit_yes():
    with pytest.raises(ConfigError, match="metrics_host '0.0.0.0' is not loopback"):
        BrokerConfig(metrics_host="0.0.0.0")
    BrokerConfig(metrics_host="0.0.0.0", metrics_auth_token="t")
    BrokerConfig(metrics_host="0.0.0.0", metrics_auth_user="u", metrics_auth_password="p")
    BrokerConfig(metrics_host="0.0.0.0", metrics_allow_unauthenticated=True)
    BrokerConfig(metrics_host="0.0.0.0", metrics_port=0)
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        BrokerConfig(metrics_host=host)
    with pytest.raises(ConfigError, match="go together"):
        BrokerConfig(metrics_auth_user="u")
