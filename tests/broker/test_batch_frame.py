"""The SendRecords frames: what the client encodes the broker decodes, field by field; framing
errors are FrameError with what is wrong; the dedup window's two generations."""

import pytest

from tidemq.broker.batch_frame import FrameError, decode_request, decode_response, encode_request, encode_response
from tidemq.broker.dedup import DedupWindow


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


def test_dedup_window_generations():
    w = DedupWindow(4)
    w.put_many("T", [("a", 1), ("b", 2), ("c", 3)])
    w.put("U", "a", 9, "txn")
    assert w.get("T", "a") == (1, "") and w.get("U", "a") == (9, "txn") and w.get("U", "b") is None
    w.put_many("T", [("d", 4), ("e", 5)])               # the first generation is full: still remembered
    assert w.get("T", "a") == (1, "") and len(w) == 6
    w.put_many("T", [("f", 6), ("g", 7), ("h", 8), ("i", 9)])
    assert w.get("T", "a") is None and w.get("T", "e") == (5, "")   # at least the last 4 are there
    off = DedupWindow(0)
    off.put("T", "a", 1)
    assert off.get("T", "a") is None
