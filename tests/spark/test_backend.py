"""The broker backend decodes raw pulls: records a broker vouched for (its frame CRC held) get
their layout checked, records of a broker that sends no frame CRC get their CRCs checked too:
a damaged record is never a row either way; and which failures it retries on another member (no Spark needed)."""

from array import array

import numpy as np
import pytest

from tidemq.client.client import RecordsResult
from tidemq.protocol.stubs import Code
from tidemq.spark.backend import BrokerBackend, BrokerError, Refused, backend_for, connection

from ..support.brokers import free_ports
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


def _refusals(endpoints: list[str], **options) -> list[str]:
    """The Refused that a queue count and a read through the Python reader's backend raise with these
    options, each from the first member's first answer: the options named (``option``), and no
    other member tried (failovers 0) though both endpoints are named and timeoutSeconds (120)
    would allow many more tries."""
    got = []
    for call in (lambda b: b.queue_count("T"), lambda b: list(b.read("T", 0, 0, 10))):
        b = backend_for({"endpoints": ",".join(endpoints), "topic": "T", "timeoutSeconds": "120", **options})
        try:
            with pytest.raises(Refused) as e:
                call(b)
            assert b.failovers == 0 and not e.value.unreachable
            got.append(e.value.option)
        finally:
            b.close()
    return got


def test_an_untrusted_certificate_or_tls_on_one_side_only_is_refused_at_once(broker, certificate, tmp_path):
    """A certificate this reader does not trust, a TLS port reached in plaintext and a plaintext port
    reached with TLS are refusals, not members that do not answer: the one-line error naming the
    option to change, at once (as the JVM reader's Refused), not after timeoutSeconds of retries.
    With the CA (rootCertificates) the same broker answers."""
    cert, key = certificate
    tls = broker(env={"TIDEMQ_TLS_CERT_FILE": cert, "TIDEMQ_TLS_KEY_FILE": key}).endpoint
    plain = broker(root=str(tmp_path / "plain")).endpoint
    assert _refusals([tls, tls], tls="true") == ["rootCertificates"] * 2           # system roots: not its CA
    assert _refusals([tls, tls]) == ["tls"] * 2                                    # plaintext to a TLS port
    assert _refusals([plain, plain], rootCertificates=cert) == ["tls"] * 2        # TLS to a plaintext port
    b = backend_for({"endpoints": tls, "rootCertificates": cert, "timeoutSeconds": "120"})
    try:
        assert b.queue_range("T", 0) == (0, 0) and b.failovers == 0
    finally:
        b.close()


def test_members_that_do_not_answer_are_tried_in_turn_until_timeout_seconds():
    """The other path: nothing listens at either endpoint (a member killed, an election): the next is
    tried, and again, until timeoutSeconds (short here) has passed, then one line naming the
    options endpoints and timeoutSeconds (``unreachable``), not a refusal."""
    ends = [f"127.0.0.1:{p}" for p in free_ports(2)]
    b = backend_for({"endpoints": ",".join(ends), "timeoutSeconds": "0.5"})
    try:
        with pytest.raises(BrokerError) as e:
            b.queue_count("T")
        assert not isinstance(e.value, Refused) and e.value.unreachable and b.failovers >= 1
    finally:
        b.close()


def test_the_file_backend_never_makes_a_row_of_a_record_its_unit_does_not_stand_for(tmp_path):
    """Consume-queue units carry no CRC: one damaged to point at an intact record of another topic,
    queue or queue offset is skipped (counted with the damaged), never a row of the queue read."""
    from tidemq.spark.backend import FileBackend

    from ..support.spark import stranger_units
    from ..support.store import small_config
    root = str(tmp_path / "store")
    stranger_units(small_config(root))
    fb = FileBackend(root)
    try:
        got = list(fb.read("A", 0, 0, 4))
    finally:
        fb.close()
    rows = [row for batch, _ in got for row in batch.to_pylist()]
    assert [(r["topic"], r["queue_offset"], r["body"]) for r in rows] == [("A", 3, b"a3")]
    assert sum(bad for _, bad in got) == 3
