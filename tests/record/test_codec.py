"""Commit-log record codec: round trip, exact byte layout, record classification,
message ids, tag hash codes."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tidemq.record import codec
from tidemq.record.codec import (BLANK_MAGIC, FIXED_OVERHEAD, REC_BLANK, REC_CORRUPT, REC_END, REC_OK, REC_TORN,
                                CodecError, check_record, decode_record, encode_blank, encode_host,
                                encode_properties, encode_record, offset_msg_id, parse_offset_msg_id,
                                tags_hash)

# tidemq appends a record CRC to the properties of every record it writes (see codec.py)
TAIL = getattr(codec, "RECORD_CRC_TAIL", b"")
STORE_HOST = encode_host("10.0.0.7:10911")
BORN_HOST = encode_host("192.168.1.20:54321")

topics = st.from_regex(r"\A[%|a-zA-Z0-9_-]{1,127}\Z")
prop_text = st.text(alphabet=st.characters(exclude_characters="\x01\x02", exclude_categories=("Cs",)),
                    max_size=30)
prop_names = prop_text.filter(bool)
properties = st.dictionaries(prop_names, prop_text, max_size=8)


def make(body=b"hello", topic=b"TopicA", props=None, **kw):
    fields = dict(body=body, topic=topic, properties=encode_properties(props or {}), queue_id=3,
                  queue_offset=42, physical_offset=1 << 33, born_timestamp_ms=1_700_000_000_123,
                  born_host=BORN_HOST, store_timestamp_ms=1_700_000_000_456, store_host=STORE_HOST,
                  flag=7, sys_flag=2, reconsume_times=5, prepared_transaction_offset=99)
    fields.update(kw)
    return encode_record(**fields)


# Round trip --------------------------------------------------------------------------

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topic=topics, body=st.binary(max_size=2048), props=properties,
       queue_id=st.integers(0, 2 ** 31 - 1), queue_offset=st.integers(0, 2 ** 63 - 1),
       phys=st.integers(0, 2 ** 63 - 1), born=st.integers(0, 2 ** 63 - 1), stored=st.integers(0, 2 ** 63 - 1),
       flag=st.integers(-2 ** 31, 2 ** 31 - 1), sys_flag=st.integers(0, 2 ** 31 - 1),
       reconsume=st.integers(0, 2 ** 31 - 1), prep=st.integers(0, 2 ** 63 - 1))
def test_round_trip(topic, body, props, queue_id, queue_offset, phys, born, stored, flag, sys_flag, reconsume, prep):
    raw = encode_record(body=body, topic=topic.encode("ascii"), properties=encode_properties(props),
                        queue_id=queue_id, queue_offset=queue_offset, physical_offset=phys,
                        born_timestamp_ms=born, born_host=BORN_HOST, store_timestamp_ms=stored,
                        store_host=STORE_HOST, flag=flag, sys_flag=sys_flag, reconsume_times=reconsume,
                        prepared_transaction_offset=prep)
    pb = encode_properties(props)
    assert len(raw) == FIXED_OVERHEAD + len(body) + len(topic) + len(pb) + len(TAIL)
    assert codec.record_size(len(body), len(topic), len(pb) + len(TAIL)) == len(raw)
    # the record is valid where it lies, also inside a larger buffer with other bytes around it
    buf = b"\x55" * 13 + raw
    assert check_record(buf, 13, len(buf)) == (REC_OK, len(raw))
    for m in (decode_record(raw, 0), decode_record(memoryview(buf), 13)):
        assert m.body == body
        assert m.topic == topic
        assert m.properties == props
        assert m.queue_id == queue_id
        assert m.queue_offset == queue_offset
        assert m.commitlog_offset == phys
        assert m.born_timestamp_ms == born
        assert m.store_timestamp_ms == stored
        assert m.flag == flag
        assert m.sys_flag == sys_flag
        assert m.reconsume_times == reconsume
        assert m.prepared_transaction_offset == prep
        assert m.store_size == len(raw)
        assert m.body_crc == zlib.crc32(body) & 0x7FFFFFFF
        assert m.born_host == "192.168.1.20:54321"
        assert m.store_host == "10.0.0.7:10911"


@settings(max_examples=200, deadline=None)
@given(props=properties)
def test_properties_round_trip(props):
    assert codec.decode_properties(encode_properties(props)) == props


def test_tags_keys_and_uniq_key_from_properties():
    raw = make(props={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U-1"})
    m = decode_record(raw, 0)
    assert m.tags == "TagA"
    assert m.keys == ["k1", "k2"]
    assert m.msg_id == "U-1"
    m2 = decode_record(make(), 0)
    assert m2.tags is None and m2.keys == []
    assert m2.msg_id == m2.offset_msg_id == offset_msg_id(STORE_HOST, 1 << 33)


# Exact layout ------------------------------------------------------------------------

def test_exact_byte_layout():
    body = b"the body \x00\xff"
    topic = b"T%|_-9"
    props = encode_properties({"TAGS": "A", "x": "y"})
    raw = make(body=body, topic=topic, props={"TAGS": "A", "x": "y"})
    n = len(raw)
    assert n == 91 + len(body) + len(topic) + len(props) + len(TAIL)
    i32 = lambda off: struct.unpack_from(">i", raw, off)[0]   # noqa: E731
    i64 = lambda off: struct.unpack_from(">q", raw, off)[0]   # noqa: E731
    assert i32(0) == n                                        # TOTALSIZE
    assert raw[4:8] == bytes.fromhex("DAA320A7")              # MAGIC
    assert struct.unpack_from(">I", raw, 4)[0] == 0xDAA320A7
    assert i32(8) == zlib.crc32(body) & 0x7FFFFFFF            # BODYCRC
    assert i32(12) == 3                                       # QUEUEID
    assert i32(16) == 7                                       # FLAG
    assert i64(20) == 42                                      # QUEUEOFFSET
    assert i64(28) == 1 << 33                                 # PHYSICALOFFSET
    assert i32(36) == 2                                       # SYSFLAG
    assert i64(40) == 1_700_000_000_123                       # BORNTIMESTAMP
    assert raw[48:52] == bytes([192, 168, 1, 20])             # BORNHOST ip
    assert i32(52) == 54321                                   #          port
    assert i64(56) == 1_700_000_000_456                       # STORETIMESTAMP
    assert raw[64:68] == bytes([10, 0, 0, 7])                 # STOREHOST ip
    assert i32(68) == 10911                                   #           port
    assert i32(72) == 5                                       # RECONSUMETIMES
    assert i64(76) == 99                                      # PREPAREDTRANSACTIONOFFSET
    assert i32(84) == len(body)                               # BODYLEN
    assert raw[88:88 + len(body)] == body                     # BODY
    t0 = 88 + len(body)
    assert raw[t0] == len(topic)                              # TOPICLEN
    assert raw[t0 + 1:t0 + 1 + len(topic)] == topic           # TOPIC
    p0 = t0 + 1 + len(topic)
    assert struct.unpack_from(">h", raw, p0)[0] == len(props) + len(TAIL)  # PROPERTIESLEN
    assert props == b"TAGS\x01A\x02x\x01y\x02"
    assert raw[p0 + 2:p0 + 2 + len(props)] == props                       # PROPERTIES
    assert p0 + 2 + len(props) + len(TAIL) == n
    if TAIL:   # the record CRC property: __CRC32#\x01 + 10 decimal digits + \x02, hidden from readers
        tail = raw[p0 + 2 + len(props):]
        assert tail[:9] == b"__CRC32#\x01" and tail[9:19].isdigit() and tail[19:] == b"\x02"
        assert "__CRC32#" not in decode_record(raw, 0).properties
    # the codec's named offsets agree with the layout
    assert (codec.OFF_TOTALSIZE, codec.OFF_MAGIC, codec.OFF_BODYCRC, codec.OFF_QUEUEID, codec.OFF_QUEUEOFFSET,
            codec.OFF_PHYSICALOFFSET, codec.OFF_STORETIMESTAMP, codec.OFF_BODYLEN) == (0, 4, 8, 12, 20, 28, 56, 84)
    assert FIXED_OVERHEAD == 91


def test_empty_body_topic_props_record_is_91_plus_topic():
    raw = make(body=b"", topic=b"T", props={})
    assert len(raw) == 92 + len(TAIL)
    assert check_record(raw, 0, len(raw)) == (REC_OK, 92 + len(TAIL))
    m = decode_record(raw, 0)
    assert m.body == b"" and m.topic == "T" and m.properties == {}


def test_crc_is_rocketmq_masked_crc32():
    # a body whose plain crc32 has the top bit set: the stored value drops it
    body = next(b for b in (bytes([i]) * 3 for i in range(256)) if zlib.crc32(b) & 0x80000000)
    raw = make(body=body)
    assert struct.unpack_from(">i", raw, 8)[0] == zlib.crc32(body) - 0x80000000
    assert codec.body_crc(body) == zlib.crc32(body) & 0x7FFFFFFF


def test_blank_record_bytes():
    assert encode_blank(1234) == struct.pack(">i", 1234) + bytes.fromhex("CBD43194")
    assert BLANK_MAGIC == struct.unpack(">i", bytes.fromhex("CBD43194"))[0]


def test_decode_meta_matches_decode_record():
    raw = make(props={"TAGS": "A"})
    qid, qoff, ts, topic, props_raw = codec.decode_meta(raw, 0)
    assert (qid, qoff, ts, topic) == (3, 42, 1_700_000_000_456, "TopicA")
    assert props_raw == b"TAGS\x01A\x02" + props_raw[len(b"TAGS\x01A\x02"):]
    assert len(props_raw) == len(b"TAGS\x01A\x02") + len(TAIL)
    assert codec.decode_properties(props_raw) == {"TAGS": "A"}


# check_record ------------------------------------------------------------------------

def test_check_ok_and_sequence():
    a, b = make(body=b"a" * 10), make(body=b"b" * 20)
    buf = a + b + bytes(50)
    assert check_record(buf, 0, len(buf)) == (REC_OK, len(a))
    assert check_record(buf, len(a), len(buf)) == (REC_OK, len(b))
    assert check_record(buf, len(a) + len(b), len(buf)) == (REC_END, 0)


def test_check_blank():
    seg = bytearray(4096)
    raw = make()
    seg[:len(raw)] = raw
    seg[len(raw):len(raw) + 8] = encode_blank(4096 - len(raw))
    assert check_record(seg, len(raw), 4096) == (REC_BLANK, 4096 - len(raw))
    # a BLANK must reach the segment's end exactly
    seg[len(raw):len(raw) + 8] = encode_blank(4096 - len(raw) - 1)
    assert check_record(seg, len(raw), 4096)[0] == REC_CORRUPT
    # and be at least 8 bytes
    assert check_record(encode_blank(4), 0, 4)[0] != REC_BLANK


def test_check_end_on_zeroes_and_at_limit():
    assert check_record(bytes(100), 0, 100) == (REC_END, 0)
    assert check_record(bytes(100), 100, 100) == (REC_END, 0)


def test_check_torn():
    raw = make(body=b"x" * 100)
    # cut in the header (fewer than 8 bytes left)
    assert check_record(raw[:5], 0, 5)[0] == REC_TORN
    # cut in the body: the size says more than is there
    cut = raw[:len(raw) - 10]
    assert check_record(cut, 0, len(cut))[0] == REC_TORN
    # the limit says the readable data ends before the record does
    assert check_record(raw, 0, len(raw) - 1)[0] == REC_TORN


def test_check_bad_magic_is_corrupt():
    raw = bytearray(make())
    raw[4] ^= 0x01
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT
    with pytest.raises(CodecError):
        decode_record(bytes(raw), 0)


def test_check_nonzero_garbage_is_corrupt():
    assert check_record(b"\x00\x00\x00\x00\x00\x00\x00\x01" + bytes(200), 0, 208)[0] == REC_CORRUPT
    assert check_record(b"\x00\x00\x00\x40" + bytes(200), 0, 204)[0] == REC_CORRUPT


@pytest.mark.parametrize("offset", [0, 1, 50, 99])
def test_check_bad_crc_is_corrupt(offset):
    raw = bytearray(make(body=bytes(range(100))))
    raw[88 + offset] ^= 0x40
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT
    # without CRC verification, the same bytes pass (lengths are still consistent)
    assert check_record(raw, 0, len(raw), verify_crc=False)[0] == REC_OK


def test_check_bad_stored_crc_is_corrupt():
    raw = bytearray(make(body=b"payload"))
    struct.pack_into(">i", raw, 8, (zlib.crc32(b"payload") & 0x7FFFFFFF) ^ 1)
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT


def test_check_inconsistent_lengths_are_corrupt():
    base = make(body=b"x" * 30, topic=b"Topic", props={"a": "b"})
    n = len(base)
    # TOTALSIZE smaller than the fixed overhead
    raw = bytearray(base)
    struct.pack_into(">i", raw, 0, 50)
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT
    # BODYLEN negative
    raw = bytearray(base)
    struct.pack_into(">i", raw, 84, -1)
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT
    # BODYLEN larger than the record can hold
    raw = bytearray(base)
    struct.pack_into(">i", raw, 84, 10_000)
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT
    # BODYLEN off by one: topic/properties lengths no longer add up to TOTALSIZE
    raw = bytearray(base)
    struct.pack_into(">i", raw, 84, 29)
    assert check_record(raw, 0, len(raw), verify_crc=False)[0] == REC_CORRUPT
    # TOPICLEN changed
    raw = bytearray(base)
    raw[88 + 30] = 4
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT
    # PROPERTIESLEN changed
    raw = bytearray(base)
    struct.pack_into(">h", raw, 88 + 30 + 1 + 5, 3)
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT
    # PROPERTIESLEN negative
    raw = bytearray(base)
    struct.pack_into(">h", raw, 88 + 30 + 1 + 5, -4)
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT
    # TOTALSIZE one more than the fields (with a spare byte after it)
    raw = bytearray(base) + b"\x00"
    struct.pack_into(">i", raw, 0, n + 1)
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT
    with pytest.raises(CodecError):
        decode_record(bytes(raw), 0)


needs_record_crc = pytest.mark.skipif(not TAIL, reason="codec has no record CRC")


@needs_record_crc
@pytest.mark.parametrize("where", ["queue_id", "queue_offset", "store_ts", "topic", "property"])
def test_record_crc_covers_header_topic_and_properties(where):
    raw = bytearray(make(body=b"body", topic=b"TopicA", props={"k": "v"}))
    at = {"queue_id": 12, "queue_offset": 27, "store_ts": 60,
          "topic": 88 + 4 + 1 + 2, "property": 88 + 4 + 1 + 6 + 2 + 1}[where]
    raw[at] ^= 0x01
    # lengths are consistent and BODYCRC is right: only the record CRC sees it
    assert check_record(raw, 0, len(raw), verify_crc=False)[0] == REC_OK
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT


@needs_record_crc
def test_record_crc_digits_damaged_is_corrupt():
    raw = bytearray(make())
    d = len(raw) - 5
    raw[d] = ord("0") + (raw[d] - ord("0") + 1) % 10
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT
    raw[d] = ord("x")
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT


@needs_record_crc
def test_record_without_record_crc_is_invalid():
    """Verification requires the record CRC: a tear that zeroed the end of the properties
    must not pass as a record without it. Lengths alone still read as consistent."""
    body, topic, props = b"plain", b"T", b"a\x01b\x02"
    st_ = codec.record_struct(len(body), len(topic), len(props))
    raw = bytearray(st_.pack(st_.size, codec.MAGIC, codec.body_crc(body), 1, 0, 2, 3, 0, 4, BORN_HOST, 5,
                             STORE_HOST, 0, 0, len(body), body, len(topic), topic, len(props), props))
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT
    assert check_record(raw, 0, len(raw), verify_crc=False) == (REC_OK, len(raw))
    m = decode_record(raw, 0)
    assert m.body == body and m.properties == {"a": "b"}


@needs_record_crc
def test_zeroed_record_crc_tail_is_corrupt():
    raw = bytearray(make(props={"k": "v"}))
    raw[len(raw) - 20:] = bytes(20)
    assert check_record(raw, 0, len(raw))[0] == REC_CORRUPT


def test_decode_short_record_raises():
    raw = make()
    with pytest.raises(CodecError):
        decode_record(raw[:40], 0)


# Message ids -------------------------------------------------------------------------

def test_offset_msg_id_format():
    mid = offset_msg_id(encode_host("127.0.0.1:10911"), 0x1234)
    assert len(mid) == 32
    assert mid == mid.upper()
    assert mid == "7F000001" + "00002A9F" + "0000000000001234"
    assert all(c in "0123456789ABCDEF" for c in mid)


@pytest.mark.parametrize("host, offset", [("127.0.0.1:10911", 0), ("10.20.30.40:1", 123456789),
                                          ("255.255.255.255:65535", 2 ** 63 - 1), ("0.0.0.0:0", 1 << 40)])
def test_parse_offset_msg_id_round_trip(host, offset):
    mid = offset_msg_id(encode_host(host), offset)
    assert parse_offset_msg_id(mid) == (host, offset)
    assert parse_offset_msg_id(mid.lower()) == (host, offset)


def test_parse_offset_msg_id_rejects_wrong_length():
    with pytest.raises(CodecError):
        parse_offset_msg_id("7F000001")
    with pytest.raises(ValueError):
        parse_offset_msg_id("not hex at all, not hex at all!!")


def test_encode_host():
    assert encode_host("1.2.3.4:5678") == bytes([1, 2, 3, 4]) + struct.pack(">i", 5678)
    assert codec.decode_host(encode_host("1.2.3.4:5678")) == "1.2.3.4:5678"
    for bad in ("1.2.3:80", "1.2.3.256:80", "host:80"):
        with pytest.raises((CodecError, ValueError)):
            encode_host(bad)


# Tag hash codes ----------------------------------------------------------------------

def java_string_hash(s: str) -> int:
    """Reference: java.lang.String.hashCode over UTF-16 code units, signed 32-bit overflow."""
    units = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = 0
    for u in units:
        h = (31 * h + u) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


def test_java_reference_itself():
    # known Java values: "".hashCode() == 0, "a" == 97, "Aa" == "BB" == 2112, "hello" == 99162322
    assert java_string_hash("a") == 97
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648


@pytest.mark.parametrize("tags", ["TagA", "TagB", "a", "Aa", "BB", "hello", "polygenelubricants",
                                  "tag with spaces", "Ünïcödé", "日本語タグ", "emoji😀tag", "x" * 1000])
def test_tags_hash_is_java_string_hashcode(tags):
    assert tags_hash(tags) == java_string_hash(tags)


def test_tags_hash_known_values():
    assert tags_hash("TagA") == 2598919        # 84*31^3 + 97*31^2 + 103*31 + 65
    assert tags_hash("hello") == 99162322
    assert tags_hash("polygenelubricants") == -2147483648
    assert tags_hash(None) == 0
    assert tags_hash("") == 0


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=50))
def test_tags_hash_matches_reference(s):
    h = tags_hash(s)
    assert h == java_string_hash(s)
    assert -2 ** 31 <= h < 2 ** 31


def test_valid_topic():
    assert codec.valid_topic("a")
    assert codec.valid_topic("%RETRY%group|x_y-z")
    assert codec.valid_topic("t" * 127)
    assert not codec.valid_topic("t" * 128)
    assert not codec.valid_topic("")
    assert not codec.valid_topic("a b")
    assert not codec.valid_topic("a/b")
    assert not codec.valid_topic("a.b")
    assert not codec.valid_topic("tópico")


def test_valid_topic_rejects_a_trailing_newline():
    # "$" in a regex also matches before a final newline: the whole name must match
    assert not codec.valid_topic("abc\n")
    assert not codec.valid_topic("t" * 127 + "\n")


# prop_value: one property without decoding them all (a follower's dispatch) ---------------------
_NAMES = [codec.PROP_TAGS, codec.PROP_KEYS, codec.PROP_UNIQ_KEY]
_NAME_BYTES = st.sampled_from([b"TAGS", b"KEYS", b"UNIQ_KEY", b"XTAGS", b"KEYSX", b"", b"__CRC32#"])
_VALUE_BYTES = st.sampled_from([b"", b"a", b"b c", b"\xff", b"\xc3", b"\xc3\xa9", b"0123456789", b"x\x01y"])
_ITEM = st.tuples(_NAME_BYTES, st.sampled_from([b"\x01", b""]), _VALUE_BYTES).map(b"".join)
_RAW = st.tuples(st.lists(_ITEM, max_size=6).map(b"\x02".join), st.sampled_from([b"", b"\x02"]),
                 st.sampled_from([b"", codec.RECORD_CRC_TAIL, codec.RECORD_CRC_MARK + b"12345\x02",
                                  codec.RECORD_CRC_MARK + b"\x02TAGS\x01abcd\x02"])).map(b"".join)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(raw=_RAW)
@example(raw=b"__CRC32#\x01a\x02TAGS\x01x\x01y\x02")                  # a "tail" that is all the properties
@example(raw=b"A\x01b\x02__CRC32#\x01\x02TAGS\x01abcd\x02")            # a tail whose digits are not digits
@example(raw=b"__CRC32#\x01\x02")
def test_prop_value_is_decode_properties_for_any_bytes(raw):
    """Any raw properties, damaged ones included (separators anywhere, bad UTF-8, a CRC tail after
    a separator or not): the value decode_properties' dict holds."""
    props = codec.seek_properties(raw)
    want = codec.decode_properties(raw)
    for name in _NAMES:
        assert codec.prop_value(props, codec.prop_name(name)) == want.get(name), (raw, name)


