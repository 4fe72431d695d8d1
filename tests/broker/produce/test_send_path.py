"""produce/send_path.py: put_code (every store outcome, status and typed reason, as the protocol code
the official clients react to, decided by the reason, never by the error text); a send during a change
of role; SendMessage's common request, read by the compiled lane and sent as an Encoded payload, answered
in every case as the same request decoded by protobuf and sent as store Messages."""

import pytest

from tidemq.protocol.stubs import Code
from tidemq.broker.produce.send_path import put_code
from tidemq.store import PutReason, PutResult, PutStatus

from tests.support.grpc_context import SendContext

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
    """Two services over two stores alike."""
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


_Context = SendContext           # (tests/support/grpc_context.py)


def _request(topic, body, mid):
    """SendMessage's common request (one NORMAL message with an id), as an official client sends it."""
    from tidemq.protocol.stubs import pb, spb
    sp = pb.SystemProperties(message_id=mid, message_type=pb.MessageType.NORMAL, born_host="127.0.0.1")
    sp.born_timestamp.seconds = 1_700_000_000
    m = pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=sp)
    return spb.SendMessageRequest(messages=[m]).SerializeToString()


def test_the_compiled_lane_answers_every_case_as_the_general_lane_does(tmp_path):
    """The same SendMessage through the compiled lane (one service: read in C, an Encoded payload,
    put_encoded, the answer's bytes) and through protobuf (another, alike: store Messages, put_batch,
    a SendMessageResponse): the same answers and trailers, the same messages stored, the same outcome
    counts; each case the common one, a resend, an empty body, a topic of another kind, an unknown
    topic, a flush backlog holding sends, a full connection, the disk alarm refusing the put."""
    import asyncio

    from tidemq.accel import ACCEL
    from tidemq.protocol.stubs import spb

    if ACCEL is None or not hasattr(ACCEL, "send_one"):
        pytest.skip("the compiled lane needs tidemq._accel")
    (sa, a), (sb, b) = _pair(tmp_path)
    lanes = []                                          # whether the compiled reader took the request
    taken = _taken(a.sends)                             # what SendPath.send_one answered, request by request

    def both(topic, body, mid):
        raw = _request(topic, body, mid)
        lanes.append(ACCEL.send_one(raw) is not None)
        ca, cb = _Context(), _Context()
        got = asyncio.run(a.send_messages.send_bytes(raw, ca))
        want = asyncio.run(b.send_messages.send(spb.SendMessageRequest.FromString(raw), cb))
        got = spb.SendMessageResponse.FromString(got) if type(got) is bytes else got
        assert got == want and ca.trailer == cb.trailer, (topic, body, mid)
        e = got.entries[0]
        return e.status.code, e.status.message, e.offset

    try:
        assert both("T", b"first", "m0")[0] == Code.OK
        assert [both("T", b"x%d" % i, f"m{i + 1}")[0] for i in range(4)] == [Code.OK] * 4
        assert both("T", b"again", "m2")[:2] == (Code.OK, "duplicate: already stored")      # a resend
        assert both("T", b"", "m9")[0] == Code.MESSAGE_BODY_EMPTY
        assert both("F", b"fifo", "m10")[0] == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
        assert both("Nope/x", b"x", "m11")[0] == Code.ILLEGAL_TOPIC
        for svc in (a, b):                                          # the flush backlog holds sends
            svc.gate.backlog_high_bytes = 0
        assert both("T", b"held", "m12")[0] == Code.TOO_MANY_REQUESTS
        for svc in (a, b):
            svc.gate.backlog_high_bytes = 1 << 40
            for _ in range(svc.gate.inflight_requests_max):         # the connection at its bound
                assert svc.gate.enter("ipv4:127.0.0.1:1", 0) is None
        assert both("T", b"busy", "m13")[0] == Code.TOO_MANY_REQUESTS
        for svc in (a, b):
            for _ in range(svc.gate.inflight_requests_max):
                svc.gate.leave("ipv4:127.0.0.1:1", 0)
        for s in (sa, sb):                                          # the disk alarm: the store refuses
            s.disk.refusal = "disk full (test)"
        assert both("T", b"full", "m14")[0] == Code.TOO_MANY_REQUESTS
        for s in (sa, sb):
            s.disk.refusal = None
        assert both("T", b"after", "m14")[0] == Code.OK             # refused, not stored: stored now
        assert lanes.count(False) <= 1                              # (an empty body: protobuf's way, maybe)
        # send_one stored the common ones, answered the full connection and the refused put itself, and
        # left the first send to a topic (not checked yet), the resend, the other kind, the unknown topic
        # and the held send to send (the empty body is not the compiled reader's: protobuf's way)
        want = ["declined"] + ["stored"] * 4 + ["declined"] * 4 + ["answered"] * 2 + ["stored"]
        assert taken == want, taken
        for q in range(2):
            got = [[(m.queue_offset, m.body, m.properties.get("UNIQ_KEY")) for m in s.get("G", "T", q, 0, max_count=32).messages]
                   for s in (sa, sb)]
            assert got[0] == got[1]
        assert sum(sa.max_offset("T", q) for q in range(2)) == 6
        assert a.sends.outcomes.snapshot() == b.sends.outcomes.snapshot()
    finally:
        for s, svc in ((sa, a), (sb, b)):
            svc.close()
            s.shutdown()


