"""Flow control end to end: a flush backlog above its high-water mark holds and then refuses the
official producer's sends (TOO_MANY_REQUESTS naming it), and one connection's in-flight requests
and bytes are bounded (refused at once beyond the bound) while receives go on."""

import time

import grpc
import pytest

from tidemq.protocol import admin
from tidemq.client import Producer as FastProducer
from tidemq.protocol.stubs import Code, sgrpc

from ..consume.test_receive_e2e import clients, receive_all  # noqa: F401  (fixture)
from ..produce.test_send_message_e2e import make_topic, msg

KIB = 1 << 10
# nothing is flushed for a minute: every byte sent stays in the backlog
NO_FLUSH = {"TIDEMQ_SEGMENT_SIZE_BYTES": str(4 << 20), "TIDEMQ_INDEX_SLOTS": "1000", "TIDEMQ_INDEX_ENTRIES": "4000",
            "TIDEMQ_FLUSH_INTERVAL_MS": "60000", "TIDEMQ_FLUSH_THOROUGH_INTERVAL_MS": "600000",
            "TIDEMQ_FLUSH_BACKLOG_HIGH_BYTES": str(64 * KIB), "TIDEMQ_SEND_HOLD_MS_MAX": "600"}


def test_flush_backlog_throttles_the_official_producer(tmp_path, broker_factory, clients):
    from rocketmq.v5.exception import TooManyRequestsException
    producer, consumer = clients
    root = str(tmp_path / "store")
    make_topic(root, "Backlog", 2)
    b = broker_factory(root, env=NO_FLUSH)
    p = producer(b.endpoint, ["Backlog"])
    sent = 0
    with pytest.raises(TooManyRequestsException) as e:
        for _ in range(40):                          # 64 KiB of backlog: refused after ~8 sends of 8 KiB
            p.send(msg("Backlog", b"x" * (8 * KIB)))
            sent += 1
    assert 7 <= sent <= 9
    assert "flush backlog: " in str(e.value) and "> flush_backlog_high_bytes 64.0 KiB" in str(e.value)
    assert "send held 0.6" in str(e.value)
    c = consumer(b.endpoint, "g", "Backlog")        # consumers are not throttled
    assert len(receive_all(c, sent)) == sent


def test_in_flight_requests_and_bytes_per_connection(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "Busy", 2)
    b = broker_factory(root, env={**NO_FLUSH, "TIDEMQ_SEND_HOLD_MS_MAX": "1500",
                                  "TIDEMQ_FLUSH_BACKLOG_HIGH_BYTES": str(4 * KIB),
                                  "TIDEMQ_INFLIGHT_REQUESTS_PER_CONNECTION_MAX": "2",
                                  "TIDEMQ_INFLIGHT_BYTES_PER_CONNECTION_MAX": str(24 * KIB)})
    with FastProducer(b.endpoint) as fp:
        fp.send_batch("Busy", [b"y" * (8 * KIB)])   # the backlog is now above 4 KiB: later sends are held
        stub = fp._ch.stub

        def send(size):
            f = stub.SendMessage.future(fp._request("Busy", [b"z" * size], None, None, None, None), timeout=10)
            time.sleep(0.1)                         # arrives before the next one
            return f
        held1 = send(16 * KIB)
        too_big = send(16 * KIB)                    # 16 + 16 KiB > 24 KiB on this connection
        held2 = send(1 * KIB)
        too_many = send(1 * KIB)                    # a third request while two are in flight
        t0 = time.monotonic()
        for f in (too_big, too_many):
            assert f.done(), "refused at once, not held"
        assert too_big.result().status.code == Code.TOO_MANY_REQUESTS
        assert "too many bytes in flight on this connection: 16.0 KiB + 16.0 KiB > " \
               "inflight_bytes_per_connection_max 24.0 KiB" in too_big.result().status.message
        assert too_many.result().status.code == Code.TOO_MANY_REQUESTS
        assert "too many requests in flight on this connection: 2 >= inflight_requests_per_connection_max 2" \
               in too_many.result().status.message
        # another connection (its own subchannel, as the official clients make it) has its own bound:
        # held, not refused at once
        with grpc.insecure_channel(b.endpoint, options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
            r = sgrpc.MessagingServiceStub(ch).SendMessage(fp._request("Busy", [b"w"], None, None, None, None),
                                                           timeout=10)
            assert r.status.code == Code.TOO_MANY_REQUESTS and "flush backlog" in r.status.message
        for f in (held1, held2):
            st = f.result().status
            assert st.code == Code.TOO_MANY_REQUESTS and "flush backlog" in st.message and "send held 1.5" in st.message
        assert time.monotonic() - t0 > 0.5
    flow = admin.call(b.endpoint, "Alarms")["alarms"]["flow"]
    assert flow["inflight_requests"] == 0 and flow["inflight_bytes"] == 0 and flow["refused_total"] == 5
