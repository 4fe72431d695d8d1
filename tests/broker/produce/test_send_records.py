"""produce/send_records.py in process: a SendRecords frame's message that names a property the broker
writes itself is refused BAD_REQUEST, that message only, on the compiled frame reader and on its
Python twin alike (the wire through real brokers: test_send_records_e2e.py)."""

import asyncio

import pytest

from tidemq.broker.produce import send_records
from tidemq.broker.produce.send_records import RESERVED, RecordSends
from tidemq.broker.wire import INTERNAL
from tidemq.protocol.send_frame import decode_response, encode_request
from tidemq.protocol.stubs import Code
from tidemq.record.codec import RECORD_CRC_NAME

from tests.support.grpc_context import SendContext as _Context



def _lanes():
    from tidemq.accel import ACCEL
    lanes = ["python"]
    if ACCEL is not None and hasattr(ACCEL, "frame_slices"):
        lanes.append("compiled")
    return lanes


def test_every_name_the_broker_writes_itself_is_reserved():
    """What SendMessage refuses in a user property (wire.INTERNAL: an id, a delivery time, a priority,
    a parked message's real topic and queue, a transaction's client, ...) and the record's CRC."""
    assert RESERVED == INTERNAL | {RECORD_CRC_NAME}


@pytest.mark.parametrize("lane", _lanes())
@pytest.mark.parametrize("name", sorted(RESERVED))
def test_a_property_the_broker_writes_is_refused_for_its_message_only(monkeypatch, name, lane):
    from tidemq.broker.service import MessagingService
    from tidemq.config import BrokerConfig
    from tidemq.store import MessageStore
    from tidemq.testing.faulty_io import FaultyFileIO

    from tests.support.store import memory_config

    if lane == "python":
        monkeypatch.setattr(send_records, "ACCEL", None)       # frame_slices: the Python twin
    store = MessageStore(memory_config(), FaultyFileIO()).start()
    store.create_topic("T", 1)
    svc = MessagingService(store, BrokerConfig(send_hold_ms_max=0))
    forged = name.encode() + b"\x01" + b"1\x02"
    raw = encode_request("T", [b"a", b"b", b"c"], [b"id-a", b"id-b", b"id-c"],
                         properties=[b"", forged, b"user\x01v\x02"])
    try:
        header, entries = decode_response(asyncio.run(RecordSends(svc.sends).send(raw, _Context())))
        assert [e[0] for e in entries] == [Code.OK, Code.BAD_REQUEST, Code.OK], header
        assert store.max_offset("T", 0) == 2, "the others stored"
        got = store.get("g", "T", 0, 0, max_count=8).messages
        assert [m.body for m in got] == [b"a", b"c"], "nothing of it stored"
        assert "1" not in [m.properties.get(name) for m in got]
    finally:
        svc.close()
        store.shutdown()
