"""A message from the wire into the store and back to the wire: what the official clients
send is what they receive, the broker's own properties never leak, the digest is MD5."""

import hashlib

from google.protobuf import timestamp_pb2

from tidemq.broker.wire import INTERNAL, SYS_FLAG_COMPRESSED, fifo_queue, to_store, to_wire
from tidemq.io import ManualClock
from tidemq.protocol.stubs import DigestType, Encoding, MessageType, pb


def wire_message(**sp) -> "pb.Message":
    props = dict(message_id="01ABCDEF", message_type=MessageType.NORMAL, body_encoding=Encoding.IDENTITY)
    props.update(sp)
    return pb.Message(topic=pb.Resource(name="T"), body=b"hello", user_properties={"color": "red"},
                      system_properties=pb.SystemProperties(**props))


def round_trip(stores, m: "pb.Message", queues: int = 4) -> "pb.Message":
    s = stores(ManualClock())
    s.create_topic("T", queues)
    msg = to_store(m, queues)
    r = s.put(msg)
    assert r.ok, r
    got = s.get("g", "T", r.queue_id, r.queue_offset, max_count=1).messages[0]
    return to_wire(got, 3, "handle-1", 30_500)


def test_what_a_client_sent_is_what_it_receives(stores):
    born = timestamp_pb2.Timestamp(seconds=1_700_000_000, nanos=123_000_000)
    w = round_trip(stores, wire_message(tag="TagA", keys=["k1", "k2"], born_host="10.1.2.3", born_timestamp=born))
    sp = w.system_properties
    assert (w.topic.name, w.body, dict(w.user_properties)) == ("T", b"hello", {"color": "red"})
    assert (sp.message_id, sp.tag, list(sp.keys), sp.born_host) == ("01ABCDEF", "TagA", ["k1", "k2"], "10.1.2.3")
    assert (sp.born_timestamp.seconds, sp.born_timestamp.nanos) == (1_700_000_000, 123_000_000)
    assert (sp.delivery_attempt, sp.receipt_handle) == (3, "handle-1")
    assert (sp.invisible_duration.seconds, sp.invisible_duration.nanos) == (30, 500_000_000)
    assert sp.body_digest.type == DigestType.MD5
    assert sp.body_digest.checksum == hashlib.md5(b"hello").hexdigest().upper()
    assert sp.message_type == MessageType.NORMAL and sp.body_encoding == Encoding.IDENTITY


def test_the_broker_properties_never_reach_the_client(stores):
    w = round_trip(stores, wire_message(born_host="client-host.example", message_group="G1",
                                        message_type=MessageType.FIFO))
    assert not set(w.user_properties) & INTERNAL
    assert w.system_properties.born_host == "client-host.example", "a host name is kept as a property"
    assert w.system_properties.message_group == "G1" and w.system_properties.message_type == MessageType.FIFO


def test_a_message_group_picks_one_queue_for_good():
    assert len({fifo_queue("orders-17", 8) for _ in range(5)}) == 1
    assert {fifo_queue(f"g{i}", 8) for i in range(200)} == set(range(8)), "groups spread over the queues"
    assert to_store(wire_message(message_group="orders-17"), 8).queue_id == fifo_queue("orders-17", 8)
    assert to_store(wire_message(), 8).queue_id is None, "no group: round-robin"


def test_gzip_bodies_keep_their_encoding(stores):
    m = to_store(wire_message(body_encoding=Encoding.GZIP), 4)
    assert m.sys_flag & SYS_FLAG_COMPRESSED
    w = round_trip(stores, wire_message(body_encoding=Encoding.GZIP))
    assert w.system_properties.body_encoding == Encoding.GZIP