_PROP_TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=8)


@given(props=st.dictionaries(st.sampled_from(_NAMES + ["TAGSX", "XKEYS", "k"]), _PROP_TEXT, max_size=5))
def test_prop_value_reads_what_encode_properties_wrote(props):
    raw = codec.encode_properties(props) + codec.RECORD_CRC_TAIL
    for name in _NAMES:
        assert codec.prop_value(codec.seek_properties(raw), codec.prop_name(name)) == props.get(name)


# What a consume-queue unit stands for -------------------------------------------------

def test_stands_for_compares_topic_queue_id_and_queue_offset():
    m = decode_record(make(topic=b"TopicA", queue_id=3, queue_offset=42), 0)
    key = codec.topic_key("TopicA")
    assert key == b"\x06TopicA" and m.stands_for(key, 3, 42)
    for k, qid, qoff in ((codec.topic_key("TopicAB"), 3, 42), (codec.topic_key("Topic"), 3, 42),
                         (codec.topic_key("TopicB"), 3, 42), (codec.topic_key(""), 3, 42), (key, 4, 42),
                         (key, 3, 43), (key, 3, 42 + (1 << 32)), (key, 3 - (1 << 32), 42)):
        assert not m.stands_for(k, qid, qoff), (k, qid, qoff)
    assert decode_record(make(topic=b"", queue_id=0, queue_offset=0), 0).stands_for(codec.topic_key(""), 0, 0)
    assert codec.topic_key("x" * 255) == b"\xff" + b"x" * 255 and codec.topic_key("x" * 256) is None