def _taken(sends) -> list[str]:
    """What ``sends.send_one`` answers from now on, call by call: stored (a queue offset), answered (a
    Verdicts) or declined (None: send's way)."""
    taken, real = [], sends.send_one

    def send_one(*args):
        got = real(*args)
        taken.append("stored" if type(got) is int else "declined" if got is None else "answered")
        return got
    sends.send_one = send_one
    return taken


def _assert_stored_alike(one, other, topics, count: int) -> None:
    """Twin (store, service) pairs fed the same sends on the two lanes: the same messages in every
    queue of ``topics`` ((name, queues)...; the first ``count`` of each) and the same outcome counts."""
    (sa, a), (sb, b) = one, other
    for s in (sa, sb):
        s.drain_dispatch()
    for topic, queues in topics:
        for q in range(queues):
            got = [[(m.queue_offset, m.body, m.properties.get("UNIQ_KEY")) for m in
                    s.get("G", topic, q, 0, max_count=count).messages] for s in (sa, sb)]
            assert got[0] == got[1]
    assert a.sends.outcomes.snapshot() == b.sends.outcomes.snapshot()


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_send_one_answers_as_send_does_where_it_declines_or_not(tmp_path, flush):
    """SendPath.send_one's conditions, each on twin stores (the compiled lane on one, protobuf's on the
    other): a topic of every kind (MIXED takes NORMAL), a topic's own body limit, quotas and the
    dedup window off: the same answers, stored messages and outcome counts; under SYNC_FLUSH (a put
    answered only once durable) send_one declines every request and send answers it."""
    import asyncio

    from tidemq.accel import ACCEL
    from tidemq.protocol.stubs import spb

    if ACCEL is None or not hasattr(ACCEL, "send_one"):
        pytest.skip("the compiled lane needs tidemq._accel")
    (sa, a), (sb, b) = _pair(tmp_path, flush_disk_type=flush)
    for s in (sa, sb):
        s.create_topic("M", 1, message_type="mixed")
        s.create_topic("D", 1, message_type="delay")
        s.create_topic("L", 1)
        s.set_topic_settings("L", {"max_message_bytes": 3})
    taken = _taken(a.sends)

    def both(topic, body, mid):
        raw = _request(topic, body, mid)
        ca, cb = _Context(), _Context()
        got = asyncio.run(a.send_messages.send_bytes(raw, ca))
        want = asyncio.run(b.send_messages.send(spb.SendMessageRequest.FromString(raw), cb))
        got = spb.SendMessageResponse.FromString(got) if type(got) is bytes else got
        assert got == want and ca.trailer == cb.trailer, (topic, body, mid)
        return got.entries[0].status.code

    try:
        for topic in ("T", "M", "D", "L"):
            for mid in ("m0", "m0", "m1"):                           # the second: a resend
                both(topic, b"body", f"{topic}-{mid}")
        assert both("L", b"ok", "L-m2") == Code.OK
        assert both("L", b"long", "L-m3") == Code.MESSAGE_BODY_TOO_LARGE
        assert both("D", b"x", "D-m2") == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
        for svc in (a, b):
            svc.sends.resends.window.size = 0                         # the window off: no duplicates
        assert both("T", b"again", "T-m0") == Code.OK
        if flush == "SYNC_FLUSH":
            assert set(taken) == {"declined"}
        else:
            assert taken.count("stored") == 4 and "declined" in taken, taken
        _assert_stored_alike((sa, a), (sb, b), (("T", 2), ("M", 1), ("L", 1)), 32)
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


