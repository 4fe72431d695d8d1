"""Optional authentication: the RocketMQ 5 clients' ``MQv2-HMAC-SHA1`` signature.

When access_key and secret_key are set, every call (the MessagingService and
the admin service) must carry, as the official clients send it
(``rocketmq/v5/util/signature.py`` in rocketmq-python-client 5.1.2):

    x-mq-date-time: 20250101T120000Z
    authorization:  MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time,
                    Signature=<hex HMAC-SHA1 of the x-mq-date-time value, keyed with the secret key>

The Python client writes the hex digits in lower case, the Java client in upper
case: both are accepted. A Credential of the form ``ak/region/...`` counts by
its first part, as the RocketMQ proxy parses it. Keys and signatures are
compared in constant time. Like the proxy, the date is not checked against the
clock (the Python client writes local time with a 'Z'), so a captured header
can be replayed: TLS keeps it from being captured.

A refused call answers UNAUTHORIZED the way each RPC reports a status: unary
RPCs in the response's status, ReceiveMessage / PullMessage as their one status
message, Telemetry as one command with the status before the stream ends; the
admin service (JSON) with gRPC UNAUTHENTICATED.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Iterable

import grpc

from .proto import Code, spb, status

ALGORITHM = "MQv2-HMAC-SHA1"
DATE_HEADER = "x-mq-date-time"
SERVICE_PREFIX = "/apache.rocketmq.v2.MessagingService/"


def sign(secret_key: str, date_time: str) -> str:
    """The clients' signature: hex HMAC-SHA1 of the date-time value keyed with the secret."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def signed_metadata(access_key: str, secret_key: str, date_time: str) -> list[tuple[str, str]]:
    """Headers as the official clients send them (for tidemq's own clients and tests)."""
    return [(DATE_HEADER, date_time),
            ("authorization", f"{ALGORITHM} Credential={access_key}, SignedHeaders={DATE_HEADER}, "
                              f"Signature={sign(secret_key, date_time)}")]


class Authenticator:
    def __init__(self, access_key: str, secret_key: str) -> None:
        self.access_key = access_key.encode()
        self.secret_key = secret_key.encode()

    def verify(self, metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
        """None when the call is signed with our keys; otherwise why it is refused."""
        headers = {k.lower(): v for k, v in (metadata or ()) if isinstance(v, str)}
        auth = headers.get("authorization")
        if not auth:
            return "unauthorized: the request carries no authorization header (access key / secret key required)"
        algorithm, _, rest = auth.strip().partition(" ")
        if algorithm != ALGORITHM:
            return f"unauthorized: the authorization scheme must be {ALGORITHM}"
        fields = {}
        for part in rest.split(","):
            k, _, v = part.strip().partition("=")
            fields[k.strip()] = v.strip()
        credential = fields.get("Credential", "").split("/", 1)[0]
        signature = fields.get("Signature", "")
        date_time = headers.get(DATE_HEADER)
        if not credential or not signature or not date_time:
            return f"unauthorized: the authorization header needs Credential and Signature, and {DATE_HEADER}"
        known = hmac.compare_digest(credential.encode(), self.access_key)
        expected = hmac.new(self.secret_key, date_time.encode(), hashlib.sha1).hexdigest().encode()
        good = hmac.compare_digest(signature.lower().encode(), expected)
        if not (known and good):
            return "unauthorized: unknown access key or wrong signature"
        return None


def _response_types() -> dict[str, type]:
    svc = spb.DESCRIPTOR.services_by_name["MessagingService"]
    return {m.name: getattr(spb, m.output_type.name) for m in svc.methods}


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Refuse unsigned or wrongly signed calls before they reach a servicer."""

    def __init__(self, auth: Authenticator) -> None:
        self.auth = auth
        self.responses = _response_types()
        self.refused_total = 0

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        reason = self.auth.verify(details.invocation_metadata)
        if reason is None or handler is None:
            return handler
        self.refused_total += 1
        return self._refusal(details.method, handler, reason)

    def _refusal(self, method: str, handler, reason: str):
        des, ser = handler.request_deserializer, handler.response_serializer
        name = method[len(SERVICE_PREFIX):] if method.startswith(SERVICE_PREFIX) else None
        cls = self.responses.get(name) if name else None
        if cls is None:                                 # the admin service: no status field to fill
            async def abort(request, context):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, reason)
            if handler.request_streaming:
                return grpc.stream_unary_rpc_method_handler(abort, des, ser)
            return grpc.unary_unary_rpc_method_handler(abort, des, ser)
        answer = cls(status=status(Code.UNAUTHORIZED, reason))
        if handler.response_streaming:
            async def stream(request, context):
                yield answer
            if handler.request_streaming:
                return grpc.stream_stream_rpc_method_handler(stream, des, ser)
            return grpc.unary_stream_rpc_method_handler(stream, des, ser)

        async def unary(request, context):
            return answer
        return grpc.unary_unary_rpc_method_handler(unary, des, ser)

