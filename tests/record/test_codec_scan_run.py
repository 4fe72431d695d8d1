"""codec.scan_run, the tight loop recovery and the archive walk segments with: its edge cases,
and a property test holding it to check_record (the reference classification) on random
records, damaged in every way a disk or a torn write damages them."""

from __future__ import annotations

import mmap
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq.record import codec
from tidemq.record.codec import (REC_BLANK, REC_END, REC_OK, REC_TORN, check_record, encode_blank, encode_host,
                                encode_properties, encode_record, scan_run)

HOST = encode_host("10.0.0.7:10911")


def record(body=b"hello", topic=b"T", props=None, phys=0) -> bytes:
    return encode_record(body=body, topic=topic, properties=encode_properties(props or {}), queue_id=0,
                         queue_offset=0, physical_offset=phys, born_timestamp_ms=1, born_host=HOST,
                         store_timestamp_ms=2, store_host=HOST)


def reference_walk(buf, pos: int, limit: int) -> tuple[int, list[int], int]:
    """What scan_run must do, written with check_record: (stop position, record positions, body bytes)."""
    positions, body_bytes = [], 0
    while True:
        kind, size = check_record(buf, pos, limit, True)
        if kind != REC_OK:
            return pos, positions, body_bytes
        positions.append(pos)
        body_bytes += struct.unpack_from(">i", buf, pos + codec.OFF_BODYLEN)[0]
        pos += size


def scan(buf, pos: int, limit: int) -> tuple[int, list[int], int]:
    positions: list[int] = []
    end, n, body_bytes = scan_run(buf, pos, limit, positions)
    assert n == len(positions)
    return end, positions, body_bytes


# The layout's constants --------------------------------------------------------------------

def test_the_named_constants_are_the_record_layout():
    assert codec.FIXED_OVERHEAD == 91 == codec.OFF_BODY + 1 + 2
    assert codec.OFF_BODY == codec.HEADER.size == 88
    assert codec.OFF_BODYLEN == 84
    assert codec.RECORD_MIN == codec.FIXED_OVERHEAD + codec.RECORD_CRC_TAIL_LEN == 111
    assert len(record(b"", b"T")) == codec.RECORD_MIN + 1          # empty body and properties, 1-byte topic
    assert codec.TAIL_MIN == 1 + 2 + codec.RECORD_CRC_TAIL_LEN == 23
    raw = record(b"body", b"Topic", {"k": "v"})
    digits = raw[-codec.CRC_DIGITS_BACK:-1]
    assert len(digits) == codec.RECORD_CRC_DIGITS and digits.isdigit() and raw[-1:] == b"\x02"
    assert raw[-codec.RECORD_CRC_TAIL_LEN:-codec.CRC_DIGITS_BACK] == codec.RECORD_CRC_MARK


# Edge cases ---------------------------------------------------------------------------------

def test_a_run_of_valid_records_is_walked_to_its_end():
    recs = [record(b"x" * n, b"Topic%d" % n, {"a": "b" * n}) for n in (0, 1, 100, 1000)]
    buf = b"".join(recs)
    positions: list[int] = []
    assert scan_run(buf, 0, len(buf), positions) == (len(buf), 4, 1101)
    assert positions == [0, len(recs[0]), len(recs[0]) + len(recs[1]), len(buf) - len(recs[3])]
    assert scan_run(buf, 0, len(buf)) == (len(buf), 4, 1101)          # positions are optional


def test_an_empty_range_and_a_range_too_short_for_a_record():
    buf = record()
    assert scan_run(buf, len(buf), len(buf)) == (len(buf), 0, 0)
    assert scan_run(buf, 0, codec.FIXED_OVERHEAD - 1) == (0, 0, 0)
    assert scan_run(b"", 0, 0) == (0, 0, 0)


def test_it_stops_at_a_blank_record_at_zero_fill_and_at_a_cut_record():
    a, b = record(b"a"), record(b"b")
    for tail, kind in ((encode_blank(64) + bytes(56), REC_BLANK), (bytes(200), REC_END)):
        buf = a + b + tail
        assert scan_run(buf, 0, len(buf)) == (len(a) + len(b), 2, 2)
        assert check_record(buf, len(a) + len(b), len(buf))[0] == kind
    buf = a + b
    assert scan_run(buf, 0, len(buf) - 1) == (len(a), 1, 1)             # the limit cuts b
    assert check_record(buf, len(a), len(buf) - 1)[0] == REC_TORN


def test_it_stops_at_a_record_whose_body_or_record_crc_is_wrong():
    a = record(b"a" * 50, b"Topic", {"k": "v"})
    for where in (codec.OFF_BODY + 3, len(a) - codec.CRC_DIGITS_BACK + 2, codec.OFF_QUEUEID, len(a) - 25):
        bad = bytearray(a)
        bad[where] ^= 0x01
        buf = a + bytes(bad) + a
        assert scan_run(buf, 0, len(buf))[:2] == (len(a), 1), where


