"""Flow control end to end: a flush backlog above its high-water mark holds and then refuses the
official producer's sends (TOO_MANY_REQUESTS naming it), and one connection's in-flight requests
and bytes are bounded (refused at once beyond the bound, while the sends in flight are held)."""

import re

import grpc
import pytest

from tidemq.client import Producer as FastProducer
from tidemq.protocol.stubs import Code, sgrpc

from ...support.brokers import NO_FLUSH, SMALL, admin_call, make_topic
from ...support.official import receive_all, msg
from ...support.wait import PATIENCE_S, wait_until

KIB = 1 << 10


def held_s(text: str) -> float:
    """The hold a refusal reports ("... (send held 0.61 s, then refused)")."""
    return float(re.search(r"send held ([0-9.]+) s, then refused", text).group(1))


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
    assert held_s(str(e.value)) >= 0.6, "held send_hold_ms_max, then refused"
    c = consumer(b.endpoint, "g", "Backlog")        # consumers are not throttled
    assert len(receive_all(c, sent)) == sent


def test_in_flight_requests_and_bytes_per_connection(tmp_path, broker_factory):
    """While the memory alarm holds every send (for up to a minute), one connection has at most 2
    requests and 24 KiB in flight: a send beyond that is refused at once (its answer comes while
    the others are still held); another connection has its own bound; the held ones are sent
    when the alarm clears."""
    root = str(tmp_path / "store")
    make_topic(root, "Busy", 2)
    b = broker_factory(root, env={**SMALL, "TIDEMQ_SEND_HOLD_MS_MAX": "60000",
                                  "TIDEMQ_INFLIGHT_REQUESTS_PER_CONNECTION_MAX": "2",
                                  "TIDEMQ_INFLIGHT_BYTES_PER_CONNECTION_MAX": str(24 * KIB)})

    def flow():
        return admin_call(b.endpoint, "Alarms")["alarms"]["flow"]

    def in_flight(n):
        wait_until(lambda: flow()["inflight_requests"] == n, f"{n} send(s) in flight")

    with FastProducer(b.endpoint) as fp:
        assert fp.send_batch("Busy", [b"before"])[0].ok
        admin_call(b.endpoint, "SetAlarmLimits", {"memory_high_watermark_bytes": 1 << 20})   # sends are held
        stub = fp._ch.stub

        def send(stub, size):
            return stub.SendMessage.future(fp._request("Busy", [b"z" * size], None, None, None, None),
                                           timeout=PATIENCE_S)

        held1 = send(stub, 16 * KIB)
        in_flight(1)
        too_big = send(stub, 16 * KIB).result()     # 16 + 16 KiB > 24 KiB on this connection
        assert too_big.status.code == Code.TOO_MANY_REQUESTS
        assert "too many bytes in flight on this connection: 16.0 KiB + 16.0 KiB > " \
               "inflight_bytes_per_connection_max 24.0 KiB" in too_big.status.message
        held2 = send(stub, 1 * KIB)
        in_flight(2)
        too_many = send(stub, 1 * KIB).result()     # a third request while two are in flight
        assert too_many.status.code == Code.TOO_MANY_REQUESTS
        assert "too many requests in flight on this connection: 2 >= inflight_requests_per_connection_max 2" \
               in too_many.status.message
        # another connection (its own subchannel, as the official clients make it) has its own bound:
        # held, not refused at once
        with grpc.insecure_channel(b.endpoint, options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
            other = send(sgrpc.MessagingServiceStub(ch), 1 * KIB)
            in_flight(3)
            admin_call(b.endpoint, "SetAlarmLimits", {"memory_high_watermark_bytes": 0,
                                                      "memory_high_watermark_ratio": 0.9})
            for f in (held1, held2, other):
                assert f.result().status.code == Code.OK, "held, then sent once the alarm cleared"
    st = flow()
    assert st["inflight_requests"] == 0 and st["inflight_bytes"] == 0
    assert st["held_total"] == 3 and st["refused_total"] == 2
