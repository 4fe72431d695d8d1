"""A resend recognised by the dedup window is a typed outcome: SendResult.duplicate, from the
SendRecords frame's ``duplicates`` and from SendMessage's ``tidemq-duplicates`` trailer, while
SendMessage's answer itself stays what the official clients expect (OK, the first offset)."""

import grpc

from tidemq.client import Producer
from tidemq.protocol.data import DUPLICATES_TRAILER
from tidemq.protocol.stubs import Code, MessageType, pb, sgrpc, spb

from ...support.brokers import SMALL, make_topic, stored


def test_resends_are_flagged_as_duplicates_on_both_paths(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "Dup", 2)
    b = broker_factory(root, env=SMALL)
    for raw in (True, False):
        with Producer(b.endpoint, raw=raw) as p:
            first = p.send_batch("Dup", [b"a", b"b"])
            assert [r.duplicate for r in first] == [False, False] and all(r.ok for r in first)
            again = p.send_batch("Dup", [b"b", b"c", b"a"],
                                 message_ids=[first[1].message_id, f"01NEW{raw}", first[0].message_id])
            assert [r.duplicate for r in again] == [True, False, True]
            assert all(r.ok for r in again)
            assert (again[0].offset, again[2].offset) == (first[1].offset, first[0].offset)
    b.stop()
    assert sorted(m.body for m in stored(root, "Dup")) == [b"a", b"a", b"b", b"b", b"c", b"c"], \
        "each path stored a, b and c once"


def test_send_message_answers_a_duplicate_as_before_and_names_it_in_a_trailer(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "Dup", 1)
    b = broker_factory(root, env=SMALL)

    def request(mid):
        return spb.SendMessageRequest(messages=[pb.Message(
            topic=pb.Resource(name="Dup"), body=b"x",
            system_properties=pb.SystemProperties(message_id=mid, message_type=MessageType.NORMAL))])

    with grpc.insecure_channel(b.endpoint) as ch:
        stub = sgrpc.MessagingServiceStub(ch)
        r1, call1 = stub.SendMessage.with_call(request("01ONCE"), timeout=10)
        r2, call2 = stub.SendMessage.with_call(request("01ONCE"), timeout=10)
    assert r1.status.code == r2.status.code == Code.OK
    assert r2.entries[0].offset == r1.entries[0].offset and r2.entries[0].message_id == "01ONCE"
    assert DUPLICATES_TRAILER not in dict(call1.trailing_metadata() or ())
    assert dict(call2.trailing_metadata())[DUPLICATES_TRAILER] == "0"
    b.stop()
    assert [m.body for m in stored(root, "Dup")] == [b"x"], "stored once"
