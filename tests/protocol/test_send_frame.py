"""The SendRecords frames: what the client encodes the broker decodes, field by field; framing
errors are FrameError with what is wrong; the per-message duplicate flags."""

import json

import pytest

from tidemq.protocol.send_frame import (FrameError, decode_request, decode_response, decode_response_columns,
                                        duplicates, encode_request, encode_response, encode_response_columns)


def test_request_round_trip():
    frame = encode_request("Topic", [b"b1", b"", b"b3" * 100], [b"01A", b"01B", b"01C"],
                           tags=[b"t", b"", b"tt"], keys=[b"k1 k2", b"", b""], properties=[b"", b"a\x01b\x02", b""])
    topic, msgs = decode_request(frame)
    assert topic == "Topic"
    assert msgs == [(b"01A", b"t", b"k1 k2", b"", b"b1"), (b"01B", b"", b"", b"a\x01b\x02", b""),
                    (b"01C", b"tt", b"", b"", b"b3" * 100)]
    assert decode_request(encode_request("T", [b"x"], [b"i"])) == ("T", [(b"i", b"", b"", b"", b"x")])
    with pytest.raises(ValueError):
        encode_request("T", [b"x", b"y"], [b"i"])


def test_ids_and_bodies_alone_encode_as_with_empty_fields():
    """The fast path (no tags, keys or properties) writes the frame the general one writes."""
    bodies, ids = [b"a" * 300, b"b", b"c" * 70_000], [b"01A", b"01BB", b"x" * 128]
    assert encode_request("T", bodies, ids) == encode_request("T", bodies, ids, [b""] * 3, [b""] * 3, [b""] * 3)


@pytest.mark.parametrize("cut", [0, 3, 9, 12, 20, -1])
def test_truncated_requests_are_frame_errors(cut):
    frame = encode_request("Topic", [b"body"], [b"01A"])
    with pytest.raises(FrameError):
        decode_request(frame[:cut])


def test_response_round_trip():
    raw = encode_response(7, "some", [(0, 1, 5), (40001, -1, -1)], {1: "why"})
    head, entries = decode_response(raw)
    assert head == {"code": 7, "message": "some", "count": 2, "messages": {"1": "why"}}
    assert entries == [(0, 1, 5), (40001, -1, -1)]
    with pytest.raises(FrameError):
        decode_response(raw[:-1])


def test_response_columns_round_trip():
    entries = [(20000, 1, 5), (40001, -1, -1), (20000, 7, 1 << 40)]
    raw = encode_response_columns(20000, "", [e[0] for e in entries], [e[1] for e in entries],
                                  [e[2] for e in entries], {1: "why"}, [0])
    assert raw == encode_response(20000, "", entries, {1: "why"}, [0])
    head, codes, qids, offsets = decode_response_columns(raw)
    assert head == decode_response(raw)[0]
    assert list(zip(codes, qids, offsets)) == entries
    for bad in (raw[:-1], raw + b"x", b"\xff\xff\0\0{}"):
        with pytest.raises(FrameError):
            decode_response_columns(bad)


def test_duplicates_travel_in_the_header_and_are_absent_when_none():
    head, _ = decode_response(encode_response(0, "", [(0, 1, 5), (0, -1, 3), (0, 0, 6)], {1: "dup"}, [1]))
    assert head["duplicates"] == [1] and duplicates(head) == {1}
    head, _ = decode_response(encode_response(0, "", [(0, 1, 5)]))
    assert "duplicates" not in head and duplicates(head) == frozenset(), "the first version's header, unchanged"


@pytest.mark.parametrize("bad", [[2], [-1], ["0"], {"0": 1}, 1])
def test_duplicates_that_are_not_indexes_of_the_entries_are_frame_errors(bad):
    raw = encode_response(0, "", [(0, 1, 5), (0, 1, 6)])
    hl = int.from_bytes(raw[:4], "little")
    head = json.loads(raw[4:4 + hl])
    head["duplicates"] = bad
    h = json.dumps(head).encode()
    with pytest.raises(FrameError):
        decode_response(len(h).to_bytes(4, "little") + h + raw[4 + hl:])
