"""The topics the broker keeps for itself (topic_names.SYSTEM_TOPICS: delayed messages wait in the
schedule topic, transaction half messages in the half topic) are never read by a client: a message
there is not due, or not committed (a rolled-back one stays there), so a consumer reading it would
be served what was never sent to it. Refused (FORBIDDEN) by every read RPC, with authentication
off as on, through a real broker."""

import time

import grpc

from tidemq.broker.topic_names import HALF_TOPIC, SCHEDULE_TOPIC
from tidemq.protocol import data
from tidemq.protocol.pull_frame import decode_response, encode_request
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ..support.brokers import SMALL, make_topic

PATIENCE_S = 60


def test_the_system_topics_are_not_read_by_clients(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "orders", 1)
    b = broker_factory(root, env=SMALL)
    with grpc.insecure_channel(b.endpoint) as ch:
        s = sgrpc.MessagingServiceStub(ch)
        due_s = int(time.time()) + 3600
        r = s.SendMessage(spb.SendMessageRequest(messages=[pb.Message(
            topic=pb.Resource(name="orders"), body=b"not due for an hour", system_properties=pb.SystemProperties(
                message_id="0ADELAYED1", message_type=pb.MessageType.DELAY,
                delivery_timestamp={"seconds": due_s}))]), timeout=PATIENCE_S)
        assert r.status.code == Code.OK, r.status
        pull_records = ch.unary_unary(data.PULL_RECORDS_PATH)
        for topic in (SCHEDULE_TOPIC, HALF_TOPIC):
            mq = pb.MessageQueue(topic=pb.Resource(name=topic), id=0)
            got = list(s.ReceiveMessage(spb.ReceiveMessageRequest(
                group=pb.Resource(name="g"), message_queue=mq, batch_size=8, invisible_duration={"seconds": 60},
                long_polling_timeout={"seconds": 0}), timeout=PATIENCE_S))
            assert [x.status.code for x in got if x.HasField("status")] == [Code.FORBIDDEN], (topic, got)
            assert not [x for x in got if x.HasField("message")]
            got = list(s.PullMessage(spb.PullMessageRequest(group=pb.Resource(name="g"), message_queue=mq, offset=0,
                                                            batch_size=8), timeout=PATIENCE_S))
            assert [x.status.code for x in got if x.HasField("status")] == [Code.FORBIDDEN], (topic, got)
            assert not [x for x in got if x.HasField("message")]
            header, _, records = decode_response(pull_records(encode_request(topic, 0, 0), timeout=PATIENCE_S))
            assert header["code"] == Code.FORBIDDEN and not len(records), (topic, header)
