"""PullConsumer.iter_records against a model of PullRecords (no broker): order, bounds, gaps,
speculative pulls asked again after a short answer, prefetch bounded, errors where the
iteration reaches them, pulls under way cancelled when it stops, the frame's CRC."""

import json
import struct

import numpy as np
import pytest

from tidemq.protocol.stubs import Code
from tidemq.protocol.pull_frame import decode_response
from tidemq.protocol.pull_frame import encode_response as frame
from tidemq.client import ClientError, PullConsumer
from tidemq.client.client import PREFETCH_MAX

RECORD = 8          # bytes per model record: b"r%07d" % offset


class FakeQueue:
    """One queue: offsets [lo, hi), ``holes`` hold no record; at most ``cap`` records per answer;
    a pull from ``fail_at`` fails. Counts the pulls under way."""

    def __init__(self, lo=0, hi=1000, holes=(), cap=None, fail_at=None):
        self.lo, self.hi, self.holes, self.cap, self.fail_at = lo, hi, set(holes), cap, fail_at
        self.asked: list[int] = []
        self.cancelled: list[int] = []
        self.on_the_way = None          # what happens to an answer's bytes on the way (bytes -> bytes)
        self.open = 0
        self.open_max = 0

    def answer(self, req: dict) -> bytes:
        off, n = req["offset"], req["max_count"]
        if req["topic"] != "T":
            return frame({"code": Code.TOPIC_NOT_FOUND, "message": "no topic"})
        head = {"min_offset": self.lo, "max_offset": self.hi, "count": 0}
        if off < self.lo:
            return frame({**head, "code": Code.ILLEGAL_OFFSET, "message": "too small", "next_offset": self.lo})
        if off >= self.hi:
            code = Code.MESSAGE_NOT_FOUND if off == self.hi else Code.ILLEGAL_OFFSET
            return frame({**head, "code": code, "message": "end", "next_offset": min(off, self.hi)})
        stop = min(off + n, self.hi)
        got = [o for o in range(off, stop) if o not in self.holes]
        if self.cap is not None and len(got) > self.cap:
            got = got[:self.cap]
            stop = got[-1] + 1
        if not got:
            return frame({**head, "code": Code.MESSAGE_NOT_FOUND, "message": "holes", "next_offset": stop})
        sizes = np.full(len(got), RECORD, "<i4")
        return frame({**head, "code": Code.OK, "next_offset": stop, "count": len(got)}, sizes,
                     b"".join(b"r%07d" % o for o in got))


class FakeFuture:
    def __init__(self, q: FakeQueue, req: dict):
        self.q, self.req, self.done = q, req, False
        q.open += 1
        q.open_max = max(q.open_max, q.open)

    def _finish(self):
        if not self.done:
            self.done = True
            self.q.open -= 1

    def result(self):
        self._finish()
        if self.q.fail_at is not None and self.req["offset"] >= self.q.fail_at:
            raise ClientError(Code.INTERNAL_SERVER_ERROR, "broken")
        raw = self.q.answer(self.req)
        return self.q.on_the_way(raw) if self.q.on_the_way else raw

    def cancel(self):
        self.q.cancelled.append(self.req["offset"])
        self._finish()


class FakeCallable:
    def __init__(self, q):
        self.q = q

    def future(self, raw, timeout=None, metadata=None):
        req = json.loads(raw)
        self.q.asked.append(req["offset"])
        return FakeFuture(self.q, req)


@pytest.fixture
def consumer(monkeypatch):
    c = PullConsumer("127.0.0.1:1", stream=False)      # the unary pulls (the stream: test_iter_records_e2e.py)

    def use(q: FakeQueue) -> PullConsumer:
        monkeypatch.setattr(c._ch, "unary", lambda method: FakeCallable(q))
        return c
    return use


def offsets_of(results):
    out = []
    for r in results:
        data = bytes(r.data)
        out += [int(data[i + 1:i + RECORD]) for i in range(0, len(data), RECORD)]
    return out


