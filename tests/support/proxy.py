"""A loopback TCP proxy a test controls, in front of a broker (or a ZooKeeper): it loses a response on
purpose, or cuts the link as a network partition does.

    with HoldingProxy(broker.port) as px:      # clients connect to px.endpoint
        px.hold_after(b"unique body bytes")    # once a client sent them, nothing goes back to it
        ...                                    # the request reached the broker; its answer is lost
        px.retarget(new_broker.port)           # new connections go to the restarted broker
        px.release()                           # held connections are closed: the client retries

Bytes are forwarded as they come, both ways, one thread per direction and connection. After
``hold_after(marker)``, the first connection whose client sends ``marker`` (found across reads)
is *held*: what it sent is still forwarded, but nothing from the broker reaches the client any
more, and the connection stays open when the broker's side closes (a client that saw it close
would retry at once, before the test is ready). ``release()`` closes the held connections: a call
waiting on one fails (gRPC UNAVAILABLE) and the client makes a new connection, through the proxy,
to wherever it points then. Everything is closed by ``close()``.

``cut()`` / ``heal()``: a partition. While cut, nothing crosses the proxy either way, and nothing
is lost or reset: what either side sends (a close too) waits in the proxy, as a partitioned
network holds packets that TCP retransmits, and new connections are accepted but carry nothing;
each side finds out by its own timeouts (kazoo's read timeout, the follower's idle timeout). On
``heal()`` everything held goes through, in order.
"""

from __future__ import annotations

import socket
import threading


class _Conn:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.held = False


class HoldingProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1", source: str | None = None) -> None:
        """``source``: the address the proxy connects to the target from (another loopback address,
        127.0.0.2...: the target sees its clients come from there)."""
        self.host = host
        self.source = source
        self.target_port = target_port
        self._listen = socket.create_server((host, 0))
        self.port = self._listen.getsockname()[1]
        self.endpoint = f"{host}:{self.port}"
        self._lock = threading.Lock()
        self._conns: list[_Conn] = []
        self._marker: bytes | None = None
        self.held_once = threading.Event()          # set when a connection got held
        self._open = threading.Event()              # clear while the link is cut
        self._open.set()
        self.cuts = 0
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    def __enter__(self) -> "HoldingProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _spawn(self, fn, *args) -> None:
        t = threading.Thread(target=fn, args=args, daemon=True, name="test-proxy")
        self._threads.append(t)
        t.start()

    def hold_after(self, marker: bytes) -> None:
        with self._lock:
            self._marker = marker

    def retarget(self, port: int) -> None:
        self.target_port = port

    def cut(self) -> None:
        """Nothing crosses any more (held, not lost) until ``heal()``."""
        self.cuts += 1
        self._open.clear()

    def heal(self) -> None:
        self._open.set()

    @property
    def is_cut(self) -> bool:
        return not self._open.is_set()

    def _wait_open(self) -> None:
        while not self._open.wait(0.5):
            if self._closed:
                return

    def release(self) -> None:
        with self._lock:
            held = [c for c in self._conns if c.held]
        for c in held:
            _close(c.client)
            _close(c.upstream)

    def close(self) -> None:
        self._closed = True
        self._open.set()
        _close(self._listen)
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            _close(c.client)
            _close(c.upstream)
        for t in self._threads:
            t.join(timeout=10)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listen.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((self.host, self.target_port), timeout=10,
                                                    source_address=(self.source, 0) if self.source else None)
                upstream.settimeout(None)
            except OSError:
                _close(client)                       # nobody there: the client sees the close, retries
                continue
            c = _Conn(client, upstream)
            with self._lock:
                self._conns.append(c)
            self._spawn(self._to_upstream, c)
            self._spawn(self._to_client, c)

    def _to_upstream(self, c: _Conn) -> None:
        tail = b""
        while True:
            try:
                data = c.client.recv(65536)
            except OSError:
                data = b""
            self._wait_open()                        # a cut holds what the client sent, its close too
            if not data:
                _close(c.upstream)
                if not c.held:
                    _close(c.client)
                return
            with self._lock:
                marker = self._marker
                if marker is not None and not c.held and marker in tail + data:
                    c.held = True
                    self._marker = None              # one connection is held, once
                    self.held_once.set()
            tail = (tail + data)[-(len(marker) - 1):] if marker and len(marker) > 1 else b""
            try:
                c.upstream.sendall(data)
            except OSError:
                pass                                  # the broker is gone: what the client sends is lost

    def _to_client(self, c: _Conn) -> None:
        while True:
            try:
                data = c.upstream.recv(65536)
            except OSError:
                data = b""
            self._wait_open()
            if not data:
                if not c.held:                        # a held connection stays open until release()
                    _close(c.client)
                return
            if c.held:
                continue                              # the answer is lost
            try:
                c.client.sendall(data)
            except OSError:
                _close(c.upstream)
                return


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
