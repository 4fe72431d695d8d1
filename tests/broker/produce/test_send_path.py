"""produce/send_path.py: put_code (every store outcome, status and typed reason, as the protocol code
the official clients react to, decided by the reason, never by the error text); a send during a change
of role; send_one (SendMessage's common request) answering every case as send does."""

import pytest

from tidemq.protocol.stubs import Code
from tidemq.broker.produce.send_path import put_code
from tidemq.store import PutReason, PutResult, PutStatus

CODE_OF = {
    PutReason.FLUSH_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    PutReason.DISK_FULL: Code.TOO_MANY_REQUESTS,
    PutReason.ARCHIVE_PENDING: Code.TOO_MANY_REQUESTS,
    PutReason.UNCONSUMED_BACKLOG: Code.TOO_MANY_REQUESTS,
    PutReason.NOT_RUNNING: Code.INTERNAL_SERVER_ERROR,
    PutReason.SHUTTING_DOWN: Code.INTERNAL_SERVER_ERROR,
    PutReason.DISPATCH_ERROR: Code.INTERNAL_SERVER_ERROR,
    PutReason.WRITE_ERROR: Code.INTERNAL_SERVER_ERROR,
    PutReason.FLUSH_FAILED: Code.INTERNAL_SERVER_ERROR,     # final: a resend must store it again (the lead maps it)
    PutReason.TOPIC_CREATE_FAILED: Code.INTERNAL_SERVER_ERROR,
    PutReason.INVALID_TOPIC: Code.ILLEGAL_TOPIC,
    PutReason.TOPIC_NOT_FOUND: Code.TOPIC_NOT_FOUND,
    PutReason.BODY_TOO_LARGE: Code.MESSAGE_BODY_TOO_LARGE,
    PutReason.PROPERTIES_TOO_LARGE: Code.MESSAGE_PROPERTIES_TOO_LARGE,
    PutReason.RECORD_TOO_LARGE: Code.BAD_REQUEST,
    PutReason.BAD_BODY: Code.BAD_REQUEST,
    PutReason.BAD_QUEUE_ID: Code.BAD_REQUEST,
    PutReason.BAD_PROPERTY: Code.BAD_REQUEST,
    PutReason.BAD_FIELD: Code.BAD_REQUEST,
    PutReason.ENCODE_FAILED: Code.BAD_REQUEST,
    PutReason.NOT_LEADER: Code.FORBIDDEN,
    PutReason.REPLICAS_NOT_ENOUGH: Code.HA_NOT_AVAILABLE,
    PutReason.REPLICA_LOST: Code.SLAVE_PERSISTENCE_TIMEOUT,     # appended: its resend is not stored twice
    PutReason.REPLICATION_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    PutReason.LEASE_EXPIRED: Code.INTERNAL_SERVER_ERROR,          # retried: the next try finds the leader
}


def test_every_reason_has_a_code():
    assert set(CODE_OF) == set(PutReason)


@pytest.mark.parametrize("reason", list(PutReason), ids=lambda r: r.name)
def test_the_code_follows_the_reason_not_the_text(reason):
    for text in ("disk full: a text that says otherwise", "invalid topic", "exceeds message_body_bytes_max", ""):
        r = PutResult.refused(reason, text)
        assert put_code(r.status, r.reason) == CODE_OF[reason], text
        assert put_code(r[0], r[9]) == CODE_OF[reason]          # as send_records reads a result


def test_ok_and_results_without_a_reason():
    assert put_code(PutStatus.PUT_OK, None) == Code.OK
    assert put_code(PutStatus.FLUSH_DISK_TIMEOUT, None) == Code.MASTER_PERSISTENCE_TIMEOUT
    assert put_code(PutStatus.PROPERTIES_SIZE_EXCEEDED, None) == Code.MESSAGE_PROPERTIES_TOO_LARGE
    assert put_code(PutStatus.TOPIC_NOT_FOUND, None) == Code.TOPIC_NOT_FOUND
    assert put_code(PutStatus.MESSAGE_ILLEGAL, None) == Code.BAD_REQUEST
    assert put_code(PutStatus.SERVICE_NOT_AVAILABLE, None) == Code.INTERNAL_SERVER_ERROR
    assert put_code(PutStatus.UNKNOWN_ERROR, None) == Code.INTERNAL_SERVER_ERROR


