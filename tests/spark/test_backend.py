"""The broker backend decodes raw pulls: records a broker vouched for (its frame CRC held) get
their layout checked, records of a broker that sends no frame CRC get their CRCs checked too:
a damaged record is never a row either way (no Spark needed)."""

from array import array

import numpy as np
import pytest

from tidemq.client.client import RecordsResult
from tidemq.protocol.stubs import Code
from tidemq.spark.backend import BrokerBackend, connection

from ..support.records import varied


def pulled(recs, checked: bool) -> RecordsResult:
    data = bytearray(b"".join(recs))
    data[len(recs[0]) + 90] ^= 0x01                  # the second record's body: fails its body CRC
    return RecordsResult(Code.OK, "", len(recs), 0, len(recs), array("i", [len(r) for r in recs]),
                         memoryview(bytes(data)), 0, checked)


def read_all(result: RecordsResult):
    b = BrokerBackend("127.0.0.1:1")                 # no call goes out: the pulls are given
    try:
        b.consumer.iter_records = lambda *a, **k: iter([result])
        return list(b.read("Orders", 0, 0, result.next_offset))
    finally:
        b.close()


def test_records_of_a_broker_without_frame_crc_are_checked_here():
    recs = varied(10)
    (batch, lost), = read_all(pulled(recs, checked=False))
    assert lost == 1 and batch.column("queue_offset").to_pylist() == [i for i in range(10) if i != 1]


def test_records_under_a_frame_crc_are_not_checked_again():
    """What the broker checked (store/reader.py get_raw: damaged records are never sent) is not
    checked twice: this record was damaged after the broker's check, which the frame CRC rules out."""
    recs = varied(10)
    (batch, lost), = read_all(pulled(recs, checked=True))
    assert lost == 0 and np.array_equal(batch.column("queue_offset").to_numpy(), np.arange(10))


def test_connection_options_become_the_clients_keywords():
    assert connection({}) == {"access_key": None, "secret_key": None, "tls": False, "root_certificates": None}
    assert connection({"accessKey": "ak", "secretKey": "sk", "tls": "TRUE", "rootCertificates": "/ca.pem"}) == \
        {"access_key": "ak", "secret_key": "sk", "tls": True, "root_certificates": "/ca.pem"}
    for bad in ({"accessKey": "ak"}, {"secretKey": "sk"}, {"tls": "yes"}):
        with pytest.raises(ValueError):
            connection(bad)
