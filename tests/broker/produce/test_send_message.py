"""produce/send_message.py's lane registration: with tidemq._accel, SendMessage is served from the
request's bytes (MessageSends.send_bytes; what the lane reads: tests/test_accel.py, send_one; the
lane end to end: test_send_message_e2e.py, test_fuzz.py); without it, by the service's SendMessage."""

import pytest

from tidemq.broker.produce import send_message
from tidemq.broker.produce.send_message import SEND_MESSAGE, send_message_lane


class Servicer:
    async def SendMessageBytes(self, raw, context):
        return raw


class Details:
    def __init__(self, method):
        self.method = method


@pytest.mark.skipif(send_message._ACCEL is None, reason="tidemq._accel is not built")
def test_send_message_is_given_its_bytes_when_compiled():
    s = Servicer()
    lane = send_message_lane(s)
    h = lane.service(Details(SEND_MESSAGE))
    assert h.request_deserializer is None and h.unary_unary == s.SendMessageBytes
    assert h.response_serializer is not None
    for other in ("/apache.rocketmq.v2.MessagingService/QueryRoute", "/tidemq.Data/SendRecords"):
        assert lane.service(Details(other)) is None


def test_without_the_compiled_reader_the_service_serves_send_message(monkeypatch):
    monkeypatch.setattr(send_message, "_ACCEL", None)
    assert send_message_lane(Servicer()) is None
