"""SendRecords end to end (tidemq.client's raw batch sends): a round trip read back through the
protocol's PullMessage, one result per message, a resend answered from the dedup window, and the
refusals SendMessage makes (unknown topic, oversized body and properties, reserved properties,
malformed frames, resource alarm and flush backlog) with the same codes."""

import threading

import grpc
import pytest

from tidemq.protocol.send_frame import HEAD, MAGIC, decode_response, encode_request
from tidemq.protocol.stubs import Code
from tidemq.client import ClientError, Producer, PullConsumer

from ...support.brokers import NO_FLUSH, SMALL, admin_call, make_topic, stored
from ...support.wait import wait_until

KIB = 1 << 10


def raw_send(endpoint, frame: bytes):
    with grpc.insecure_channel(endpoint) as ch:
        return decode_response(ch.unary_unary("/tidemq.Data/SendRecords")(frame, timeout=30))


def test_round_trip_results_dedup_and_refusals(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "Raw", 2)
    b = broker_factory(root, env={**SMALL, "TIDEMQ_MESSAGE_BODY_BYTES_MAX": "1000"})
    with Producer(b.endpoint) as p, PullConsumer(b.endpoint) as c:
        rs = p.send_batch("Raw", [b"m-%d" % i for i in range(6)], tags=["A", None, "B", "A", None, "ü"],
                          keys=[["k1", "k2"], None, [], ["k3"], None, None],
                          properties=[{"x": "1"}, None, {"y": "é"}, None, None, None])
        assert [r.code for r in rs] == [Code.OK] * 6 and all(r.ok for r in rs)
        assert sorted((r.queue_id, r.offset) for r in rs) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
        # read back through the protocol: what SendMessage would have stored
        got = {m.system_properties.message_id: m for q in range(2) for m in c.pull("Raw", q, 0).messages}
        assert set(got) == {r.message_id for r in rs}
        m0, m2 = got[rs[0].message_id], got[rs[2].message_id]
        assert m0.body == b"m-0" and m0.system_properties.tag == "A" and list(m0.system_properties.keys) == ["k1", "k2"]
        assert dict(m0.user_properties) == {"x": "1"} and m0.system_properties.message_type == 1   # NORMAL
        assert dict(m2.user_properties) == {"y": "é"} and got[rs[5].message_id].system_properties.tag == "ü"

        # a resend with the same ids is answered from the dedup window: the first offsets, nothing stored
        again = p.send_batch("Raw", [b"m-0", b"new"], message_ids=[rs[0].message_id, "01NEW"])
        assert [(r.code, r.offset, r.error) for r in again][0] == (Code.OK, rs[0].offset, "duplicate: already stored")
        assert again[1].ok and again[1].error == ""

        # per-message refusals in a batch; the rest is stored
        mixed = p.send_batch("Raw", [b"ok", b"x" * 1001, b"", b"ok2", b"p", b"t"],
                             properties=[None, None, None, None, {"UNIQ_KEY": "forged"}, {"__MSGTYPE": "DELAY"}])
        assert [r.code for r in mixed] == [Code.OK, Code.MESSAGE_BODY_TOO_LARGE, Code.MESSAGE_BODY_EMPTY, Code.OK,
                                           Code.BAD_REQUEST, Code.BAD_REQUEST]
        assert "exceeds message_body_bytes_max=1000" in mixed[1].error
        assert "'UNIQ_KEY' is reserved" in mixed[4].error and "NORMAL messages only" in mixed[5].error
        big = p.send_batch("Raw", [b"b"], properties=[{"p": "v" * 33_000}])
        assert big[0].code == Code.MESSAGE_PROPERTIES_TOO_LARGE

        # a topic that does not exist / cannot exist: every message says so
        assert {r.code for r in p.send_batch("Nope", [b"a", b"b"])} == {Code.TOPIC_NOT_FOUND}
        assert [r.code for r in p.send_batch("bad topic!", [b"a"])] == [Code.ILLEGAL_TOPIC]
        assert "system topic" in p.send_batch("rmq_sys_wheel_timer", [b"a"])[0].error

        # malformed frames: one BAD_REQUEST for the request, with what is wrong
        good = encode_request("Raw", [b"body"], [b"01ID"])
        for frame, why in ((b"", "shorter than"), (b"XXXX" + good[4:], "magic"), (good[:-1], "lengths add up"),
                           (good + b"!", "lengths add up"), (HEAD.pack(MAGIC, 0, 3) + b"Raw", "count 0"),
                           (HEAD.pack(MAGIC, 1000, 3) + b"Raw", "cannot hold")):
            head, entries = raw_send(b.endpoint, frame)
            assert head["code"] == Code.BAD_REQUEST and entries == [], frame
            assert head["message"].startswith("malformed SendRecords frame: ") and why in head["message"]
        head, entries = raw_send(b.endpoint, encode_request("Raw", [b"a", b"b"], [b"", b"\x01x"]))
        assert [e[0] for e in entries] == [Code.BAD_REQUEST] * 2 and head["code"] == Code.MULTIPLE_RESULTS
        with pytest.raises(ClientError) as e:          # the client raises for an answer without entries
            Producer._record_results(raw_send_bytes(b.endpoint, b"junk"), [b"01A"])
        assert e.value.code == Code.BAD_REQUEST

        # the protocol path is still there: the same messages through SendMessage
        with Producer(b.endpoint, raw=False) as sm:
            assert all(r.ok for r in sm.send_batch("Raw", [b"via-SendMessage"], tags="A"))
    assert b.stop() == 0
    assert len(stored(root, "Raw")) == 6 + 1 + 2 + 1


