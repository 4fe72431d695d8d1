"""The durable peers of the broker benchmarks (Redis streams, NATS JetStream): see servers.py."""

from .servers import PEERS, NatsPeer, PeerError, RedisPeer, ensure_installed, versions  # noqa: F401
