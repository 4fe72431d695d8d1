"""A message from the wire into the store and back to the wire: what the official clients
send is what they receive, the broker's own properties never leak, the digest is MD5."""

import hashlib

import pytest
from google.protobuf import timestamp_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq.broker.wire import INTERNAL, SYS_FLAG_COMPRESSED, encoded_one, fifo_queue, to_store, to_wire
from tidemq.io import ManualClock
from tidemq.protocol.stubs import DigestType, Encoding, MessageType, pb
from tidemq.store import MessageStore, StoreConfig


def wire_message(**sp) -> "pb.Message":
    props = dict(message_id="01ABCDEF", message_type=MessageType.NORMAL, body_encoding=Encoding.IDENTITY)
    props.update(sp)
    return pb.Message(topic=pb.Resource(name="T"), body=b"hello", user_properties={"color": "red"},
                      system_properties=pb.SystemProperties(**props))


def round_trip(stores, m: "pb.Message", queues: int = 4) -> "pb.Message":
    s = stores(ManualClock())
    s.create_topic("T", queues)
    msg = to_store(m)
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
    m = to_store(wire_message(message_group="orders-17"))
    assert m.queue_id is None and m.properties["__SHARDINGKEY"] == "orders-17", "the send path picks the queue"


def test_gzip_bodies_keep_their_encoding(stores):
    m = to_store(wire_message(body_encoding=Encoding.GZIP))
    assert m.sys_flag & SYS_FLAG_COMPRESSED
    w = round_trip(stores, wire_message(body_encoding=Encoding.GZIP))
    assert w.system_properties.body_encoding == Encoding.GZIP


# The one-message lane (encoded_one): the same record bytes as to_store + put ----------------------
BORN = timestamp_pb2.Timestamp(seconds=1_700_000_000, nanos=123_000_000)
ONE = {
    "an id only": {},
    "a tag": dict(tag="TagA"),
    "an ipv4 born host and time": dict(born_host="10.1.2.3", born_timestamp=BORN),
    "gzip": dict(body_encoding=Encoding.GZIP, tag="t"),
    "no type given": dict(message_type=MessageType.MESSAGE_TYPE_UNSPECIFIED),
    "an empty tag": dict(tag=""),
}
GENERAL = {
    "keys": dict(keys=["k1"]),
    "a group": dict(message_group="G", message_type=MessageType.FIFO),
    "delay": dict(message_type=MessageType.DELAY, delivery_timestamp=BORN),
    "a delivery time": dict(delivery_timestamp=BORN),
    "a transaction": dict(message_type=MessageType.TRANSACTION),
    "a host name": dict(born_host="client.example"),
    "no id": dict(message_id=""),
    "a separator in the id": dict(message_id="a\x01b"),
    "a separator in the tag": dict(tag="a\x02b"),
}


def plain_message(body: bytes = b"hello", user_properties=None, **sp) -> "pb.Message":
    props = dict(message_id="01ABCDEF", message_type=MessageType.NORMAL, body_encoding=Encoding.IDENTITY)
    props.update(sp)
    return pb.Message(topic=pb.Resource(name="T"), body=body, user_properties=user_properties or {},
                      system_properties=pb.SystemProperties(**props))


def _fresh(root: str) -> MessageStore:
    s = MessageStore(StoreConfig(root_dir=root, segment_size_bytes=256 << 10, index_slots=1000, index_entries=4000,
                                 preallocate_next_segment=False), clock=ManualClock()).start()
    s.create_topic("T", 4)
    return s