def test_a_send_during_a_change_of_role_answers_a_typed_status_and_puts_nothing(tmp_path):
    """A change of role closes the old service's put pool (server.activate) while a SendMessage may
    still be on its way through it: the send is answered INTERNAL_SERVER_ERROR (clients send it
    again, to the leader of the moment), nothing is stored, no exception leaves the send path."""
    import asyncio

    from tidemq.broker.produce.batch import Caller, Messages, SendBatch
    from tidemq.broker.service import MessagingService
    from tidemq.config import BrokerConfig
    from tidemq.protocol.stubs import MessageType
    from tidemq.store import Message, MessageStore
    from tidemq.testing.faulty_io import FaultyFileIO

    from tests.support.store import memory_config

    store = MessageStore(memory_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=60_000),
                         FaultyFileIO()).start()
    store.create_topic("T", 1)
    svc = MessagingService(store, BrokerConfig())
    assert store.puts_may_wait
    svc.puts.close()                            # what activate() does to the service it replaces
    msgs = [Message(topic="T", body=b"m%d" % i) for i in range(2)]
    batch = SendBatch(2, Messages(msgs, [MessageType.NORMAL] * 2, ["", ""], [None, None]), lambda i: "", 4,
                      topic="T")
    try:
        v = asyncio.run(svc.sends.send(batch, Caller("127.0.0.1:1", "c1", lambda: None)))
        assert v.codes == [Code.INTERNAL_SERVER_ERROR] * 2
        assert store.max_offset("T", 0) == 0
    finally:
        svc.close()
        store.shutdown()


def _pair(tmp_path, **store_overrides):
    """Two services over two stores alike: one answers through send_one, the other through send."""
    from tidemq.broker.service import MessagingService
    from tidemq.config import BrokerConfig
    from tidemq.store import MessageStore
    from tidemq.testing.faulty_io import FaultyFileIO

    from tests.support.store import memory_config

    out = []
    for _ in range(2):
        store = MessageStore(memory_config(**store_overrides), FaultyFileIO()).start()
        store.create_topic("T", 2)
        store.create_topic("F", 1, message_type="fifo")
        out.append((store, MessagingService(store, BrokerConfig(send_hold_ms_max=0))))
    return out


def _one(topic, body, mid):
    """SendMessage's common request as the compiled lane hands it to the path (an Encoded payload)."""
    from tidemq.broker.produce.batch import Encoded, SendBatch
    props = f"UNIQ_KEY\x01{mid}\x02__MSGTYPE\x01NORMAL\x02".encode()
    return SendBatch(1, Encoded(((body, props),), 1_700_000_000_000, "127.0.0.1:0", 0), lambda _i: mid, len(body),
                     topic=topic)


def _verdict(v):
    if type(v) is int:                               # send_one's stored-at offset
        return ("STORED", Code.OK, "", v)
    from tidemq.broker.produce.batch import STORED
    return ("STORED" if v.kinds[0] == STORED else v.kinds[0], v.codes[0], v.texts.get(0, ""), v.offsets[0])