@pytest.mark.parametrize("sync", [True, False], ids=["SYNC", "ASYNC"])
def test_a_resend_reaching_a_promoted_followers_old_service_is_never_stored_twice(sync):
    """Issue 27's "twice": a message stored on the leader and copied to a follower, its answer lost
    with the leader; the client resends it (same id) to the follower being promoted. The promotion
    (replication/node.lead) makes the store a leader's before the host replaces the follower's service
    (server.activate): a resend that reaches the follower's service in between (its window is empty,
    it was built on an empty store) is answered INTERNAL_SERVER_ERROR (the clients send it again) and
    put nowhere; the leader's service then answers it as the earlier store, found by its id in what
    the follower copied."""
    import asyncio

    from tidemq.broker.replication.acks import ReplicaAcks
    from tidemq.broker.service import MessagingService
    from tidemq.config import BrokerConfig
    from tidemq.io import ManualClock
    from tidemq.protocol.stubs import spb
    from tidemq.store import MessageStore
    from tidemq.testing.faulty_io import FaultyFileIO

    from tests.support.store import memory_config

    clock = ManualClock(1_700_000_000_000)
    leader = MessageStore(memory_config(), FaultyFileIO(), clock=clock).start()
    follower = MessageStore(memory_config(), FaultyFileIO(), clock=clock).start()
    config = BrokerConfig(send_hold_ms_max=0)
    services = []
    try:
        leader.lead(1)
        leader.create_topic("T", 2)
        follower.follow("follows the leader")
        copy_svc = MessagingService(follower, config, leading=False)         # a follower's, on an empty store
        services.append(copy_svc)
        lead_svc = MessagingService(leader, config)
        services.append(lead_svc)
        request = spb.SendMessageRequest.FromString(_request("T", b"the-one", "resend-1"))

        def send(svc):
            return asyncio.run(svc.SendMessage(request, _Context())).entries[0]

        def copies():
            return [m.queue_offset for m in follower.query_by_key("T", "resend-1", whole_log=True)]

        first = send(lead_svc)
        assert first.status.code == Code.OK
        at, data = leader.replica.read(follower.replica.end, 1 << 20)
        follower.replica.append(at, data, defer_dispatch=True)          # copied; its answer is lost
        # node.lead's steps on the store: its followers' acknowledgements (none in sync yet: in_sync_replicas_min
        # 0, every put confirmed at once), then the store takes puts
        acks = ReplicaAcks(sync, 0, 60_000, 60_000, lambda: follower.replica.end, clock)
        follower.writer.replicas = acks
        follower.lead(2)
        # ... and the resend reaches the follower's service before the host replaced it
        early = send(copy_svc)
        assert early.status.code == Code.INTERNAL_SERVER_ERROR, early
        assert copies() == [first.offset], "put nowhere"
        promoted = MessagingService(follower, config, leading=True, replaces=copy_svc)     # server.activate
        services.append(promoted)
        again = send(promoted)
        assert (again.status.code, again.offset) == (Code.OK, first.offset), "answered as the earlier store"
        assert copies() == [first.offset], "stored once"
    finally:
        for s in services:
            s.close()
        follower.shutdown()
        leader.shutdown()


def _sync_leader_service(mid: str):
    """A leading store on a FaultyFileIO and ManualClock whose puts wait for one SYNC follower "f"
    (connected, in the set, confirming nothing until told: ``acks.confirm("f", conn, end)``), its
    MessagingService, and a SendMessage request of one message of id ``mid`` to topic T."""
    from tidemq.broker.replication.acks import ReplicaAcks
    from tidemq.broker.service import MessagingService
    from tidemq.config import BrokerConfig
    from tidemq.io import ManualClock
    from tidemq.protocol.stubs import spb
    from tidemq.store import MessageStore
    from tidemq.testing.faulty_io import FaultyFileIO

    from tests.support.store import memory_config

    clock = ManualClock(1_700_000_000_000)
    store = MessageStore(memory_config(), FaultyFileIO(), clock=clock).start()
    store.lead(1)
    store.create_topic("T", 1)
    svc = MessagingService(store, BrokerConfig(send_hold_ms_max=0))
    acks = ReplicaAcks(True, 1, 60_000, 60_000, lambda: store.replica.end, clock)
    acks.set_isr({"f"})
    conn = acks.connect("f", "", 0).conn
    store.writer.replicas = acks
    return store, svc, acks, conn, spb.SendMessageRequest.FromString(_request("T", b"the-one", mid))