@pytest.mark.parametrize("case", sorted(ONE))
def test_the_one_message_lane_writes_the_record_the_general_path_writes(tmp_path, case):
    m = plain_message(**ONE[case])
    one = encoded_one(m)
    assert one is not None
    topic, entry, _mid, born_ms, born_host, sys_flag = one
    lane, general = _fresh(str(tmp_path / "lane")), _fresh(str(tmp_path / "general"))
    try:
        a = lane.put_encoded(topic, [entry], born_ms, born_host, sys_flag, defer_dispatch=True)[0]
        b = general.put(to_store(m))
        assert a.ok and b.ok and (a.queue_id, a.queue_offset, a.size, a.uniq_key) == (b.queue_id, b.queue_offset,
                                                                                      b.size, b.uniq_key)
        raw = [s.segments.segments[0].mapping[0:r.size] for s, r in ((lane, a), (general, b))]
        assert raw[0] == raw[1]
        got = [s.get("g", "T", r.queue_id, 0).messages[0] for s, r in ((lane, a), (general, b))]
        assert to_wire(got[0], 1, "h", 1000) == to_wire(got[1], 1, "h", 1000)
    finally:
        lane.shutdown()
        general.shutdown()


@pytest.mark.parametrize("case", sorted(GENERAL))
def test_every_other_message_takes_the_general_path(case):
    assert encoded_one(plain_message(**GENERAL[case])) is None


def test_user_properties_and_an_empty_body_take_the_general_path():
    assert encoded_one(plain_message(user_properties={"color": "red"})) is None
    assert encoded_one(plain_message(body=b"")) is None


texts = st.text(alphabet=st.sampled_from("ab\x01\x02 é中😀{}"), max_size=6)
hosts = st.one_of(st.just(""), st.sampled_from(["10.0.0.1", "255.255.255.255", "256.1.1.1", "1.2.3", "host.example"]))
types = st.sampled_from([MessageType.NORMAL, MessageType.MESSAGE_TYPE_UNSPECIFIED, MessageType.FIFO,
                         MessageType.DELAY, MessageType.TRANSACTION])


clean_texts = st.text(alphabet=st.sampled_from("ab é中😀{}"), min_size=1, max_size=6)


def mostly(draw, usual, other):
    """``usual`` 4 times in 5 (the lane's kind of value), else ``other``."""
    return draw(usual if draw(st.integers(0, 4)) else other)


@st.composite
def sent_messages(draw):
    sp = dict(message_id=mostly(draw, clean_texts, texts),
              message_type=mostly(draw, st.sampled_from([MessageType.NORMAL, MessageType.MESSAGE_TYPE_UNSPECIFIED]),
                                  types),
              born_host=mostly(draw, st.sampled_from(["", "10.0.0.1"]), hosts),
              body_encoding=draw(st.sampled_from([Encoding.IDENTITY, Encoding.GZIP])))
    if draw(st.booleans()):
        sp["tag"] = mostly(draw, clean_texts, texts)
    if draw(st.booleans()):
        sp["born_timestamp"] = timestamp_pb2.Timestamp(seconds=draw(st.integers(-10, 2_000_000_000)),
                                                       nanos=draw(st.integers(0, 999_999_999)))
    if draw(st.integers(0, 9)) == 0:
        sp["keys"] = draw(st.lists(texts, min_size=1, max_size=2))
    if draw(st.integers(0, 9)) == 0:
        sp["message_group"] = draw(texts)
    props = draw(st.dictionaries(texts, texts, min_size=1, max_size=1)) if draw(st.integers(0, 9)) == 0 else {}
    return plain_message(body=mostly(draw, st.binary(min_size=1, max_size=40), st.just(b"")), user_properties=props,
                         **sp)


def lane_takes(m: "pb.Message") -> bool:
    """The lane's rule, written out again: what encoded_one must take (and nothing else)."""
    sp = m.system_properties
    tag = sp.tag if sp.HasField("tag") else ""
    host = sp.born_host
    return (sp.message_type in (MessageType.NORMAL, MessageType.MESSAGE_TYPE_UNSPECIFIED) and not m.user_properties
            and not sp.keys and not sp.HasField("message_group") and not sp.HasField("delivery_timestamp")
            and bool(m.body) and bool(sp.message_id) and not {"\x01", "\x02"} & set(sp.message_id + tag)
            and (not host or (host.count(".") == 3 and all(p.isdigit() and int(p) < 256 for p in host.split(".")))))