def test_send_one_answers_every_case_as_send_does(tmp_path):
    """The same sends through send_one (one service) and send (another, alike): the same verdicts, the
    same messages stored, the same outcome counts; each case the common one, a resend, an empty body,
    a topic of another kind, an unknown topic, a flush backlog holding sends, a full connection, the
    disk alarm refusing the put."""
    import asyncio

    from tidemq.broker.produce.batch import Caller

    (sa, a), (sb, b) = _pair(tmp_path)
    caller = Caller("127.0.0.1:1", "c1", lambda: 10.0)

    lean = []                                           # whether send_one answered by itself (an offset)

    def both(topic, body, mid):
        va = asyncio.run(a.sends.send_one(_one(topic, body, mid), caller))
        vb = asyncio.run(b.sends.send(_one(topic, body, mid), caller))
        assert _verdict(va) == _verdict(vb), (topic, body, mid)
        lean.append(type(va) is int)
        return _verdict(va)

    try:
        assert both("T", b"first", "m0")[0] == "STORED"          # the topic not sent to before: send's way
        assert lean == [False]
        fast = [both("T", b"x%d" % i, f"m{i + 1}") for i in range(4)]
        assert [f[0] for f in fast] == ["STORED"] * 4 and lean[1:] == [True] * 4
        assert both("T", b"again", "m2")[1:3] == (Code.OK, "duplicate: already stored")      # a resend
        assert both("T", b"", "m9")[1] == Code.MESSAGE_BODY_EMPTY
        assert both("F", b"fifo", "m10")[1] == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
        assert both("Nope/x", b"x", "m11")[1] == Code.ILLEGAL_TOPIC
        for svc in (a, b):                                          # the flush backlog holds sends
            svc.gate.backlog_high_bytes = 0
        assert both("T", b"held", "m12")[1] == Code.TOO_MANY_REQUESTS
        for svc in (a, b):
            svc.gate.backlog_high_bytes = 1 << 40
            for _ in range(svc.gate.inflight_requests_max):         # the connection at its bound
                assert svc.gate.enter(caller.peer, 0) is None
        assert both("T", b"busy", "m13")[1] == Code.TOO_MANY_REQUESTS
        for svc in (a, b):
            for _ in range(svc.gate.inflight_requests_max):
                svc.gate.leave(caller.peer, 0)
        for s in (sa, sb):                                          # the disk alarm: the store refuses
            s.disk.refusal = "disk full (test)"
        assert both("T", b"full", "m14")[1] == Code.TOO_MANY_REQUESTS
        for s in (sa, sb):
            s.disk.refusal = None
        assert both("T", b"after", "m14")[0] == "STORED"            # refused, not stored: stored now
        assert lean[5:] == [False] * 7 + [True]                     # every other case: send's way
        for s in (sa, sb):
            s.drain_dispatch()
        assert [sa.max_offset("T", q) for q in range(2)] == [sb.max_offset("T", q) for q in range(2)]
        assert sum(sa.max_offset("T", q) for q in range(2)) == 6
        assert a.sends.outcomes.snapshot() == b.sends.outcomes.snapshot()
    finally:
        for s, svc in ((sa, a), (sb, b)):
            svc.close()
            s.shutdown()


def test_an_encoded_batch_puts_only_the_messages_not_answered_already(tmp_path):
    """SendMessage's batch read by the compiled lane (an Encoded payload of several messages): a resend
    among them is answered as the duplicate it is, an empty body refused, and only the others stored,
    each verdict at its own index."""
    import asyncio

    from tidemq.broker.produce.batch import DUPLICATE, REFUSED, STORED, Caller, Encoded, SendBatch

    (store, svc), (other, svc2) = _pair(tmp_path)
    caller = Caller("127.0.0.1:1", "c1", lambda: 10.0)

    def batch(items):
        entries = [(body, f"UNIQ_KEY\x01{mid}\x02__MSGTYPE\x01NORMAL\x02".encode()) for body, mid in items]
        ids = [mid for _, mid in items]
        return SendBatch(len(items), Encoded(entries, None, None, 0), ids.__getitem__,
                         sum(len(b) for b, _ in items), topic="T")

    try:
        v = asyncio.run(svc.sends.send(batch([(b"a", "m0"), (b"b", "m1")]), caller))
        assert v.kinds == [STORED, STORED]
        first = v.offsets[1]
        v = asyncio.run(svc.sends.send(batch([(b"c", "m2"), (b"b", "m1"), (b"", "m3"), (b"d", "m4")]), caller))
        assert v.kinds == [STORED, DUPLICATE, REFUSED, STORED]
        assert v.offsets[1] == first and v.codes[2] == Code.MESSAGE_BODY_EMPTY
        store.drain_dispatch()
        got = sorted(m.body for q in range(2) for m in store.get("g", "T", q, 0, 10).messages)
        assert got == [b"a", b"b", b"c", b"d"]
    finally:
        for s, x in ((store, svc), (other, svc2)):
            x.close()
            s.shutdown()
