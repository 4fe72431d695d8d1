"""Calling a running broker's admin service (``/tidemq.Admin/<Method>``, protocol/admin.py: JSON in
and out) from a program: the CLI, Spark's tiered reader, benchmarks and tests."""

from __future__ import annotations

import grpc

from ..protocol.admin import SERVICE, dumps, loads
from .settings import TlsOptions, tls_options


def call(endpoint: str, method: str, request: dict | None = None, timeout_s: float = 10.0,
         metadata=None, root_certificates: bytes | None = None, tls: TlsOptions | bool = False) -> dict:
    """Call an admin method of a running broker (metadata: signing.signed_metadata(...) when auth is
    on; root_certificates: the PEM to trust when the broker speaks TLS; tls: TlsOptions, a client
    certificate or a server name among them)."""
    t = tls_options(tls, root_certificates)
    if t is not None:
        channel = grpc.secure_channel(endpoint, t.credentials(), options=t.channel_options())
    else:
        channel = grpc.insecure_channel(endpoint)
    with channel as ch:
        fn = ch.unary_unary(f"/{SERVICE}/{method}", request_serializer=dumps, response_deserializer=loads)
        return fn(request or {}, timeout=timeout_s, metadata=metadata)
