"""A damaged receipt-handle key is never used (protection/handle_key.py): a real broker with
authentication on, stopped, its key file and mirror emptied (a torn copy, a full disk), started again.
A consumer receives a message; an ack whose handle is MACed under the empty key (which anyone can
make) is refused INVALID_RECEIPT_HANDLE and the message stays in flight; the consumer's own handle
acks it. Before, the empty file was the key: the forged ack was answered OK and took the message."""

import hashlib
import hmac
import os
import time

import grpc

from tidemq.protocol.signing import date_time, signed_metadata
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.auth import AUTH
from ...support.brokers import make_topic
from ...support.wait import PATIENCE_S

SUPER = (AUTH["TIDEMQ_ACCESS_KEY"], AUTH["TIDEMQ_SECRET_KEY"])


def md(client_id="c"):
    return tuple(signed_metadata(SUPER[0], SUPER[1], date_time(time.time()))) + (("x-mq-client-id", client_id),)


def forged(handle: str, group: str, key: bytes) -> str:
    topic, qid, offset, seq, _ = handle.rsplit(":", 4)
    mac = hmac.new(key, f"{group}|{topic}|{qid}|{offset}|{seq}".encode(), hashlib.sha1).hexdigest()[:16]
    return f"{topic}:{qid}:{offset}:{seq}:{mac}"


def ack(s, handle):
    r = s.AckMessage(spb.AckMessageRequest(group=pb.Resource(name="g"), topic=pb.Resource(name="orders"), entries=[
        spb.AckMessageEntry(message_id="m", receipt_handle=handle)]), metadata=md(), timeout=PATIENCE_S)
    return r.entries[0].status.code


def test_an_emptied_handle_key_is_replaced_and_no_handle_made_under_it_acks(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "orders", 1)
    broker_factory(root=root, env=AUTH).stop()
    pop = os.path.join(root, "broker", "pop")
    for name in ("secret", "secret.bak"):
        if os.path.exists(os.path.join(pop, name)):
            open(os.path.join(pop, name), "wb").close()
    b = broker_factory(root=root, env=AUTH)
    with grpc.insecure_channel(b.endpoint) as ch:
        s = sgrpc.MessagingServiceStub(ch)
        r = s.SendMessage(spb.SendMessageRequest(messages=[pb.Message(
            topic=pb.Resource(name="orders"), body=b"m1", system_properties=pb.SystemProperties(
                message_id=f"0AKEY{time.time_ns()}", message_type=pb.MessageType.NORMAL))]),
            metadata=md(), timeout=PATIENCE_S)
        assert r.entries[0].status.code == Code.OK, r
        handles = []
        for _ in range(3):
            if handles:
                break
            handles = [x.message.system_properties.receipt_handle for x in s.ReceiveMessage(
                spb.ReceiveMessageRequest(group=pb.Resource(name="g"), message_queue=pb.MessageQueue(
                    topic=pb.Resource(name="orders")), batch_size=1, invisible_duration={"seconds": 300},
                    long_polling_timeout={"seconds": 1}), metadata=md(), timeout=PATIENCE_S) if x.HasField("message")]
        assert len(handles) == 1
        assert ack(s, forged(handles[0], "g", b"")) == Code.INVALID_RECEIPT_HANDLE, "a handle under the empty key"
        assert ack(s, handles[0]) == Code.OK, "the consumer's own handle: the message was still in flight"
