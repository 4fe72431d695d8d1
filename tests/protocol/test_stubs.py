"""protocol/stubs.py: the RocketMQ 5 stubs of the official client package, their enums as plain
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


def test_the_stubs_are_the_official_clients():
    import rocketmq.grpc_protocol.definition_pb2 as official
    assert pb is official and stubs.sgrpc.MessagingServiceStub is not None
