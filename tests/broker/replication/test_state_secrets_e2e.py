"""Secrets in a follower's copy of its leader's state are sealed under the group's key
(protection/sealed.py, replication/state.py): a leader and a follower with authentication on and TLS
off, the follower's member channel through a loopback proxy that records every byte the leader sends.
A user made on the leader, and the receipt-handle key, reach the follower (it checks that user's
signature, and hands the same handle key to a promoted self) while neither ever crosses the wire in
clear. Before, both went as plain JSON: whoever read the member channel learnt every user's secret."""

import json
import socket
import threading
import time

import grpc

from tidemq.client import admin
from tidemq.protocol.signing import date_time, signed_metadata
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.auth import AUTH
from ...support.wait import PATIENCE_S, wait_until

SUPER = (AUTH["TIDEMQ_ACCESS_KEY"], AUTH["TIDEMQ_SECRET_KEY"])
ALICE = ("alice", "alices-very-own-secret-0123456789")


class RecordingProxy:
    """Forwards a loopback port, keeping every byte the target sends back (bounded by the test's size)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listen = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"127.0.0.1:{self.listen.getsockname()[1]}"
        self.from_target = bytearray()
        self.lock = threading.Lock()
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listen.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:         # the target is gone (stopped first at the test's end): drop the caller
                client.close()
                continue
            self.socks += [client, up]
            threading.Thread(target=self._pipe, args=(client, up, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(up, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return
            if record:
                with self.lock:
                    self.from_target += data
            try:
                dst.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.listen.close()
        for s in self.socks:
            s.close()


def md(keys):
    return tuple(signed_metadata(keys[0], keys[1], date_time(time.time())))


def test_a_followers_copy_carries_no_secret_in_clear(tmp_path, broker_factory):
    env = {**AUTH, "TIDEMQ_REPLICATION_MODE": "ASYNC", "TIDEMQ_REPLICATION_STATE_INTERVAL_MS": "100"}
    leader = broker_factory(root=str(tmp_path / "l"), env={**env, "TIDEMQ_BROKER_ID": "g-0"},
                            args=["--group", "g", "--role", "leader"])
    proxy = RecordingProxy(leader.port)
    try:
        follower = broker_factory(root=str(tmp_path / "f"), env={**env, "TIDEMQ_BROKER_ID": "g-1"},
                                  args=["--group", "g", "--role", "follower", "--leader", proxy.endpoint])
        r = admin.call(leader.endpoint, "CreateUser", {"name": ALICE[0], "secret_key": ALICE[1]},
                       timeout_s=PATIENCE_S, metadata=md(SUPER))
        assert r["ok"], r

        def alice_known_on_the_follower():
            with grpc.insecure_channel(follower.endpoint) as ch:
                st = sgrpc.MessagingServiceStub(ch).QueryRoute(
                    spb.QueryRouteRequest(topic=pb.Resource(name="T")), metadata=md(ALICE), timeout=PATIENCE_S).status
            return st.code != Code.UNAUTHORIZED or None

        wait_until(alice_known_on_the_follower, "the follower's copy brought alice's key: her signature checks there")
        handle_key = json.loads(open(tmp_path / "l" / "broker" / "pop" / "secret", "rb").read())
        key = handle_key["doc"]["key"].encode() if "doc" in handle_key else handle_key["key"].encode()
        fkey = json.loads(open(tmp_path / "f" / "broker" / "pop" / "secret", "rb").read())["doc"]["key"].encode()
        assert fkey == key, "the follower has its leader's receipt-handle key"
        with proxy.lock:
            wire = bytes(proxy.from_target)
        assert ALICE[1].encode() not in wire, "a user's secret key crossed the member channel in clear"
        assert key not in wire, "the receipt-handle key crossed the member channel in clear"
        assert b"sealed1:" in wire, "the copy went through the recorded channel"
    finally:
        proxy.close()
