"""The one module that imports the RocketMQ 5 gRPC stubs (``apache.rocketmq.v2``).

They are tidemq's own copy of the official client package's generated modules
(protocol/rocketmq_v2/, identical descriptors): importing them from the official package
(``rocketmq.grpc_protocol``) would run the whole client, opentelemetry included, create
``~/logs/rocketmq_python/`` and reconfigure logging (docs/broker-protocol.md, P2); a broker
needs none of that. A process that also loads the official client shares their descriptors
and message classes (protobuf's default pool accepts the identical file twice; P1).
"""

import types

from .rocketmq_v2 import definition_pb2 as pb  # noqa: F401
from .rocketmq_v2 import service_pb2 as spb  # noqa: F401
from .rocketmq_v2 import service_pb2_grpc as sgrpc  # noqa: F401

# Status codes as plain attributes: pb.Code.OK goes through EnumTypeWrapper.__getattr__ (Python
# code, ~1 µs) on every use; the broker reads codes per message.
Code = types.SimpleNamespace(**dict(pb.Code.items()))
_CODE_NAMES = {v: k for k, v in pb.Code.items()}
MessageType = types.SimpleNamespace(**dict(pb.MessageType.items()))
Encoding = types.SimpleNamespace(**dict(pb.Encoding.items()))
DigestType = types.SimpleNamespace(**dict(pb.DigestType.items()))
MESSAGE_TYPE_NAMES = {v: k for k, v in pb.MessageType.items()}


def status(code: int, message: str = "") -> "pb.Status":
    return pb.Status(code=code, message=message or _CODE_NAMES.get(code, str(code)))


OK = Code.OK


def code_name(code: int) -> str:
    """``TOO_MANY_REQUESTS`` for 42900; the number itself for a code the stubs do not know."""
    return _CODE_NAMES.get(code, str(code))