async def _first_send_waiting(store, svc, request):
    """``request`` sent to ``svc`` as a task, on until its put is appended and waits for the follower:
    (the task, the log's end after it)."""
    import asyncio

    first = asyncio.ensure_future(svc.SendMessage(request, _Context()))
    for _ in range(1000):
        if store.replica.end > 0:
            break
        await asyncio.sleep(0)
    end = store.replica.end
    assert end > 0 and not first.done()
    return first, end


@pytest.mark.parametrize("caller_went", [True, False], ids=["caller-went", "caller-waits"])
def test_a_put_waiting_for_its_followers_is_remembered_for_its_resend(caller_went):
    """A SYNC put waits for its followers; its caller may go meanwhile: the client's deadline, or the
    member that forwarded it through its leader port giving up (leader_port_forward_timeout_ms, a change
    of role: replication/forward.py); gRPC cancels the handler then. Gone or still waiting, the message
    is in the log: its resend (same id) is answered from there -- not confirmed yet while the followers
    have not got it, then as the earlier store -- and never stored a second time, even where nothing
    else would find it (a service built on an empty store looks nothing up in the index)."""
    import asyncio

    store, svc, acks, conn, request = _sync_leader_service("gone-1")

    async def main():
        first, end = await _first_send_waiting(store, svc, request)
        if caller_went:
            first.cancel()                         # gRPC: the caller went
            with pytest.raises(asyncio.CancelledError):
                await first
        again = asyncio.ensure_future(svc.SendMessage(request, _Context()))
        for _ in range(1000):
            if again.done() or store.replica.end > end:
                break
            await asyncio.sleep(0)
        acks.confirm("f", conn, store.replica.end)       # (releases a put made again, if one was)
        waiting = (await again).entries[0]
        if not caller_went:
            assert (await first).entries[0].status.code == Code.OK
        later = (await svc.SendMessage(request, _Context())).entries[0]
        return end, waiting, later

    try:
        end, waiting, later = asyncio.run(main())
        assert store.replica.end == end, "stored once"
        assert waiting.status.code == Code.SLAVE_PERSISTENCE_TIMEOUT, "in the log, not confirmed yet"
        assert (later.status.code, later.offset) == (Code.OK, 0), "then answered as the earlier store"
        assert svc.sends.resends.unconfirmed == {}, "confirmed: the window answers it now"
    finally:
        svc.close()
        store.shutdown()


def test_a_gone_callers_put_leaves_the_unconfirmed_once_its_followers_confirm_it():
    """A SYNC put whose caller went (gRPC cancelled the handler while it waited for its followers) is
    still settled when its followers confirm it: its entry leaves ``unconfirmed`` for the window, with
    no resend needed -- an entry left there kept every later single send off the compiled lane
    (SendPath.send_one declined while any remained) until a resend or the 10k eviction. Its resend is
    answered as the earlier store (from the window now) and never stored again; once the puts wait for
    nothing, the next single send takes the compiled lane (protobuf's where tidemq._accel is not built)."""
    import asyncio

    store, svc, acks, conn, request = _sync_leader_service("gone-2")
    resends = svc.sends.resends

    async def main():
        first, end = await _first_send_waiting(store, svc, request)
        assert len(resends.unconfirmed) == 1
        first.cancel()                             # gRPC: the caller went
        with pytest.raises(asyncio.CancelledError):
            await first
        acks.confirm("f", conn, end)               # its follower has it now
        for _ in range(1000):
            if not resends.unconfirmed:
                break
            await asyncio.sleep(0)
        assert resends.unconfirmed == {}, "confirmed: out of the unconfirmed, no resend needed"
        again = (await svc.SendMessage(request, _Context())).entries[0]
        return end, again

    try:
        end, again = asyncio.run(main())
        assert (again.status.code, again.offset) == (Code.OK, 0), "its resend: answered as the earlier store"
        assert store.replica.end == end, "stored once"
        assert resends.window.find_keys(resends.key("T", "gone-2")), "the window answers it"
        store.writer.replicas = None               # the puts wait for nothing now
        taken = _taken(svc.sends)
        got = _lane(svc, _request("T", b"next", "next-1"), _Context())
        assert got.entries[0].status.code == Code.OK and got.entries[0].offset == 1
        from tidemq.accel import ACCEL
        if ACCEL is not None and hasattr(ACCEL, "send_one"):
            assert taken == ["stored"], "the compiled lane took it"
        assert resends.surely_new(resends.key("T", "next-2"))
    finally:
        svc.close()
        store.shutdown()


