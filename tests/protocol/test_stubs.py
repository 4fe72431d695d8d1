"""protocol/stubs.py: the RocketMQ 5 stubs (our copy of the official client package's), their enums as plain
attributes that agree with the stubs, status values and code names."""

import pytest

from tidemq.protocol import stubs
from tidemq.protocol.stubs import Code, DigestType, Encoding, MessageType, code_name, pb, status


@pytest.mark.parametrize("ns, enum", [(Code, pb.Code), (MessageType, pb.MessageType), (Encoding, pb.Encoding),
                                      (DigestType, pb.DigestType)])
def test_the_plain_namespaces_hold_every_value_of_their_enum(ns, enum):
    assert vars(ns) == dict(enum.items())


def test_codes_are_the_protocols_numbers():
    assert stubs.OK == Code.OK == pb.Code.OK == 20000
    assert Code.TOO_MANY_REQUESTS == 42900 and Code.BAD_REQUEST == 40000


def test_code_names_and_an_unknown_code():
    assert code_name(Code.TOO_MANY_REQUESTS) == "TOO_MANY_REQUESTS"
    assert code_name(Code.MESSAGE_BODY_TOO_LARGE) == "MESSAGE_BODY_TOO_LARGE"
    assert code_name(12345) == "12345"


def test_a_status_says_its_code_name_unless_given_a_message():
    s = status(Code.TOPIC_NOT_FOUND)
    assert isinstance(s, pb.Status) and s.code == Code.TOPIC_NOT_FOUND and s.message == "TOPIC_NOT_FOUND"
    assert status(Code.BAD_REQUEST, "no such queue").message == "no such queue"
    assert status(777).message == "777"


def test_message_type_names():
    assert stubs.MESSAGE_TYPE_NAMES[MessageType.FIFO] == "FIFO"
    assert {stubs.MESSAGE_TYPE_NAMES[v] for v in vars(MessageType).values()} == set(dict(pb.MessageType.items()))


def test_the_stubs_are_a_copy_of_the_official_clients_generated_modules():
    """The pool accepts a second copy of a file only if it is identical (docs/broker-protocol.md, P1):
    our copy must stay the pinned client's, byte for byte but for the imports of each other."""
    import importlib.util
    import pathlib

    import tidemq.protocol.rocketmq_v2 as ours
    official = pathlib.Path(importlib.util.find_spec("rocketmq").submodule_search_locations[0]) / "grpc_protocol"
    for name in ("definition_pb2.py", "service_pb2.py", "service_pb2_grpc.py"):
        theirs = (official / name).read_text().replace("from rocketmq.grpc_protocol import ", "from . import ")
        assert (pathlib.Path(ours.__file__).parent / name).read_text() == theirs, name


def test_a_process_with_the_official_client_shares_the_descriptors_and_classes():
    from rocketmq.grpc_protocol import definition_pb2, service_pb2
    assert pb.DESCRIPTOR is definition_pb2.DESCRIPTOR and stubs.spb.DESCRIPTOR is service_pb2.DESCRIPTOR
    assert pb.Message is definition_pb2.Message and stubs.spb.SendMessageRequest is service_pb2.SendMessageRequest
    assert stubs.sgrpc.MessagingServiceStub is not None


def test_importing_the_stubs_does_not_import_the_official_client():
    import subprocess
    import sys
    code = ("import sys; import tidemq.protocol.stubs; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rocketmq', 'opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