def check_contiguous(results, start):
    at = start
    for r in results:
        assert r.offset == at
        at = r.next_offset
    return at


@pytest.mark.parametrize("prefetch", [0, 1, 2, PREFETCH_MAX])
def test_in_order_to_end_and_to_queue_end(consumer, prefetch):
    q = FakeQueue(hi=1000)
    c = consumer(q)
    rs = list(c.iter_records("T", 0, 10, 777, max_count=64, prefetch=prefetch))
    assert offsets_of(rs) == list(range(10, 777)) and check_contiguous(rs, 10) == 777
    assert max(q.asked) < 777 and not q.cancelled and q.open == 0
    assert q.open_max == max(1, prefetch)
    rs = list(c.iter_records("T", 0, 900, max_count=64, prefetch=prefetch))       # no end: the queue's
    assert offsets_of(rs) == list(range(900, 1000)) and max(q.asked) < 1000       # nothing asked past it
    assert list(c.iter_records("T", 0, 1000, prefetch=prefetch)) == []
    rs = list(c.iter_records("T", 0, 990, 5000, max_count=64, prefetch=prefetch))  # the queue ends first
    assert offsets_of(rs) == list(range(990, 1000))


def test_gaps_are_results_and_end_bounds_them(consumer):
    q = FakeQueue(lo=100, hi=400, holes=range(200, 260))
    c = consumer(q)
    rs = list(c.iter_records("T", 0, 50, 300, max_count=20, prefetch=2))
    assert check_contiguous(rs, 50) == 300
    assert offsets_of(rs) == [o for o in range(100, 300) if not 200 <= o < 260]
    assert rs[0].code == Code.ILLEGAL_OFFSET and (rs[0].offset, rs[0].next_offset) == (50, 100)
    assert [(r.offset, r.next_offset) for r in rs if r.code == Code.MESSAGE_NOT_FOUND] == [(200, 220), (220, 240),
                                                                                          (240, 260)]
    # a gap that reaches past `end` is cut at it
    rs = list(c.iter_records("T", 0, 0, 60, max_count=20))
    assert [(r.code, r.offset, r.next_offset) for r in rs] == [(Code.ILLEGAL_OFFSET, 0, 60)]


def test_short_answers_ask_again_and_ask_for_less(consumer):
    q = FakeQueue(hi=1000, cap=30)              # e.g. the byte limit: 30 records an answer
    c = consumer(q)
    rs = list(c.iter_records("T", 0, 0, max_count=100, prefetch=3))
    assert offsets_of(rs) == list(range(1000)) and check_contiguous(rs, 0) == 1000
    assert len(q.cancelled) <= 3                            # then pulls of 22: none short
    assert all(len(r.sizes) == 22 for r in rs[1:-1])


def test_errors_surface_where_the_iteration_reaches_them(consumer):
    q = FakeQueue(hi=1000, fail_at=300)
    c = consumer(q)
    it = c.iter_records("T", 0, 0, max_count=100, prefetch=2)
    got = [next(it) for _ in range(3)]                      # 0..300: the failing pull is already under way
    assert offsets_of(got) == list(range(300)) and 300 in q.asked
    with pytest.raises(ClientError, match="broken"):
        next(it)
    assert q.open == 0                                      # the pull after it was cancelled
    with pytest.raises(ClientError) as e:
        next(c.iter_records("Other", 0, 0))
    assert e.value.code == Code.TOPIC_NOT_FOUND
    with pytest.raises(ValueError):
        c.iter_records("T", 0, 0, prefetch=PREFETCH_MAX + 1)


def test_closing_early_cancels_the_pulls_under_way(consumer):
    q = FakeQueue(hi=1000)
    c = consumer(q)
    it = c.iter_records("T", 0, 0, max_count=10, prefetch=4)
    next(it)
    assert q.open == 4
    it.close()
    assert q.open == 0 and len(q.cancelled) == 4