@pytest.mark.parametrize("fsync", ["done", "failed"])
def test_a_gone_callers_sync_flush_put_is_settled_by_its_fsync(fsync):
    """SYNC_FLUSH: a put whose caller went while its fsync ran is settled by that fsync all the same:
    done, its entry moves to the window (its resend answered as the earlier store, stored once);
    failed (the record taken out of the log: never durable), its entry is forgotten and its resend is
    a new message (stored again where the log takes writes). Either way nothing is left in
    ``unconfirmed``."""
    import asyncio

    from tidemq.broker.service import MessagingService
    from tidemq.config import BrokerConfig
    from tidemq.protocol.stubs import spb
    from tidemq.store import MessageStore

    from tests.broker.test_puts import WAIT_S, GatedFileIO
    from tests.support.store import memory_config

    fio = GatedFileIO()
    store = MessageStore(memory_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=60_000), fio).start()
    store.create_topic("T", 1)
    svc = MessagingService(store, BrokerConfig(send_hold_ms_max=0))
    resends = svc.sends.resends
    request = spb.SendMessageRequest.FromString(_request("T", b"the-one", "gone-3"))
    settled = []

    async def main():
        done = asyncio.Event()
        real = resends.settled_gone

        def settled_gone(*args):
            real(*args)
            settled.append(dict(resends.unconfirmed))
            done.set()
        resends.settled_gone = settled_gone
        fio.gate.clear()                           # the next commit-log fsync waits
        fio.entered.clear()
        first = asyncio.ensure_future(svc.SendMessage(request, _Context()))
        for _ in range(1000):                      # its put appended, waiting for its fsync
            if resends.unconfirmed:
                break
            await asyncio.sleep(0)
        assert len(resends.unconfirmed) == 1 and not first.done()
        assert await asyncio.to_thread(fio.entered.wait, WAIT_S)
        first.cancel()                             # gRPC: the caller went
        with pytest.raises(asyncio.CancelledError):
            await first
        if fsync == "failed":
            fio.fail("fsync", path_contains="commitlog")
        fio.gate.set()
        await asyncio.wait_for(done.wait(), WAIT_S)
        if fsync == "failed":                      # never durable: its resend is a new message
            key = resends.key("T", "gone-3")
            assert resends.find(key, [0], lambda _i: "T", lambda _i: "gone-3") == {}
            return None
        return (await svc.SendMessage(request, _Context())).entries[0]

    try:
        again = asyncio.run(main())
        assert settled == [{}], "settled: nothing left unconfirmed"
        if fsync == "done":
            assert (again.status.code, again.offset) == (Code.OK, 0), "answered as the earlier store"
            assert store.max_offset("T", 0) == 1, "stored once"
    finally:
        svc.close()
        store.shutdown()


def _lane(svc, raw: bytes, context):
    """SendMessage as the server takes it: through the compiled lane (the request's bytes) when
    tidemq._accel is built, else through protobuf; the answer as a SendMessageResponse."""
    import asyncio

    from tidemq.accel import ACCEL
    from tidemq.protocol.stubs import spb

    if ACCEL is not None and hasattr(ACCEL, "send_one"):
        got = asyncio.run(svc.send_messages.send_bytes(raw, context))
    else:
        got = asyncio.run(svc.send_messages.send(spb.SendMessageRequest.FromString(raw), context))
    return spb.SendMessageResponse.FromString(got) if type(got) is bytes else got


