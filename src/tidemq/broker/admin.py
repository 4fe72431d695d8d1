"""A small admin service of the running broker: ``/tidemq.Admin/<Method>``, JSON in and out.

No .proto of our own (a second descriptor set would only add risk, see
docs/broker-protocol.md P1): generic unary handlers with JSON bodies.
Methods: CreateTopic {name, queues}, ListTopics {}, DiskStatus {}, DeleteExpired {},
Alarms {} (resource alarms and flow control), SetAlarmLimits {memory_high_watermark_bytes,
memory_high_watermark_ratio, disk_free_limit_bytes} (any of them; RabbitMQ's
set_vm_memory_high_watermark / set_disk_free_limit: until the broker restarts).
Loopback only by default, like the broker itself; signed like every call when
authentication is on.
"""

from __future__ import annotations

import json

import grpc

from ..store import MessageStore

SERVICE = "tidemq.Admin"


def _dumps(obj) -> bytes:
    return json.dumps(obj, default=str).encode()


class Admin:
    def __init__(self, store: MessageStore, broker=None) -> None:
        self.store = store
        self.broker = broker           # server.Broker: alarms and flow control (None: store-only admin)

    def create_topic(self, req: dict) -> dict:
        try:
            self.store.create_topic(req["name"], int(req.get("queues", 8)))
        except (KeyError, ValueError, TypeError) as e:
            return {"ok": False, "error": str(e)}
        return {"ok": True, "topic": req["name"], "queues": self.store.queue_count(req["name"])}

    def list_topics(self, req: dict) -> dict:
        s = self.store
        return {"ok": True, "topics": [
            {"topic": t, "queues": [{"id": q, "min_offset": s.min_offset(t, q), "max_offset": s.max_offset(t, q)}
                                    for q in range(s.queue_count(t))]} for t in s.topic_names()]}

    def disk_status(self, req: dict) -> dict:
        return {"ok": True, "status": self.store.disk_status()}

    def delete_expired(self, req: dict) -> dict:
        self.store.trigger_delete_expired()
        return {"ok": True}

    def alarms(self, req: dict) -> dict:
        return {"ok": True, "alarms": self.broker.alarm_status()}

    def set_alarm_limits(self, req: dict) -> dict:
        try:
            args = {k: (float(v) if k.endswith("ratio") else int(v)) for k, v in req.items()
                    if k in ("memory_high_watermark_bytes", "memory_high_watermark_ratio", "disk_free_limit_bytes")}
            if len(args) != len(req) or not args:
                raise ValueError(f"give some of memory_high_watermark_bytes, memory_high_watermark_ratio, "
                                 f"disk_free_limit_bytes (got {sorted(req)})")
            if any(v < 0 for v in args.values()) or not 0 < args.get("memory_high_watermark_ratio", 0.5) < 1:
                raise ValueError("limits are >= 0 and the ratio is in (0, 1)")
        except (TypeError, ValueError) as e:
            return {"ok": False, "error": str(e)}
        return {"ok": True, "alarms": self.broker.set_alarm_limits(**args)}

    def handler(self) -> grpc.GenericRpcHandler:
        def unary(fn):
            return grpc.unary_unary_rpc_method_handler(lambda req, ctx: fn(req), request_deserializer=json.loads,
                                                       response_serializer=_dumps)
        return grpc.method_handlers_generic_handler(SERVICE, {
            "CreateTopic": unary(self.create_topic), "ListTopics": unary(self.list_topics),
            "DiskStatus": unary(self.disk_status), "DeleteExpired": unary(self.delete_expired),
            "Alarms": unary(self.alarms), "SetAlarmLimits": unary(self.set_alarm_limits)})


def call(endpoint: str, method: str, request: dict | None = None, timeout_s: float = 10.0,
         metadata=None, root_certificates: bytes | None = None) -> dict:
    """Call an admin method of a running broker (metadata: auth.signed_metadata(...) when auth is on;
    root_certificates: the PEM to trust when the broker speaks TLS)."""
    if root_certificates is not None:
        channel = grpc.secure_channel(endpoint, grpc.ssl_channel_credentials(root_certificates=root_certificates))
    else:
        channel = grpc.insecure_channel(endpoint)
    with channel as ch:
        fn = ch.unary_unary(f"/{SERVICE}/{method}", request_serializer=_dumps, response_deserializer=json.loads)
        return fn(request or {}, timeout=timeout_s, metadata=metadata)
