"""The one module that imports the RocketMQ 5 gRPC stubs (``apache.rocketmq.v2``).

They come from the official client package (rocketmq-python-client, Apache-2.0),
never from copies of our own: two copies of ``definition.proto`` in one process
collide in protobuf's default descriptor pool (docs/broker-protocol.md, P1).
Importing them runs the whole client package, which creates
``~/logs/rocketmq_python/`` and reconfigures logging (P2): import this module
before configuring logging, and only where the protocol is spoken (broker, client).
"""

import types

from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: F401
from rocketmq.grpc_protocol import service_pb2 as spb  # noqa: F401
from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc  # noqa: F401

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
