"""A member's own keys are the broker's first super user's: a call that makes a member connect to an
address of the caller's choosing hands that address a fresh super-user signature (the signature
covers only its date: replayable within signature_window_s). Such a call is for super users only.

Reproduced before the fix: a NORMAL user with ``cluster:update`` called Follow {"leader": <its own
server>} on a static group's leader; the member's replication client called Epochs there signed as
``tidemq-ak`` (SUPER), and those headers, replayed, answered ListUsers -- and the member, now a
"follower" of that server, would cut its log to whatever epochs it answered."""

from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc

from tidemq.client import admin
from tidemq.protocol.signing import date_time, signed_metadata

from ...support.auth import AUTH
from ...support.brokers import free_port
from ...support.group import Group

SUPER = ("tidemq-ak", "s3cret-sk")


class Recorder(grpc.GenericRpcHandler):
    """A gRPC server that answers nothing and keeps the metadata of every call it gets."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.got = threading.Event()

    def service(self, details):
        self.calls.append((details.method, dict(details.invocation_metadata)))
        self.got.set()
        return None                                      # UNIMPLEMENTED


def test_follow_is_for_super_users_it_sends_the_members_credentials_where_the_caller_says(tmp_path):
    g = Group(str(tmp_path), 1, mode="ASYNC", env=AUTH, client={"access_key": SUPER[0], "secret_key": SUPER[1]})
    rec = Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers((rec,))
    port = free_port()
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        g.start(0, role="leader")
        assert g.admin(0, "CreateUser", {"name": "ops2", "secret_key": "secret-of-ops2"})["ok"]
        assert g.admin(0, "Grant", {"user": "ops2", "resource": "cluster", "actions": ["update", "get"]})["ok"]
        md = signed_metadata("ops2", "secret-of-ops2", date_time(time.time()))
        r = admin.call(g.endpoint(0), "Follow", {"leader": f"127.0.0.1:{port}"}, timeout_s=60.0, metadata=md)
        assert (r["ok"], r.get("code")) == (False, "FORBIDDEN") and "super" in r["error"], r
        assert g.status(0)["role"] == "leader", "nothing changed"
        assert not rec.got.wait(1.0), f"the member called the caller's server: {rec.calls}"
        r = admin.call(g.endpoint(0), "Promote", {}, timeout_s=60.0, metadata=md)
        assert r["ok"], "Promote stays cluster:update (no address of the caller's is called)"
        r = g.admin(0, "Follow", {"leader": f"127.0.0.1:{port}"})
        assert r["ok"], "a super user may"
    finally:
        g.kill_all()
        server.stop(0)
