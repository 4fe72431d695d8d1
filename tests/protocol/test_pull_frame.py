"""The PullRecords frames: request fields, defaults and clamps, malformed requests; the
response's header, sizes and records."""

from array import array

import pytest

from tidemq.record.crc import crc32
from tidemq.protocol.pull_frame import (COUNT_MAX, WAIT_MS_MAX, FrameError, PullRequest, decode_request,
                                        decode_response, encode_head, encode_request, encode_response,
                                        frame_crc)


def test_request_round_trip_defaults_and_clamps():
    assert decode_request(encode_request("T", 3, 42, 10, 1 << 20, 250)) == PullRequest("T", 3, 42, 10, 1 << 20, 250)
    assert decode_request(b'{"topic": "T", "queue_id": 0, "offset": 0}') == PullRequest("T", 0, 0, 4096, 16 << 20, 0)
    r = decode_request(encode_request("T", 0, 0, max_count=10**9, wait_ms=10**9))
    assert (r.max_count, r.wait_ms) == (COUNT_MAX, WAIT_MS_MAX)
    r = decode_request(encode_request("T", 0, 0, max_count=-5, wait_ms=-1))
    assert (r.max_count, r.wait_ms) == (1, 0)


@pytest.mark.parametrize("raw", [b"{not json", b"[]", b'{"topic": "T"}',
                                 b'{"topic": "T", "queue_id": "x", "offset": 0}', b"\xff"])
def test_malformed_requests_are_frame_errors(raw):
    with pytest.raises(FrameError) as e:
        decode_request(raw)
    assert str(e.value).startswith("malformed PullRecords request")


def test_response_round_trip():
    sizes = array("i", [3, 5])
    head, s, data = decode_response(encode_response({"code": 0, "count": 2, "next_offset": 9}, sizes, b"abcdefgh"))
    assert head == {"code": 0, "count": 2, "next_offset": 9, "crc32": crc32(sizes.tobytes() + b"abcdefgh")}
    assert array("i", bytes(s)) == sizes and bytes(data) == b"abcdefgh"
    assert frame_crc(s, data) == head["crc32"]
    head, s, data = decode_response(encode_response({"code": 40401, "count": 0}))
    assert head["code"] == 40401 and bytes(s) == b"" and bytes(data) == b"" and "crc32" not in head


def test_a_head_for_records_laid_out_after_a_room():
    """encode_head pads the header to the room: the frame decodes as encode_response's does."""
    sizes, records = array("i", [3, 5]), b"abcdefgh"
    crc = frame_crc(sizes.tobytes(), records)
    front = encode_head({"code": 0, "count": 2, "next_offset": 9}, crc, 128)
    assert len(front) == 128
    head, s, data = decode_response(front + sizes.tobytes() + records)
    assert head == {"code": 0, "count": 2, "next_offset": 9, "crc32": crc}
    assert array("i", bytes(s)) == sizes and bytes(data) == records
    assert encode_head({"code": 0, "count": 2, "message": "x" * 200}, crc, 128) is None
