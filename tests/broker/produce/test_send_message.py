"""produce/send_message.py's lane registration: with tidemq._accel, SendMessage is served from the
request's bytes (MessageSends.send_bytes; what the lane reads: tests/test_accel.py, send_one; the
lane end to end: test_send_message_e2e.py, test_fuzz.py); without it, by the service's SendMessage.
The lane's one-message answer written as bytes (answer_one) is what protobuf writes for the same
response, and the lane's serializer passes those bytes through and serializes protobuf answers."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.broker.produce import send_message
from tidemq.broker.produce.batch import DUPLICATE, HELD, REFUSED, STORED, Verdicts
from tidemq.broker.produce.send_message import (
    SEND_MESSAGE,
    MessageSends,
    answer_many,
    answer_one,
    answer_stored_one,
    send_message_lane,
    serialize,
)
from tidemq.protocol.stubs import Code, pb, spb, status


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
    assert h.response_serializer is serialize
    for other in ("/apache.rocketmq.v2.MessagingService/QueryRoute", "/tidemq.Data/SendRecords"):
        assert lane.service(Details(other)) is None


def test_without_the_compiled_reader_the_service_serves_send_message(monkeypatch):
    monkeypatch.setattr(send_message, "_ACCEL", None)
    assert send_message_lane(Servicer()) is None


def _protobuf_answer(code, text, mid, offset, txn, recall) -> bytes:
    """The answer as MessageSends._answer builds it for one message, serialized by protobuf."""
    e = spb.SendResultEntry(status=status(code, text), message_id=mid, offset=offset, transaction_id=txn,
                            recall_handle=recall)
    return spb.SendMessageResponse(status=e.status, entries=[e]).SerializeToString()


_CODES = sorted(set(dict(pb.Code.items()).values()))


@settings(max_examples=400, deadline=None)
@given(code=st.one_of(st.sampled_from(_CODES), st.integers(1, 2**31 - 1)), text=st.text(max_size=80),
       mid=st.text(max_size=40), offset=st.one_of(st.integers(0, 300), st.integers(0, 2**63 - 1)),
       txn=st.text(max_size=30), recall=st.text(max_size=30))
def test_the_answer_written_as_bytes_is_what_protobuf_writes(code, text, mid, offset, txn, recall):
    got = answer_one(code, text, mid, offset, txn, recall)
    assert got == _protobuf_answer(code, text, mid, offset, txn, recall)
    back = spb.SendMessageResponse.FromString(got)
    assert back.status.code == code and back.entries[0].message_id == mid and back.entries[0].offset == offset


@settings(max_examples=300, deadline=None)
@given(mid=st.one_of(st.text(max_size=40), st.text(min_size=90, max_size=130)),
       offset=st.one_of(st.integers(0, 300), st.integers(0x3FF0, 0x4010), st.integers(0x1FFFF0, 0x200010),
                        st.integers(0, 2**63 - 1)))
def test_the_stored_answer_is_the_general_writers_bytes(mid, offset):
    """answer_stored_one (the lane's common answer, its constant parts made once) writes exactly what
    answer_one writes for OK, whatever the id's length and the offset's varint length."""
    assert answer_stored_one(mid, offset) == answer_one(Code.OK, "", mid, offset) == \
        _protobuf_answer(Code.OK, "", mid, offset, "", "")


def test_the_common_answers_and_a_text_the_codes_do_not_name():
    assert answer_one(Code.OK, "", "01ABC", 0) == _protobuf_answer(Code.OK, "", "01ABC", 0, "", "")
    assert answer_one(Code.OK, "duplicate: already stored", "01ABC", 7) == \
        _protobuf_answer(Code.OK, "duplicate: already stored", "01ABC", 7, "", "")
    assert answer_one(Code.TOO_MANY_REQUESTS, "disk full \u00e9", "x", 0) == \
        _protobuf_answer(Code.TOO_MANY_REQUESTS, "disk full \u00e9", "x", 0, "", "")
    for _ in range(100):                              # the status cache keeps to its bound, answers stay right
        n = _
        assert answer_one(Code.BAD_REQUEST, f"reason {n}", "m", n) == \
            _protobuf_answer(Code.BAD_REQUEST, f"reason {n}", "m", n, "", "")
    assert len(send_message._statuses) <= send_message._STATUS_MADE_MAX


def test_the_lane_serializer_passes_bytes_and_serializes_protobuf_answers():
    raw = answer_one(Code.OK, "", "m", 1)
    assert serialize(raw) is raw
    refused = spb.SendMessageResponse(status=status(Code.FORBIDDEN, "no"))     # e.g. the guard's refusal
    assert serialize(refused) == refused.SerializeToString()


class _Context:
    def __init__(self):
        self.trailer = None

    def set_trailing_metadata(self, md):
        self.trailer = md


_KINDS = st.sampled_from([STORED, DUPLICATE, REFUSED, HELD])


@st.composite
def _verdicts(draw):
    n = draw(st.integers(1, 6))
    v = Verdicts(n)
    ids = []
    for i in range(n):
        kind = draw(_KINDS)
        text = draw(st.text(max_size=20))
        if kind == STORED:
            v.stored(i, draw(st.integers(0, 7)), draw(st.integers(0, 2**62)))
        elif kind == DUPLICATE:
            v.duplicate(i, draw(st.integers(0, 2**40)), draw(st.text(max_size=10)), "duplicate: already stored")
        else:
            v.refuse(i, draw(st.sampled_from(_CODES)), text, kind)
        if draw(st.booleans()):
            v.recalls[i] = draw(st.text(min_size=1, max_size=12))
        if draw(st.booleans()):
            v.txns[i] = draw(st.text(min_size=1, max_size=12))
        mid = draw(st.text(max_size=16))
        if not mid and draw(st.booleans()):
            v.ids[i] = draw(st.text(min_size=1, max_size=16))      # the id the store gave
        ids.append(mid)
    return v, ids


@settings(max_examples=300, deadline=None)
@given(_verdicts())
def test_every_answer_written_as_bytes_is_what_protobuf_writes(case):
    """answer_many (the lane's answers other than the common one) against MessageSends._answer's
    protobuf response, the same trailer set."""
    v, ids = case
    want_ctx, got_ctx = _Context(), _Context()
    want = MessageSends._answer(v, ids, want_ctx).SerializeToString()
    MessageSends._trailer(v, got_ctx)
    assert answer_many(v, ids) == want
    assert got_ctx.trailer == want_ctx.trailer


def test_a_batch_stored_whole_is_answered_as_protobuf_writes_it():
    v = Verdicts(5)
    v.all_stored([0, 1, 2, 3, 4], [0, 1, 300, 2**40, 7])
    ids = ["01A", "01B", "", "\u00e9", "01E"]
    assert answer_many(v, ids) == MessageSends._answer(v, ids, _Context()).SerializeToString()


class _Call:
    """What the lane asks of a grpc.aio context (the trailer it is given kept)."""

    def __init__(self):
        self.trailer = None

    def peer(self):
        return "ipv4:127.0.0.1:40000"

    def invocation_metadata(self):
        return (("x-mq-client-id", "c1"),)

    def time_remaining(self):
        return 10.0

    def set_trailing_metadata(self, md):
        self.trailer = md


def _batch_request(topic, items, born=None, host="", encoding=0):
    """A SendMessageRequest of common messages: ``items`` (body, id, tag or None)."""
    r = spb.SendMessageRequest()
    for body, mid, tag in items:
        m = r.messages.add()
        m.topic.name, m.body = topic, body
        sp = m.system_properties
        sp.message_id, sp.message_type, sp.body_encoding = mid, pb.MessageType.NORMAL, encoding
        if tag is not None:
            sp.tag = tag
        if born is not None:
            sp.born_timestamp.seconds, sp.born_timestamp.nanos = born
        sp.born_host = host
    return r.SerializeToString()


@pytest.mark.skipif(send_message._SEND_MANY is None, reason="tidemq._accel is not built")
def test_a_batch_the_lane_reads_is_answered_and_stored_as_the_general_path_does():
    """The same SendMessage batches through the compiled lane (send_bytes: send_many's slices put with
    put_slices, answer_stored's bytes) on one service and through the general path (protobuf,
    to_store, put_batch) on another, alike (a ManualClock each): the same answer bytes and trailers,
    byte for byte the same records in every queue, the same outcome counts; each case a batch stored
    whole (tags or none; born time, host and a compressed body), a resend among new messages, a body
    past the store's limit, an empty tag, a topic auto-created, an illegal topic, a topic of another
    kind, and a request send_many leaves to protobuf (two topics)."""
    import asyncio

    from tests.support.store import memory_config
    from tidemq.broker.service import MessagingService
    from tidemq.config import BrokerConfig
    from tidemq.io import ManualClock
    from tidemq.store import MessageStore
    from tidemq.testing.faulty_io import FaultyFileIO

    pair = []
    for _ in range(2):
        store = MessageStore(memory_config(message_body_bytes_max=512, segment_size_bytes=256 * 1024),
                             FaultyFileIO(), ManualClock()).start()
        store.create_topic("T", 3)
        store.create_topic("F", 1, message_type="fifo")
        pair.append((store, MessagingService(store, BrokerConfig(send_hold_ms_max=0))))
    (sa, a), (sb, b) = pair
    lane, general = send_message.MessageSends(a.sends), send_message.MessageSends(b.sends)
    used = []

    def both(raw):
        ca, cb = _Call(), _Call()
        got = asyncio.run(lane.send_bytes(raw, ca))
        want = asyncio.run(general.send(spb.SendMessageRequest.FromString(raw), cb))
        assert serialize(got) == want.SerializeToString()
        assert ca.trailer == cb.trailer
        used.append(send_message._SEND_MANY(raw, b"k" * 16) is not None)
        return want

    try:
        items = [(b"m%d" % i * (i + 1), f"01ID{i}", ("TagA", None, "\u00e9t\u00e9")[i % 3]) for i in range(7)]
        assert [e.status.code for e in both(_batch_request("T", items)).entries] == [Code.OK] * 7
        both(_batch_request("T", [(b"b%d" % i, f"01BORN{i}", "t") for i in range(4)],
                            born=(1_700_000_001, 5_000_000), host="10.0.0.2", encoding=2))
        again = both(_batch_request("T", [(b"new", "01NEW", None), items[2], (b"new2", "01NEW2", "t")]))
        assert [e.status.code for e in again.entries] == [Code.OK] * 3
        assert again.entries[1].status.message == "duplicate: already stored"
        big = both(_batch_request("T", [(b"s", "01S", None), (b"x" * 600, "01BIG", None)]))
        assert [e.status.code for e in big.entries] == [Code.OK, Code.MESSAGE_BODY_TOO_LARGE]
        both(_batch_request("T", [(b"e", "01E", ""), (b"e2", "01E2", "")]))
        both(_batch_request("New", [(b"n", "01N0", None), (b"n", "01N1", None)]))
        assert both(_batch_request("bad topic!", [(b"x", "01X", None)] * 2)).entries[1].status.code == Code.ILLEGAL_TOPIC
        kinds = both(_batch_request("F", [(b"f", "01F0", None), (b"f", "01F1", None)]))
        assert kinds.entries[0].status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
        mixed = spb.SendMessageRequest.FromString(_batch_request("T", [(b"y", "01Y", None)]))
        mixed.messages.add().CopyFrom(spb.SendMessageRequest.FromString(_batch_request("New", [(b"z", "01Z", None)]))
                                      .messages[0])
        both(mixed.SerializeToString())
        assert used == [True] * 8 + [False]
        for s in (sa, sb):
            s.drain_dispatch()
        for topic, queues in (("T", 3), ("New", 1)):
            for q in range(queues):
                ra, rb = sa.get_raw(topic, q, 0), sb.get_raw(topic, q, 0)
                assert bytes(ra.records[1]) == bytes(rb.records[1]) and len(ra.records[0]) > 0, (topic, q)
        assert a.sends.outcomes.snapshot() == b.sends.outcomes.snapshot()
    finally:
        for s, svc in pair:
            svc.close()
            s.shutdown()
