"""Stand-ins for the broker's ReplicationNode (broker/replication/node.py) holding only what the
replication stream's two sides read, over real stores; and a gRPC server of the leader's side."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import grpc

from tidemq.broker.replication.acks import ReplicaAcks
from tidemq.broker.replication.leader import ReplicationServer
from tidemq.broker.replication.transport import GrpcTransport
from tidemq.io import SystemClock


class LeaderNode:
    def __init__(self, store, epoch: int, refusal: str | None = None, group: str = "g") -> None:
        self.store = store
        self.leading, self.fenced, self.epoch = True, False, epoch
        self.installing = None                 # (no change of role installing services: node.installing)
        self.group, self.member, self.service = group, "g-0", None
        self.acks = ReplicaAcks(False, 1, 60_000, 60_000, lambda: store.replica.end, SystemClock())
        self.config = SimpleNamespace(replication_frame_bytes_max=4096, replica_lag_time_max_ms=60_000)
        self.refusal = refusal
        self.seen: list[str] = []

    def serving_refusal(self, group, epoch):
        return self.refusal

    def log_failed_in_epoch(self):
        return False                           # (node.py: its commit log failed in the epoch it leads)

    def member_seen(self, member, hello):
        self.seen.append(member)

    def view(self):
        return {"group": self.group}


class FollowerNode:
    def __init__(self, store, group: str = "g", known_epoch: int = 0) -> None:
        self.store = store
        self.group, self.member, self.endpoint, self.leader_port_endpoint = group, "g-1", "127.0.0.1:1", ""
        self.known_epoch = known_epoch
        self.hw_known = 0
        self.coordinator = None
        self.service, self.state_dir = None, None
        self.clock, self.transport = SystemClock(), GrpcTransport()
        self.config = SimpleNamespace(replication_retry_ms=50, replication_state_interval_ms=3_600_000)
        self.views: list[dict] = []

    def adopt_view(self, view):
        self.views.append(view)


@contextlib.asynccontextmanager
async def leader_server(node, message_bytes_max: int | None = None):
    """A gRPC server on loopback serving ReplicationServer(node); yields its endpoint.
    ``message_bytes_max``: its messages' limit both ways (a broker's grpc_message_bytes_max)."""
    opts = [] if message_bytes_max is None else [("grpc.max_send_message_length", message_bytes_max),
                                                 ("grpc.max_receive_message_length", message_bytes_max)]
    server = grpc.aio.server(options=opts)
    server.add_generic_rpc_handlers((ReplicationServer(node).handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)
