"""The RocketMQ 5 gRPC stubs (``apache.rocketmq.v2``), tidemq's own copy.

definition_pb2.py, service_pb2.py and service_pb2_grpc.py are the generated modules of the official
client package (rocketmq-python-client 5.1.2, ``rocketmq/grpc_protocol/``, Apache-2.0), unchanged but
for their imports of each other (``from . import``). Importing them from the official package runs
its ``rocketmq/__init__.py``: the whole v5 client, opentelemetry's SDK and exporters, a makedirs of
``~/logs/rocketmq_python/`` and a logging.config.dictConfig (docs/broker-protocol.md, P2) — none of
which a broker needs. They register the same files (``definition.proto``, ``service.proto``) with the
same bytes in protobuf's default pool, which accepts an identical file twice: a process that also
loads the official client (the tests, the benchmarks) shares one descriptor and one class per message
(tests/protocol/test_stubs.py checks both stay identical: a different copy under the same file name
is refused by the pool, P1). Regenerate: copy the three files of the pinned client and fix the
imports. Import them through tidemq/protocol/stubs.py only.
"""
