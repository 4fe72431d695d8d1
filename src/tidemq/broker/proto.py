"""The one module that imports the RocketMQ 5 gRPC stubs.

They come from the official client package (rocketmq-python-client, Apache-2.0),
never from copies of our own: two copies of ``definition.proto`` in one process
collide in protobuf's default descriptor pool (docs/broker-protocol.md, P1).
Importing them runs the whole client package, which creates
``~/logs/rocketmq_python/`` and reconfigures logging (P2): import this module
before configuring logging, and only where the broker is needed.
"""

from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: F401
from rocketmq.grpc_protocol import service_pb2 as spb  # noqa: F401
from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc  # noqa: F401

Code = pb.Code


def status(code: int, message: str = "") -> "pb.Status":
    return pb.Status(code=code, message=message or pb.Code.Name(code))


OK = Code.OK