def test_waiting_at_the_end_polls_again_and_beyond_the_end_raises(consumer):
    q = FakeQueue(hi=100)
    c = consumer(q)
    it = c.iter_records("T", 0, 90, 130, max_count=50, wait_s=0.01)
    assert offsets_of([next(it)]) == list(range(90, 100))
    q.hi = 130                                              # records arrive while it waits
    rs = list(it)
    assert offsets_of(rs) == list(range(100, 130))
    with pytest.raises(ClientError) as e:
        next(c.iter_records("T", 0, 500, wait_s=0.01))
    assert e.value.code == Code.ILLEGAL_OFFSET


def _without_crc(raw: bytes) -> bytes:
    """The answer of a broker that sends no frame CRC."""
    head, sizes, data = decode_response(raw)
    head.pop("crc32", None)
    h = json.dumps(head).encode()
    return struct.pack("<I", len(h)) + h + bytes(sizes) + bytes(data)


def test_the_frame_crc_vouches_for_the_records_or_fails_and_without_it_the_reader_checks(consumer):
    q = FakeQueue(hi=100)
    c = consumer(q)
    rs = list(c.iter_records("T", 0, 0, 100, max_count=30))
    assert offsets_of(rs) == list(range(100)) and all(r.checked for r in rs)
    q.on_the_way = lambda raw: raw[:-3] + bytes([raw[-3] ^ 0x04]) + raw[-2:]      # a record's byte flipped
    with pytest.raises(ClientError) as e:
        list(c.iter_records("T", 0, 0, 100, max_count=30))
    assert e.value.code == Code.MESSAGE_CORRUPTED and "frame CRC" in str(e.value)
    def flip_a_size(raw: bytes) -> bytes:
        at = 4 + struct.unpack_from("<I", raw)[0]                                 # the first size's first byte
        return raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1:]
    q.on_the_way = flip_a_size
    with pytest.raises(ClientError) as e:
        list(c.iter_records("T", 0, 0, 100, max_count=30))
    assert e.value.code == Code.MESSAGE_CORRUPTED
    q.on_the_way = _without_crc                                                   # an older broker
    rs = list(c.iter_records("T", 0, 0, 100, max_count=30))
    assert offsets_of(rs) == list(range(100)) and not any(r.checked for r in rs)


def test_an_answer_of_a_stream_is_split_into_results_that_follow_on():
    """iter_records on a stream asks for several results' worth per answer and hands it out in
    results of at most max_count records and max_bytes bytes, each one's next offset the queue
    offset of the record after it (across holes), the last one's the answer's."""
    from array import array

    from tidemq.client.client import RecordsResult, _split
    from tidemq.record import codec
    offsets = [5, 6, 7, 9, 10, 14, 15]                         # holes at 8 and 11-13
    recs = [codec.encode_record(body=b"b" * (10 * i), topic=b"T", properties=b"", queue_id=0, queue_offset=o,
                                physical_offset=0, born_timestamp_ms=1, born_host=bytes(8), store_timestamp_ms=1,
                                store_host=bytes(8)) for i, o in enumerate(offsets)]
    whole = RecordsResult(Code.OK, "", 20, 0, 30, array("i", map(len, recs)), memoryview(b"".join(recs)), 5, True)
    parts = list(_split(whole, 3, 10_000))
    assert [[m.queue_offset for m in p.messages()] for p in parts] == [[5, 6, 7], [9, 10, 14], [15]]
    assert [(p.offset, p.next_offset) for p in parts] == [(5, 9), (9, 15), (15, 20)] and all(p.checked for p in parts)
    by_bytes = list(_split(whole, 100, len(recs[0]) + len(recs[1])))
    assert [len(p.sizes) for p in by_bytes] == [2, 1, 1, 1, 1, 1] and by_bytes[-1].next_offset == 20
    assert [len(p.sizes) for p in _split(whole, 100, 1)] == [1] * 7            # one record at least