@pytest.fixture(scope="module")
def store_pair(tmp_path_factory):
    pair = [_fresh(str(tmp_path_factory.mktemp(name))) for name in ("lane", "general")]
    yield pair
    for s in pair:
        s.shutdown()


@given(sent_messages())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_message_the_lane_takes_is_stored_as_the_general_path_stores_it(store_pair, m):
    one = encoded_one(m)
    assert (one is not None) == lane_takes(m)
    if one is None:
        return
    lane, general = store_pair
    topic, entry, _mid, born_ms, born_host, sys_flag = one
    a = lane.put_encoded(topic, [entry], born_ms, born_host, sys_flag)[0]
    b = general.put(to_store(m))
    assert (a.status, a.reason, a.queue_id, a.queue_offset, a.size) == (b.status, b.reason, b.queue_id,
                                                                         b.queue_offset, b.size)
    if a.ok:
        seg = [s.segments.segments[-1] for s in store_pair]
        assert (seg[0].start_offset, a.commitlog_offset) == (seg[1].start_offset, b.commitlog_offset)
        at = a.commitlog_offset - seg[0].start_offset
        assert seg[0].mapping[at:at + a.size] == seg[1].mapping[at:at + b.size]


@pytest.mark.parametrize("name, value", [
    ("TIMER_DELIVER_MS", "abc"), ("TIMER_DELIVER_MS", "\u00b2"), ("TIMER_DELIVER_MS", "9" * 23),
    ("TIMER_DELIVER_MS", str(-2**63 * 1000 - 1)),
    ("CHECK_IMMUNITY_TIME_IN_SECONDS", "\u00b2"), ("CHECK_IMMUNITY_TIME_IN_SECONDS", "9" * 23),
    ("CHECK_IMMUNITY_TIME_IN_SECONDS", "-5"), ("__PRIORITY", "9" * 23), ("__PRIORITY", "-99999999999"),
    ("__PRIORITY", "x"),
])
def test_a_stored_property_the_broker_cannot_read_is_left_out_of_the_delivery(stores, name, value):
    """A client may send a user property under a name the broker writes itself (to_store keeps the
    user's properties; SendRecords' frames reserve fewer names): a value that is no integer in the
    field's range (int32 priority, int64 ms and seconds) is left out of the delivered message, which is
    delivered; it raised ValueError out of to_wire, every receive of its queue then failing after
    its pop (a queue blocked for good by one message)."""
    s = stores(ManualClock())
    s.create_topic("T", 1)
    r = s.put(to_store(wire_message()))
    assert r.ok
    from tidemq.store import Message
    r = s.put(Message(topic="T", body=b"odd", properties={"UNIQ_KEY": "odd-1", name: value}))
    assert r.ok
    got = s.get("g", "T", 0, r.queue_offset, max_count=1).messages[0]
    w = to_wire(got, 1, "h", 1000)
    assert w.body == b"odd" and w.system_properties.message_id == "odd-1"
    sp = w.system_properties
    assert not sp.HasField("delivery_timestamp") and not sp.HasField("orphaned_transaction_recovery_duration")
    assert not sp.HasField("priority")
    assert name not in w.user_properties                       # (the broker's name: never shown as the user's)


def test_stored_properties_in_range_are_delivered_at_their_bounds(stores):
    s = stores(ManualClock())
    s.create_topic("T", 1)
    from tidemq.store import Message
    props = {"UNIQ_KEY": "b-1", "__PRIORITY": str(2**31 - 1), "CHECK_IMMUNITY_TIME_IN_SECONDS": "7",
             "TIMER_DELIVER_MS": "-5"}
    r = s.put(Message(topic="T", body=b"b", properties=props))
    sp = to_wire(s.get("g", "T", 0, r.queue_offset, max_count=1).messages[0], 1, "h", 0).system_properties
    assert sp.priority == 2**31 - 1 and sp.orphaned_transaction_recovery_duration.seconds == 7
    assert (sp.delivery_timestamp.seconds, sp.delivery_timestamp.nanos) == (-1, 995_000_000)
    far = -2**62 * 1000                       # a DELAY message sent with -2**62 seconds: due, stored as sent
    r = s.put(Message(topic="T", body=b"b", properties={"UNIQ_KEY": "b-2", "TIMER_DELIVER_MS": str(far)}))
    sp = to_wire(s.get("g", "T", 0, r.queue_offset, max_count=1).messages[0], 1, "h", 0).system_properties
    assert sp.delivery_timestamp.seconds == -2**62