def _message_request(messages) -> bytes:
    """A SendMessageRequest of ``messages``: (topic, body, id, {SystemProperties field: value})."""
    from tidemq.protocol.stubs import spb
    r = spb.SendMessageRequest()
    for topic, body, mid, fields in messages:
        m = r.messages.add()
        m.topic.name, m.body = topic, body
        m.system_properties.message_id = mid
        for name, value in fields.items():
            setattr(m.system_properties, name, value)
    return r.SerializeToString()


@pytest.mark.parametrize("host", ["\u00b2.1.1.1", "1.\u2460.3.4", "\u0661.2.3.4", "h.example", "10.0.0.1"])
def test_a_born_host_of_any_digits_gets_a_typed_answer_on_both_lanes(tmp_path, host):
    """A born host of four dotted runs of what str.isdigit calls digits but int() does not read (a
    superscript two, a circled one) is no ipv4 address: kept as the __BORNHOST property as any
    other name is, the message stored, the same answer from the compiled lane and from protobuf's,
    one message or a batch; never an exception out of the handler (gRPC's UNKNOWN, no typed status)."""
    import asyncio

    from tidemq.protocol.stubs import spb

    (sa, a), (sb, b) = _pair(tmp_path)
    try:
        for n in (1, 2):
            raw = _message_request([("T", b"body", f"{n}-{i}", {"born_host": host}) for i in range(n)])
            got = _lane(a, raw, _Context())
            want = asyncio.run(b.send_messages.send(spb.SendMessageRequest.FromString(raw), _Context()))
            assert got == want, host
            assert [e.status.code for e in got.entries] == [Code.OK] * n
        for s in (sa, sb):
            s.drain_dispatch()
            got = [m for q in range(2) for m in s.get("G", "T", q, 0, max_count=8).messages]
            assert len(got) == 3
            if host in ("\u00b2.1.1.1", "1.\u2460.3.4", "h.example"):      # (int() reads \u0661: an ipv4 address)
                assert {m.properties.get("__BORNHOST") for m in got} == {host}
    finally:
        for s, svc in ((sa, a), (sb, b)):
            svc.close()
            s.shutdown()


@pytest.mark.parametrize("given", ["abc", "", "1.5", "-1"])
def test_a_priority_message_whose_priority_is_no_number_is_refused_typed(tmp_path, given):
    """A PRIORITY message whose store Message holds a __PRIORITY that is no integer (SendMessage refuses
    the user property of that name now, ILLEGAL_MESSAGE_PROPERTY_KEY; the path does not count on its
    lanes for it) is refused BAD_REQUEST, as a negative one is, and nothing is stored; it raised
    ValueError out of the send path (gRPC UNKNOWN, no typed status)."""
    import asyncio

    from tidemq.broker.produce.batch import Caller, Messages, SendBatch
    from tidemq.protocol.stubs import MessageType
    from tidemq.store import Message

    (sa, a), (sb, b) = _pair(tmp_path)
    sa.create_topic("M", 1, message_type="mixed")
    msgs = [Message(topic="M", body=b"body", properties={"UNIQ_KEY": "p-1", "__PRIORITY": given})]
    batch = SendBatch(1, Messages(msgs, [MessageType.PRIORITY], [""], [None]), lambda i: "p-1", 4, topic="M")
    try:
        v = asyncio.run(a.sends.send(batch, Caller("127.0.0.1:1", "c1", lambda: None)))
        assert v.codes == [Code.BAD_REQUEST]
        assert sa.max_offset("M", 0) == 0
    finally:
        for s, svc in ((sa, a), (sb, b)):
            svc.close()
            s.shutdown()