def raw_send_bytes(endpoint, frame: bytes) -> bytes:
    with grpc.insecure_channel(endpoint) as ch:
        return ch.unary_unary("/tidemq.Data/SendRecords")(frame, timeout=30)


def test_alarm_and_flush_backlog_refuse_raw_sends(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "Held", 2)
    b = broker_factory(root, env={**NO_FLUSH, "TIDEMQ_SEND_HOLD_MS_MAX": "300",
                                  "TIDEMQ_ALARM_CHECK_INTERVAL_MS_MAX": "200"})
    with Producer(b.endpoint) as p:
        admin_call(b.endpoint, "SetAlarmLimits", {"memory_high_watermark_bytes": 1 << 20})
        rs = p.send_batch("Held", [b"a", b"b"])
        assert [r.code for r in rs] == [Code.TOO_MANY_REQUESTS] * 2
        assert "memory" in rs[0].error and "then refused" in rs[0].error
        admin_call(b.endpoint, "SetAlarmLimits", {"memory_high_watermark_bytes": 0, "memory_high_watermark_ratio": 0.9})
        wait_until(lambda: p.send_batch("Held", [b"c"])[0].ok, "the alarm to clear")
        assert all(r.ok for r in p.send_batch("Held", [b"x" * (8 * KIB)] * 10))   # 80 KiB > 64 KiB backlog bound
        rs = p.send_batch("Held", [b"d"])
        assert rs[0].code == Code.TOO_MANY_REQUESTS and "flush backlog" in rs[0].error


def test_a_stream_answers_every_frame_in_order_and_a_client_gone_mid_stream_loses_nothing(tmp_path, broker_factory):
    """SendRecordsStream: each frame answered as SendRecords answers it (a malformed one with
    BAD_REQUEST, the stream goes on; a resend as duplicates), in order; a client that cancels its
    stream without reading the answers: the broker goes on, and the resend of those messages is
    answered from the dedup window or stores them, never twice."""
    root = str(tmp_path / "store")
    make_topic(root, "S", 2)
    b = broker_factory(root, env=SMALL)
    ids = [[b"01S%dM%d" % (k, i) for i in range(3)] for k in range(4)]
    sent = [encode_request("S", [b"x%d" % k] * 3, ids[k]) for k in range(4)]
    with grpc.insecure_channel(b.endpoint) as ch:
        call = ch.stream_stream("/tidemq.Data/SendRecordsStream")
        answers = [decode_response(r) for r in call(iter([sent[0], b"junk", sent[1], sent[0]]), timeout=60)]
    assert [h["code"] for h, _e in answers] == [Code.OK, Code.BAD_REQUEST, Code.OK, Code.OK]
    assert answers[1][0]["message"].startswith("malformed SendRecords frame") and answers[1][1] == []
    assert answers[3][0]["duplicates"] == [0, 1, 2] and [e[2] for e in answers[3][1]] == [e[2] for e in answers[0][1]]
    gone = threading.Event()
    with grpc.insecure_channel(b.endpoint) as ch:
        def frames():
            yield sent[2]
            yield sent[3]
            gone.wait(30)                          # the client goes away before reading anything
        call = ch.stream_stream("/tidemq.Data/SendRecordsStream")(frames(), timeout=60)
        with PullConsumer(b.endpoint) as c:          # both frames stored, their answers never read
            wait_until(lambda: sum(c.query_offset("S", q, "END") for q in range(2)) == 12, "12 messages stored")
        call.cancel()
        gone.set()
    with Producer(b.endpoint) as p:
        again = p.send_batch("S", [b"x2"] * 3 + [b"x3"] * 3, message_ids=[i.decode() for i in ids[2] + ids[3]])
        assert again.all_ok()
        assert p.send_batches("S", [[b"y"] * 3] * 5).all_ok()      # the stream still served
    assert b.stop() == 0
    bodies = [m.body for m in stored(root, "S")]
    assert bodies.count(b"x2") == 3 and bodies.count(b"x3") == 3 and len(bodies) == 6 + 6 + 15