def test_a_dead_letters_origin_is_the_brokers_shown_as_its_dead_letter_queue_only(stores):
    """ORIGIN_TOPIC / ORIGIN_QUEUE_OFFSET (consume/receive.py writes them when it moves a message to
    %DLQ%<group>) are the broker's: reserved (INTERNAL), never shown as user properties; the origin
    topic reaches the consumer as the dead_letter_queue system property."""
    from tidemq.store import Message
    assert {"ORIGIN_TOPIC", "ORIGIN_QUEUE_OFFSET", "__CRC32#"} <= INTERNAL     # (and the record's CRC)
    s = stores(ManualClock())
    s.create_topic("%DLQ%G", 1)
    r = s.put(Message("%DLQ%G", b"dead", properties={"UNIQ_KEY": "01DEAD", "ORIGIN_TOPIC": "T",
                                                     "ORIGIN_QUEUE_OFFSET": "7", "color": "red"}, queue_id=0))
    assert r.ok
    w = to_wire(s.get("g", "%DLQ%G", 0, 0, max_count=1).messages[0], 1, "h", 30_000)
    assert dict(w.user_properties) == {"color": "red"}
    assert (w.system_properties.dead_letter_queue.topic, w.system_properties.dead_letter_queue.message_id) == \
        ("T", "01DEAD")


def test_a_client_may_send_to_a_dead_letter_topic_but_not_forge_a_dead_letters_origin(tmp_path):
    """A send to %DLQ%<group> is an ordinary send (RocketMQ's proxy refuses only its system topics,
    rmq_sys_*): stored, delivered with no dead_letter_queue. One naming ORIGIN_TOPIC or
    ORIGIN_QUEUE_OFFSET is refused, ILLEGAL_MESSAGE_PROPERTY_KEY (the message only; nothing of it
    stored), as RocketMQ's proxy refuses a user property of any name its broker writes."""
    import asyncio

    from tidemq.broker.service import MessagingService
    from tidemq.config import BrokerConfig
    from tidemq.protocol.stubs import Code, spb
    from tidemq.testing.faulty_io import FaultyFileIO

    from tests.support.grpc_context import SendContext
    from tests.support.store import memory_config

    store = MessageStore(memory_config(), FaultyFileIO()).start()
    store.create_topic("%DLQ%G", 1)
    svc = MessagingService(store, BrokerConfig(send_hold_ms_max=0))

    def send(mid: str, props: dict) -> int:
        r = spb.SendMessageRequest()
        m = r.messages.add()
        m.topic.name, m.body = "%DLQ%G", mid.encode()
        m.system_properties.message_id, m.system_properties.message_type = mid, MessageType.NORMAL
        m.user_properties.update(props)
        got = asyncio.run(svc.send_messages.send(r, SendContext()))
        return spb.SendMessageResponse.FromString(got).entries[0].status.code if type(got) is bytes \
            else got.entries[0].status.code
    try:
        assert send("forged-1", {"ORIGIN_TOPIC": "Payments"}) == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
        assert send("forged-2", {"ORIGIN_QUEUE_OFFSET": "0"}) == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
        assert send("plain-1", {"color": "red"}) == Code.OK
        store.drain_dispatch()
        got = store.get("g", "%DLQ%G", 0, 0, max_count=8).messages
        assert [m.body for m in got] == [b"plain-1"]
        assert not to_wire(got[0], 1, "h", 30_000).system_properties.HasField("dead_letter_queue")
    finally:
        svc.close()
        store.shutdown()
