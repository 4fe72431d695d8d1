"""store/validate.py: the record validator, every rule worded once; every entry point into the store
checks with it (puts whose caller checked nothing are refused with the validator's reason)."""

from __future__ import annotations

import numpy as np
import pytest

from tidemq.record import codec
from tidemq.store import Message, PutReason
from tidemq.store.topics import TopicState
from tidemq.store.validate import (ENCODED_RESERVED, ID_TEXT, KEYS_FORM, KEYS_UTF8, PROPS_END, PROPS_PAIR,
                                   PROPS_RESERVED, PROPS_UTF8, SLICE_RESERVED, TAGS_TEXT, check_body, check_encoded,
                                   check_numbers, check_properties_size, check_queue_id, check_record_size,
                                   check_sizes, check_slices, check_tags, check_topic, encode_properties,
                                   py_check_encoded, refusal, slice_reserved)

from ..support.store import slices


def test_the_validators_word_each_rule_once():
    assert check_topic("T", True) is None                   # an unknown topic that may be created
    assert check_topic("bad topic", True).reason is PutReason.INVALID_TOPIC
    assert check_topic(None, True).error == codec.topic_problem(None)
    assert check_topic("Nope", False).reason is PutReason.TOPIC_NOT_FOUND
    assert check_body(b"x", 1) is None
    assert check_body(b"xx", 1).reason is PutReason.BODY_TOO_LARGE
    assert check_body("text", 10).reason is PutReason.BAD_BODY
    assert check_body(bytearray(b"x"), 10).reason is PutReason.BAD_BODY       # callers convert first
    assert check_properties_size(codec.USER_PROPERTIES_MAX_BYTES) is None
    assert check_properties_size(codec.USER_PROPERTIES_MAX_BYTES + 1).reason is PutReason.PROPERTIES_TOO_LARGE
    assert check_record_size(10, 1, 20, codec.record_size(10, 1, 20)) is None
    assert check_record_size(11, 1, 20, codec.record_size(10, 1, 20)).reason is PutReason.RECORD_TOO_LARGE
    assert check_sizes(b"x" * 5, 4, 1, 0, 1000).reason is PutReason.BODY_TOO_LARGE
    assert check_sizes(b"x", 4, 1, 40_000, 100_000).reason is PutReason.PROPERTIES_TOO_LARGE
    assert check_sizes(b"x" * 4, 4, 1, 0, codec.RECORD_MIN + 4).reason is PutReason.RECORD_TOO_LARGE
    assert check_sizes(b"x" * 4, 4, 1, 0, codec.RECORD_MIN + 5) is None
    assert check_numbers(Message("T", b"", flag=1 << 31)).reason is PutReason.BAD_FIELD
    assert check_numbers(Message("T", b"", born_timestamp_ms=None)) is None
    t = TopicState("T", 2)
    assert check_queue_id(None, t) is None and check_queue_id(1, t) is None
    assert check_queue_id(2, t).reason is PutReason.BAD_QUEUE_ID and check_queue_id("0", t) is not None
    assert check_tags("a\x01b").reason is PutReason.BAD_PROPERTY and check_tags("ok") is None
    assert encode_properties(Message("T", b"", keys=["a b"])).reason is PutReason.BAD_PROPERTY
    assert encode_properties(Message("T", b"", properties={codec.RECORD_CRC_NAME: "1"})).reason \
        is PutReason.BAD_PROPERTY
    assert encode_properties(Message("T", b"", tags="t")).endswith(codec.RECORD_CRC_TAIL)



@pytest.mark.parametrize("field, value, why", [
    ("id", b"a\x01b", ID_TEXT), ("id", b"\xff", ID_TEXT), ("tags", b"t\x02", TAGS_TEXT),
    ("tags", b"\xc3", TAGS_TEXT), ("keys", b"\xff", KEYS_UTF8), ("keys", b"a  b", KEYS_FORM),
    ("keys", b" a", KEYS_FORM), ("properties", b"\xfe\x01v\x02", PROPS_UTF8), ("properties", b"p\x01v", PROPS_END),
    ("properties", b"\x01v\x02", PROPS_PAIR), ("properties", b"p\x01v\x01w\x02", PROPS_PAIR),
    ("properties", b"TAGS\x01x\x02", PROPS_RESERVED), ("properties", b"__CRC32#\x01x\x02", PROPS_RESERVED)])
def test_a_slice_breaking_a_rule_is_refused_with_its_reason(field, value, why):
    cols = {"ids": [b"ok", b"id"], "tags": None, "keys": None, "properties": None}
    key = {"id": "ids"}.get(field, field)
    cols[key] = [b"ok" if key == "ids" else b"", value] if key != "ids" else [b"ok", value]
    data, fields = slices(cols["ids"], [b"b0", b"b1"], tags=cols["tags"], keys=cols["keys"],
                          properties=cols["properties"])
    w, ths, names = check_slices(data, fields, None, SLICE_RESERVED)
    assert (w[0], w[1]) == (0, why)
    assert refusal(w[1], names.get(1)).reason is PutReason.BAD_PROPERTY
    assert np.frombuffer(ths, np.int64).tolist() == [0, 0]


