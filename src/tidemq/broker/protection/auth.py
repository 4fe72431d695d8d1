"""Optional authentication: every call signed with the RocketMQ 5 clients' ``MQv2-HMAC-SHA1``
signature (the headers and how they are computed: protocol/signing.py).

When access_key and secret_key are set, every call (the MessagingService, tidemq.Data and
the admin service) must carry a signature made with them. Both the lower-case (Python
client) and upper-case (Java client) hex digits are accepted. Keys and signatures are
compared in constant time. The signed date must be fresh: within ``signature_window_s``
(15 min) of now, read as UTC *or* as the broker's local time (the official Python client
writes local time with a 'Z'; Java and Node write UTC), so a captured header is refused once
the window has passed; within it, TLS keeps it from being captured.

A refused call answers UNAUTHORIZED the way each RPC reports a status: unary
RPCs in the response's status, ReceiveMessage / PullMessage as their one status
message, Telemetry as one command with the status before the stream ends; tidemq's
own services (raw bytes or JSON, no status field) with gRPC UNAUTHENTICATED.
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import time
from typing import Callable, Iterable

import grpc

from ...protocol.signing import AUTH_HEADER, DATE_HEADER, SignatureError, parse_authorization
from ...protocol.stubs import Code, spb, status

SERVICE_PREFIX = "/apache.rocketmq.v2.MessagingService/"


DATE_FORMAT = "%Y%m%dT%H%M%SZ"
WINDOW_S_DEFAULT = 900.0


def signed_at(date_time: str) -> tuple[float, float] | None:
    """The moments a signed date can mean: (read as UTC, read as local time); None if not a date."""
    try:
        t = time.strptime(date_time, DATE_FORMAT)
        return float(calendar.timegm(t)), time.mktime(t)
    except (ValueError, OverflowError):
        return None


class Authenticator:
    def __init__(self, access_key: str, secret_key: str, window_s: float = WINDOW_S_DEFAULT,
                 now_s: Callable[[], float] = time.time) -> None:
        self.access_key = access_key.encode()
        self.secret_key = secret_key.encode()
        self.window_s = window_s
        self.now_s = now_s

    def verify(self, metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
        """None when the call is signed with our keys; otherwise why it is refused."""
        headers = {k.lower(): v for k, v in (metadata or ()) if isinstance(v, str)}
        auth = headers.get(AUTH_HEADER)
        if not auth:
            return "unauthorized: the request carries no authorization header (access key / secret key required)"
        try:
            credential, signature = parse_authorization(auth)
        except SignatureError as e:
            return f"unauthorized: {e}"
        date_time = headers.get(DATE_HEADER)
        if not date_time:
            return f"unauthorized: the authorization header needs Credential and Signature, and {DATE_HEADER}"
        known = hmac.compare_digest(credential.encode(), self.access_key)
        expected = hmac.new(self.secret_key, date_time.encode(), hashlib.sha1).hexdigest().encode()
        good = hmac.compare_digest(signature.lower().encode(), expected)
        if not (known and good):
            return "unauthorized: unknown access key or wrong signature"
        when = signed_at(date_time)
        if when is None:
            return f"unauthorized: {DATE_HEADER} {date_time[:40]!r} is not a date ({DATE_FORMAT})"
        now = self.now_s()
        if min(abs(now - when[0]), abs(now - when[1])) > self.window_s:
            return (f"unauthorized: the request was signed at {date_time}, not within signature_window_s="
                    f"{self.window_s:g} of the broker's clock (a replay, or a clock that is wrong)")
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