def test_it_stops_at_a_record_without_the_record_crc():
    # a RocketMQ record as another writer writes it: no __CRC32# property (check_record: corrupt)
    body, topic = b"rocketmq", b"T"
    props = b""
    s = codec.record_struct(len(body), len(topic), len(props))
    raw = s.pack(s.size, codec.MAGIC, codec.body_crc(body), 0, 0, 0, 0, 0, 1, HOST, 2, HOST, 0, 0,
                 len(body), body, len(topic), topic, len(props), props)
    buf = record() + raw
    assert scan_run(buf, 0, len(buf))[:2] == (len(record()), 1)
    assert check_record(buf, len(record()), len(buf))[0] != REC_OK


def test_it_reads_bytes_bytearray_memoryview_and_mmap_alike():
    buf = b"".join(record(b"m%d" % i, b"T", phys=i) for i in range(5)) + bytes(300)
    m = mmap.mmap(-1, len(buf))
    try:
        m[:] = buf
        results = {scan_run(b, 0, len(buf)) for b in (buf, bytearray(buf), memoryview(buf), m)}
    finally:
        m.close()
    assert results == {(len(buf) - 300, 5, 10)}


def test_it_starts_anywhere_and_stops_at_once_inside_a_record():
    a, b = record(b"a" * 10), record(b"b" * 10)
    buf = a + b
    assert scan_run(buf, len(a), len(buf)) == (len(buf), 1, 10)
    for pos in (1, 4, 8, 50, len(a) - 1):
        assert scan_run(buf, pos, len(buf)) == (pos, 0, 0)


# Property: scan_run and check_record agree ---------------------------------------------------

topics = st.from_regex(r"\A[%|a-zA-Z0-9_-]{1,24}\Z").map(lambda t: t.encode("ascii"))
prop_text = st.text(alphabet=st.characters(exclude_characters="\x01\x02", exclude_categories=("Cs",)),
                    max_size=12)
records = st.lists(st.tuples(st.binary(max_size=300), topics,
                             st.dictionaries(prop_text.filter(bool), prop_text, max_size=3)), max_size=6)


def build(recs) -> bytes:
    out = bytearray()
    for body, topic, props in recs:
        out += record(body, topic, props, phys=len(out))
    return bytes(out)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=records, after=st.sampled_from(["nothing", "blank", "zeros", "noise"]), data=st.data())
def test_scan_run_agrees_with_check_record_on_random_and_damaged_input(recs, after, data):
    buf = bytearray(build(recs))
    if after == "blank":
        buf += encode_blank(64) + bytes(56)
    elif after == "zeros":
        buf += bytes(data.draw(st.integers(1, 400)))
    elif after == "noise":
        buf += data.draw(st.binary(min_size=1, max_size=400))
    n = len(buf)
    damage = data.draw(st.lists(st.sampled_from(["flip", "zero_range", "blank_marker", "noise_range"]),
                                max_size=3)) if n else []
    for kind in damage:
        at = data.draw(st.integers(0, n - 1))
        if kind == "flip":
            buf[at] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "zero_range":                       # a torn write: zeroes where bytes were
            ln = data.draw(st.integers(1, 200))
            buf[at:at + ln] = bytes(len(buf[at:at + ln]))
        elif kind == "blank_marker" and at + 8 <= n:     # a BLANK header written over a record
            buf[at:at + 8] = encode_blank(n - at)
        elif kind == "noise_range":
            ln = data.draw(st.integers(1, 64))
            buf[at:at + ln] = data.draw(st.binary(min_size=len(buf[at:at + ln]), max_size=len(buf[at:at + ln])))
    limit = data.draw(st.integers(0, n)) if data.draw(st.booleans()) else n       # truncated or not
    start = 0 if data.draw(st.booleans()) or n == 0 else data.draw(st.integers(0, n))
    raw = bytes(buf)
    end, positions, body_bytes = scan(raw, start, limit)
    assert (end, positions, body_bytes) == reference_walk(raw, start, limit)
    # where it stops there is no valid record, and everything it passed is one
    assert check_record(raw, end, limit, True)[0] != REC_OK
    assert all(check_record(raw, p, limit, True)[0] == REC_OK for p in positions)


@settings(max_examples=100, deadline=None)
@given(recs=records.filter(bool))
def test_undamaged_records_are_all_taken(recs):
    raw = build(recs) + bytes(100)
    end, positions, body_bytes = scan(raw, 0, len(raw))
    assert len(positions) == len(recs) and end == len(raw) - 100
    assert body_bytes == sum(len(b) for b, _t, _p in recs)
    assert check_record(raw, end, len(raw))[0] == REC_END
