"""Pop consumption in process (tidemq.broker.consume.receive.Consumption over a real store): putting
messages, acking, bodies. The ``world`` fixture is in tests/broker/conftest.py."""

from tidemq.protocol.stubs import Code, pb, spb
from tidemq.store import Message

ORDERED = "ordered"         # the FIFO consumer group of the world fixture


def put(store, queue, *bodies):
    for b in bodies:
        r = store.put(Message(topic="T", body=b, queue_id=queue))
        assert r.status.name == "PUT_OK"


def bodies(msgs):
    return [m.body for m in msgs]


def ack(c, group, m):
    r = c.ack(spb.AckMessageRequest(group=pb.Resource(name=group), topic=m.topic, entries=[
        spb.AckMessageEntry(message_id=m.system_properties.message_id,
                            receipt_handle=m.system_properties.receipt_handle)]))
    assert r.status.code == Code.OK
