"""SendResults: the answers of many messages kept as arrays, a SendResult made when one is read."""

from array import array

import pytest

from tidemq.client.results import SendResult, SendResults
from tidemq.protocol.stubs import Code


def _results() -> SendResults:
    r = SendResults()
    r.add([b"a", b"b"], array("i", [Code.OK, Code.OK]), array("i", [0, 1]), array("q", [10, 11]))
    r.add([b"c", b"d", b"e"], array("i", [Code.OK, Code.BAD_REQUEST, Code.OK]), array("i", [2, -1, -1]),
          array("q", [12, -1, 3]), {"1": "tags must be UTF-8"}, frozenset({2}), "some were not stored")
    return r


def test_a_result_is_made_when_read_with_what_the_entries_say():
    r = _results()
    assert len(r) == 5
    assert r[0] == SendResult("a", 10, Code.OK, "", 0, False)
    assert r[3] == SendResult("d", -1, Code.BAD_REQUEST, "tags must be UTF-8", -1, False)
    assert r[4] == SendResult("e", 3, Code.OK, "", -1, True)          # a duplicate: the first store's offset
    assert r[-1] == r[4] and r[1:3] == [r[1], r[2]] and list(r) == [r[i] for i in range(5)]
    with pytest.raises(IndexError):
        r[5]


def test_the_arrays_answer_for_the_whole_batch():
    r = _results()
    assert not r.all_ok() and [x.message_id for x in r.failed()] == ["d"]
    assert list(r.codes) == [Code.OK] * 3 + [Code.BAD_REQUEST, Code.OK]
    assert list(r.offsets) == [10, 11, 12, -1, 3] and list(r.queue_ids) == [0, 1, 2, -1, -1]
    ok = SendResults()
    ok.add([b"x"], array("i", [Code.OK]), array("i", [0]), array("q", [0]))
    assert ok.all_ok() and ok.failed() == [] and SendResults().all_ok()


def test_an_entry_without_text_takes_the_responses():
    r = SendResults()
    r.add([b"x", b"y"], array("i", [Code.TOO_MANY_REQUESTS] * 2), array("i", [-1, -1]), array("q", [-1, -1]),
          top="disk full")
    assert [x.error for x in r] == ["disk full", "disk full"]


def test_results_extend_and_compare_as_lists():
    r = _results()
    both = SendResults()
    both.extend(r)
    both.extend(r)
    assert len(both) == 10 and list(both) == list(r) + list(r) and both[7] == r[2]
    assert r == list(r) and r + [] == list(r)