def test_both_lanes_answer_requests_at_their_bounds_alike(tmp_path):
    """Requests at the bounds of what is stored, through the compiled lane and through protobuf's, on
    twin stores: a message id, a tag, a key and a user property at the properties' bound and one byte
    past it; topic names empty, of 127 and 128 characters and huge, a system topic; message types and
    body encodings no enum names; born times at the compiled reader's bound and past an int64 of ms; a
    batch with one message past a bound. The same answers, a typed code each, the same messages stored."""
    import asyncio

    from tidemq.protocol.stubs import spb
    from tidemq.record.codec import USER_PROPERTIES_MAX_BYTES as MOST

    (sa, a), (sb, b) = _pair(tmp_path, segment_size_bytes=128 * 1024)
    head = len("UNIQ_KEY\x01\x02__MSGTYPE\x01NORMAL\x02")            # the common message's properties
    cases = [
        [("T", b"b", "i" * (MOST - head), {})], [("T", b"b", "i" * (MOST - head + 1), {})],
        [("T", b"b", "\u00e9" * ((MOST - head) // 2), {})], [("T", b"b", "\u00e9" * ((MOST - head) // 2 + 1), {})],
        [("T", b"b", "t1", {"tag": "g" * (MOST - head - 2 - len("TAGS\x01\x02"))})],
        [("T", b"b", "t2", {"tag": "g" * (MOST - head - 2 - len("TAGS\x01\x02") + 1)})],
        [("T", b"b", "k1", {"keys": ["k" * (MOST - 100)]})], [("T", b"b", "k2", {"keys": ["k" * MOST]})],
        [("T", b"b", "k3", {"keys": [f"k{i}" for i in range(3000)]})],
        [("", b"b", "e1", {})], [("t" * 127, b"b", "e2", {})], [("t" * 128, b"b", "e3", {})],
        [("t" * 100_000, b"b", "e4", {})], [("RMQ_SYS_TRANS_HALF_TOPIC", b"b", "e5", {})],
        [("T", b"b", "y1", {"message_type": 42})], [("T", b"b", "y2", {"message_type": -3})],
        [("T", b"b", "y3", {"body_encoding": 9})], [("T", b"b", "y4", {"body_encoding": -1})],
        [("T", b"b", "s1", {"seconds": 4 * 10**15 - 1})], [("T", b"b", "s2", {"seconds": 4 * 10**15})],
        [("T", b"b", "s3", {"seconds": 2**63 - 1})], [("T", b"b", "s4", {"seconds": -2**63, "nanos": -2**31})],
        [("T", b"b", "m1", {}), ("T", b"b", "i" * (MOST - head + 1), {}), ("T", b"b", "m2", {})],
        [("T", b"b", "m3", {"seconds": 2**62}), ("T", b"b", "m4", {"seconds": 2**62})],
    ]

    def request(messages) -> bytes:
        r = spb.SendMessageRequest()
        for topic, body, mid, fields in messages:
            m = r.messages.add()
            m.topic.name, m.body = topic, body
            sp = m.system_properties
            sp.message_id = mid
            for name, value in fields.items():
                if name == "keys":
                    sp.keys.extend(value)
                elif name in ("seconds", "nanos"):
                    setattr(sp.born_timestamp, name, value)
                else:
                    setattr(sp, name, value)
        return r.SerializeToString()

    try:
        codes = []
        for messages in cases:
            raw = request(messages)
            ca, cb = _Context(), _Context()
            got = _lane(a, raw, ca)
            want = asyncio.run(b.send_messages.send(spb.SendMessageRequest.FromString(raw), cb))
            assert got == want and ca.trailer == cb.trailer, messages[0][2][:8]
            codes.append([e.status.code for e in got.entries])
        assert codes[:4] == [[Code.OK], [Code.MESSAGE_PROPERTIES_TOO_LARGE]] * 2
        assert codes[4:6] == [[Code.OK], [Code.MESSAGE_PROPERTIES_TOO_LARGE]]
        assert codes[9:14] == [[Code.ILLEGAL_TOPIC], [Code.OK]] + [[Code.ILLEGAL_TOPIC]] * 3
        assert codes[14:16] == [[Code.UNSUPPORTED]] * 2
        assert codes[-2] == [Code.OK, Code.MESSAGE_PROPERTIES_TOO_LARGE, Code.OK]
        assert all(c in vars(Code).values() for cs in codes for c in cs)
        _assert_stored_alike((sa, a), (sb, b), (("T", 2), ("t" * 127, 1)), 64)
    finally:
        for s, svc in ((sa, a), (sb, b)):
            svc.close()
            s.shutdown()


def test_a_user_property_of_a_name_the_broker_writes_is_refused_and_cannot_forge_an_id(tmp_path):
    """A message sent with no id and the user property UNIQ_KEY=<another message's id> was stored under
    that id: in the first send_dedup_after_restart_s after a start (the index asked for ids the window
    does not know), the real message of that id was then answered OK as a duplicate and never stored.
    Every name the broker writes itself (wire.INTERNAL: UNIQ_KEY, TAGS, TIMER_DELIVER_MS, __PRIORITY,
    REAL_TOPIC...) is refused as a user property, ILLEGAL_MESSAGE_PROPERTY_KEY as RocketMQ's proxy
    answers it, that message only; nothing of it is stored."""
    from tidemq.broker.service import MessagingService
    from tidemq.broker.wire import INTERNAL
    from tidemq.config import BrokerConfig
    from tidemq.protocol.stubs import pb, spb
    from tidemq.store import Message, MessageStore
    from tidemq.testing.faulty_io import FaultyFileIO

    from tests.support.store import memory_config

    store = MessageStore(memory_config(), FaultyFileIO()).start()
    store.create_topic("T", 1)
    assert store.put(Message(topic="T", body=b"before", properties={"UNIQ_KEY": "e-1"})).ok    # (a start with data)
    svc = MessagingService(store, BrokerConfig(send_hold_ms_max=0))

    def send(messages):
        r = spb.SendMessageRequest()
        for mid, body, props in messages:
            m = r.messages.add()
            m.topic.name, m.body = "T", body
            m.system_properties.message_id, m.system_properties.message_type = mid, pb.MessageType.NORMAL
            m.user_properties.update(props)
        got = _lane(svc, r.SerializeToString(), _Context())
        return [(e.status.code, e.status.message) for e in got.entries]

    try:
        forged = send([("", b"forged", {"UNIQ_KEY": "victim-1"})])
        assert forged[0][0] == Code.ILLEGAL_MESSAGE_PROPERTY_KEY and "UNIQ_KEY" in forged[0][1]
        assert send([("victim-1", b"real", {})]) == [(Code.OK, "OK")]
        for name in sorted(INTERNAL):
            got = send([(f"{name}-1", b"odd", {name: "abc", "fine": "1"}), (f"{name}-2", b"plain", {"fine": "1"})])
            assert [c for c, _ in got] == [Code.ILLEGAL_MESSAGE_PROPERTY_KEY, Code.OK], name
        store.drain_dispatch()
        bodies = [m.body for m in store.get("G", "T", 0, 0, max_count=64).messages]
        assert bodies == [b"before", b"real"] + [b"plain"] * len(INTERNAL)
    finally:
        svc.close()
        store.shutdown()


def test_a_request_of_more_messages_than_its_bound_is_refused_whole_on_both_lanes(tmp_path):
    """send_messages_per_request_max bounds the messages one SendMessage carries (a request of 4.5 MiB
    held ~300k tiny ones, a store Message each on the general path: seconds of the event loop and a GB
    of memory): one past it is refused whole, PAYLOAD_TOO_LARGE, nothing stored, by the compiled
    lane's batch (common messages) and by protobuf's (messages with keys) alike; the bound itself is
    stored."""
    import asyncio

    from tidemq.broker.service import MessagingService
    from tidemq.config import BrokerConfig
    from tidemq.protocol.stubs import spb
    from tidemq.store import MessageStore
    from tidemq.testing.faulty_io import FaultyFileIO

    from tests.support.store import memory_config

    pairs = []
    for _ in range(2):
        store = MessageStore(memory_config(), FaultyFileIO()).start()
        store.create_topic("T", 1)
        pairs.append((store, MessagingService(store, BrokerConfig(send_hold_ms_max=0, send_messages_per_request_max=3))))
    (sa, a), (sb, b) = pairs
    try:
        for fields in ({}, {"keys": ["k"]}):
            for n, code in ((4, Code.PAYLOAD_TOO_LARGE), (3, Code.OK)):
                raw = _message_request([("T", b"b%d" % i, f"{n}-{i}-{len(fields)}", {}) for i in range(n)])
                if fields:
                    req = spb.SendMessageRequest.FromString(raw)
                    for m in req.messages:
                        m.system_properties.keys.append("k")
                    raw = req.SerializeToString()
                got = _lane(a, raw, _Context())
                want = asyncio.run(b.send_messages.send(spb.SendMessageRequest.FromString(raw), _Context()))
                assert got == want and got.status.code == code, (n, fields)
                if code != Code.OK:
                    assert not got.entries and "send_messages_per_request_max=3" in got.status.message
        for s in (sa, sb):
            assert s.max_offset("T", 0) == 6
    finally:
        for s, svc in pairs:
            svc.close()
            s.shutdown()
