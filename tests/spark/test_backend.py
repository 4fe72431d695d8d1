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
    queue or queue offset is never a row of the queue read. The record it stood for is intact in the
    log: found again there, as the broker's read path finds it (store/unit_repair.py), and read (it was
    skipped, a data loss the broker does not have)."""
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
    assert [(r["topic"], r["queue_id"], r["queue_offset"], r["body"]) for r in rows] == \
        [("A", 0, q, b"a%d" % q) for q in range(4)], "each found again in the log, no stranger"
    assert sum(bad for _, bad in got) == 0


def test_the_file_backend_counts_a_damaged_unit_as_lost_only_when_its_record_is_not_in_the_log(tmp_path):
    """A damaged unit whose record is damaged too (or a hole: a unit of size 0) is an offset not in the
    store, never a stranger's row; the intact ones around it are read."""
    import os

    from tidemq.io import OsFileIO
    from tidemq.layout import list_segments, queue_dir
    from tidemq.spark.backend import FileBackend
    from tidemq.store.consume_queue import UNIT

    from ..support.spark import stranger_units
    from ..support.store import small_config
    root = str(tmp_path / "store")
    stranger_units(small_config(root))
    fb = FileBackend(root)
    try:
        [(a0, _), (a1, _)] = [(int(r["commitlog_offset"]), None) for r in next(iter(fb.read("A", 0, 0, 4)))[0]
                              .to_pylist()[:2]]
    finally:
        fb.close()
    [(start, seg)] = list_segments(OsFileIO(), os.path.join(root, "commitlog"))
    with open(seg, "r+b") as f:                 # a1's body damaged: its record fails its CRC
        f.seek(a1 - start + 88)
        byte = f.read(1)
        f.seek(a1 - start + 88)
        f.write(bytes([byte[0] ^ 1]))
    [(_, cq)] = list_segments(OsFileIO(), queue_dir(os.path.join(root, "consumequeue"), "A", 0))
    fd = os.open(cq, os.O_WRONLY)
    try:
        os.pwrite(fd, UNIT.pack(0, 0, 0), 2 * UNIT.size)       # a2's unit a hole (its record is intact)
    finally:
        os.close(fd)
    fb = FileBackend(root)
    try:
        got = list(fb.read("A", 0, 0, 4))
    finally:
        fb.close()
    rows = [row for batch, _ in got for row in batch.to_pylist()]
    assert [(r["queue_offset"], r["body"]) for r in rows] == [(0, b"a0"), (2, b"a2"), (3, b"a3")]
    assert sum(bad for _, bad in got) == 1


def test_a_damaged_unit_pointing_past_the_last_segment_is_a_damaged_unit_not_a_missing_directory(tmp_path):
    """A unit damaged to point past the end of the last commit-log segment (the store's directories all
    given) is a damaged unit like any other: its record, intact in the log, is found again and read.
    It was refused as 'is the option commitlogDirs complete?', a question about a directory nobody left out."""
    import os

    from tidemq.io import OsFileIO
    from tidemq.layout import list_segments, queue_dir
    from tidemq.spark.backend import FileBackend
    from tidemq.store.consume_queue import UNIT

    from ..support.spark import stranger_units
    from ..support.store import small_config
    root = str(tmp_path / "store")
    stranger_units(small_config(root))
    [(_, cq)] = list_segments(OsFileIO(), queue_dir(os.path.join(root, "consumequeue"), "A", 0))
    fd = os.open(cq, os.O_WRONLY)
    try:
        os.pwrite(fd, UNIT.pack(1 << 40, 120, 0), 1 * UNIT.size)     # a1's unit: far past the log's end
    finally:
        os.close(fd)
    fb = FileBackend(root)
    try:
        got = list(fb.read("A", 0, 0, 4))
    finally:
        fb.close()
    rows = [row for batch, _ in got for row in batch.to_pylist()]
    assert [(r["queue_offset"], r["body"]) for r in rows] == [(q, b"a%d" % q) for q in range(4)]
    assert sum(bad for _, bad in got) == 0


@pytest.mark.parametrize("which", ["middle", "last"])
def test_units_pointing_into_segments_the_directories_read_do_not_hold_are_an_incomplete_store(tmp_path, which):
    """A segment of the log missing from the directories read (a commit-log directory left out of the
    option commitlogDirs): a gap in the listing (a middle segment), or the checkpoint durable past the
    segments found (the last one). A typed IncompleteStoreError saying which, never rows read as lost."""
    import os

    from tidemq.io import OsFileIO
    from tidemq.layout import list_segments
    from tidemq.spark.backend import FileBackend
    from tidemq.spark.files import IncompleteStoreError
    from tidemq.store import Message, MessageStore

    from ..support.store import small_config
    root = str(tmp_path / "store")
    s = MessageStore(small_config(root, segment_size_bytes=4096)).start()
    try:
        s.create_topic("A", 1)
        for i in range(120):
            assert s.put(Message("A", b"x" * 100, queue_id=0)).ok
    finally:
        s.shutdown()
    segs = list_segments(OsFileIO(), os.path.join(root, "commitlog"))
    assert len(segs) >= 3
    away = str(tmp_path / "elsewhere")
    os.makedirs(away)
    path = segs[1][1] if which == "middle" else segs[-1][1]
    os.rename(path, os.path.join(away, os.path.basename(path)))
    fb = FileBackend(root)
    try:
        with pytest.raises(IncompleteStoreError) as e:
            list(fb.read("A", 0, 0, 120))
        assert e.value.why == ("gap" if which == "middle" else "checkpoint")
    finally:
        fb.close()
    fb = FileBackend(root, (os.path.join(root, "commitlog"), away))       # every directory given: read
    try:
        got = list(fb.read("A", 0, 0, 120))
    finally:
        fb.close()
    assert sum(b.num_rows for b, _ in got) == 120 and sum(bad for _, bad in got) == 0