def test_tags_hashes_are_computed_by_the_validator_not_taken_from_the_caller():
    data, fields = slices([b"a", b"b"], [b"x", b"y"], tags=[b"TagA", "ü€".encode()])
    _w, ths, _n = check_slices(data, fields, np.array([False, False]), SLICE_RESERVED)
    assert np.frombuffer(ths, np.int64).tolist() == [codec.tags_hash("TagA"), codec.tags_hash("ü€")]


def test_encoded_properties_give_the_fields_the_store_needs():
    raw = codec.encode_properties({"UNIQ_KEY": "U1", "TAGS": "t", "KEYS": "k1 k2", "x": "1"})
    assert check_encoded(raw, ENCODED_RESERVED) == (0, None, codec.tags_hash("t"), "U1", "k1 k2")
    assert check_encoded(b"", ENCODED_RESERVED) == (0, None, 0, None, None)
    assert check_encoded(b"__CRC32#\x01x\x02", ENCODED_RESERVED)[:2] == (PROPS_RESERVED, "__CRC32#")
    assert check_encoded(b"a\x01b", ENCODED_RESERVED)[0] == PROPS_END
    assert py_check_encoded(raw) == check_encoded(raw, ENCODED_RESERVED)


def test_extra_properties_reserve_their_names():
    assert set(slice_reserved(b"__MSGTYPE\x01NORMAL\x02")) == set(SLICE_RESERVED) | {b"__MSGTYPE"}
    assert slice_reserved(b"bad").reason is PutReason.BAD_PROPERTY


def test_the_store_refuses_what_its_callers_did_not_check(store):
    """No caller is trusted with the record's format: put_slices and put_encoded refuse what breaks
    a rule themselves (the broker's lanes do not check texts any more)."""
    store.create_topic("T", 1)
    data, fields = slices([b"ok", b"a\x01b", b"k"], [b"1", b"2", b"3"], keys=[b"", b"", b"k  k"])
    rs = store.put_slices("T", data, fields)
    assert [r.reason for r in rs] == [None, PutReason.BAD_PROPERTY, PutReason.BAD_PROPERTY]
    assert "message id" in rs[1].error and "keys" in rs[2].error
    enc = store.put_encoded("T", [(b"x", b"UNIQ_KEY\x01a\x01b\x02"), (b"y", codec.encode_properties({"TAGS": "t"}))])
    assert enc[0].reason is PutReason.BAD_PROPERTY and enc[1].ok
    assert [m.body for m in store.get("g", "T", 0, 0, tags=["t"]).messages] == [b"y"]      # its hash, computed here
    assert store.put_slices("T", data, fields, b"no pairs")[0].reason is PutReason.BAD_PROPERTY
    assert store.check().ok


def test_a_refused_born_host_is_remembered_as_an_accepted_one_is(monkeypatch):
    """A client sending a born host without its port is refused BAD_FIELD at every send, worked out
    once (the cache of hosts, bounded, keeps the refusal as it keeps the bytes of an accepted host);
    a host too long to be remembered is still refused, typed, each time."""
    from tidemq.store import validate

    calls = []
    real = codec.encode_host

    def counted(host):
        calls.append(host)
        return real(host)

    monkeypatch.setattr(codec, "encode_host", counted)
    validate._host_bytes.cache_clear()
    for host in ("10.0.0.1", "10.0.0.1", "10.0.0.1:99999999999", "10.0.0.1:99999999999"):
        got = validate.born_host_bytes(host)
        assert got.reason is PutReason.BAD_FIELD, host
    assert calls == ["10.0.0.1", "10.0.0.1:99999999999"]
    assert validate.born_host_bytes("10.0.0.1:80") == bytes((10, 0, 0, 1)) + (80).to_bytes(4, "big")
    assert validate.born_host_bytes("10.0.0.1:80") == bytes((10, 0, 0, 1)) + (80).to_bytes(4, "big")
    assert calls.count("10.0.0.1:80") == 1
    long_host = "1" * (validate.HOST_CACHED_CHARS_MAX + 1)
    for _ in range(2):
        assert validate.born_host_bytes(long_host).reason is PutReason.BAD_FIELD
    assert calls.count(long_host) == 2                       # not remembered: the cache stays small
    assert validate._host_bytes.cache_info().maxsize == 256
    for bad in (None, 7, b"10.0.0.1:80"):                      # not a string: refused, never raised
        assert validate.born_host_bytes(bad).reason is PutReason.BAD_FIELD
    validate._host_bytes.cache_clear()
