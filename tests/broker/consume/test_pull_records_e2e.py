"""PullRecords (tidemq.client's raw pulls): records decoded client-side, statuses (end of queue,
ILLEGAL_OFFSET with the queue's bounds, unknown topic or queue, malformed request), a long poll
woken by a send, and holes in a queue skipped (in process, on a store with a lost unit)."""

import asyncio
import json
import threading
from types import SimpleNamespace

import grpc
import pytest

from tidemq.protocol.stubs import Code
from tidemq.broker.consume.pull_records import Records
from tidemq.broker.consume.pull import long_poll
from tidemq.protocol.pull_frame import decode_response as unframe
from tidemq.client import ClientError, Producer, PullConsumer
from tidemq.store import GetStatus, Message, MessageStore, StoreConfig

from ...support.brokers import SMALL, make_topic
from ...support.store import lose_message
from ...support.wait import PATIENCE_S


def test_pull_records_statuses(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "R", 2)
    b = broker_factory(root, env=SMALL)
    with Producer(b.endpoint) as p, PullConsumer(b.endpoint) as c:
        rs = p.send_batch("R", [b"r-%d" % i for i in range(10)], tags="T")
        r = c.pull_records("R", 0, 0, max_count=3)
        assert r.found and len(r.sizes) == 3 and r.next_offset == 3 and (r.min_offset, r.max_offset) == (0, 5)
        ms = r.messages()
        assert [m.body for m in ms] == [b"r-0", b"r-2", b"r-4"] and [m.queue_offset for m in ms] == [0, 1, 2]
        assert ms[0].msg_id == rs[0].message_id and ms[0].tags == "T"
        rest = c.pull_records("R", 0, 3)
        assert [m.body for m in rest.messages()] == [b"r-6", b"r-8"] and rest.next_offset == 5
        end = c.pull_records("R", 0, 5)
        assert end.code == Code.MESSAGE_NOT_FOUND and end.next_offset == 5 and not end.messages()
        past = c.pull_records("R", 0, 9)
        assert past.code == Code.ILLEGAL_OFFSET and "queue holds [0, 5)" in past.message and past.max_offset == 5
        for topic, q in (("Nope", 0), ("R", 2), ("bad topic!", 0)):
            with pytest.raises(ClientError) as e:
                c.pull_records(topic, q, 0)
            assert e.value.code == Code.TOPIC_NOT_FOUND
        # a long poll at the end (up to a minute) returns what a send brings meanwhile (that the send
        # wakes it is checked below, test_a_long_poll_is_woken_by_an_arrival)
        threading.Timer(0.3, lambda: p.send_batch("R", [b"late-%d" % i for i in range(2)])).start()
        woke = c.pull_records("R", 0, 5, wait_s=60)
        assert woke.found and [m.body for m in woke.messages()] == [b"late-0"]
    with grpc.insecure_channel(b.endpoint) as ch:
        head, _, _ = unframe(ch.unary_unary("/tidemq.Data/PullRecords")(b"{not json", timeout=30))
        assert head["code"] == Code.BAD_REQUEST and "malformed PullRecords request" in head["message"]


class _Context:
    def __init__(self, remaining_s=5.0):
        self.remaining_s = remaining_s

    def time_remaining(self):
        return self.remaining_s


def test_a_long_poll_is_woken_by_an_arrival():
    """A poll at the end parks on ``arrivals`` (for an hour); the put that sets it makes it look
    again at once: only the wake can end this poll before the test's own bound."""
    arrivals = asyncio.Event()
    fetched = []

    def fetch():
        fetched.append(1)
        if len(fetched) == 1:            # nothing yet; a put arrives while the poll waits
            asyncio.get_running_loop().call_soon(arrivals.set)
            return SimpleNamespace(status=GetStatus.NO_MESSAGE_IN_QUEUE)
        return SimpleNamespace(status=GetStatus.FOUND)

    async def poll():
        return await asyncio.wait_for(long_poll(fetch, arrivals, 3600.0, _Context(None)), PATIENCE_S)

    g = asyncio.run(poll())
    assert g.status is GetStatus.FOUND and len(fetched) == 2


def _store(tmp_path) -> MessageStore:
    return MessageStore(StoreConfig(root_dir=str(tmp_path / "store"), segment_size_bytes=1 << 20, index_slots=100,
                                    index_entries=400)).start()


def test_holes_are_skipped(tmp_path):
    s = _store(tmp_path)
    try:
        s.create_topic("H", 1)
        s.put_batch([Message("H", b"h-%d" % i) for i in range(5)])
        lose_message(s, "H", 0, 1)                                 # a lost message: a hole
        records = Records(s, asyncio.Event(), 4 << 20)

        def pull(offset, max_count=10):
            req = json.dumps({"topic": "H", "queue_id": 0, "offset": offset, "max_count": max_count}).encode()
            return unframe(asyncio.run(records.pull(req, _Context())))

        head, sizes, data = pull(0)
        assert head["code"] == Code.OK and head["count"] == 4 and head["next_offset"] == 5
        hole = pull(1, max_count=1)[0]                              # only the hole: nothing, but move past it
        assert hole["code"] != Code.OK and hole["next_offset"] == 2
    finally:
        s.shutdown()


@pytest.mark.parametrize("message_bytes, records_bytes", [(4 << 20, 16 << 10), (24 << 10, 1 << 20)])
def test_every_answer_says_the_bound_its_records_and_sizes_fit_in(tmp_path, message_bytes, records_bytes):
    """bytes_max in every answer with records: the broker's own bound (pull_records_bytes_max, or the gRPC
    message limit less the header's slack, whichever is smaller), whatever a pull asks; the records and
    their sizes of every answer fit in it."""
    s = _store(tmp_path)
    try:
        s.create_topic("B", 1)
        s.put_batch([Message("B", b"%0500d" % i) for i in range(200)])
        records = Records(s, asyncio.Event(), message_bytes, records_bytes)
        bound = min(records_bytes, message_bytes - 4096)
        offset, seen = 0, 0
        while offset < 200:
            req = {"topic": "B", "queue_id": 0, "offset": offset, "max_count": 1000, "max_bytes": 64 << 20}
            head, sizes, data = unframe(asyncio.run(records.pull(json.dumps(req).encode(), _Context())))
            assert head["code"] == Code.OK and head["bytes_max"] == bound
            assert len(sizes) + len(data) <= bound and head["count"] * 500 < bound
            offset, seen = head["next_offset"], seen + head["count"]
        assert seen == 200
    finally:
        s.shutdown()


def _frames(records: Records, req: dict) -> list[dict]:
    """The headers of every answer of a PullRecordsStream of ``req`` (in process)."""
    async def collect():
        out = []
        async for raw in records.stream(json.dumps(req).encode(), _Context(None)):
            out.append(unframe(raw)[0])
        return out
    return asyncio.run(asyncio.wait_for(collect(), PATIENCE_S))


def test_a_stream_goes_from_answer_to_answer_across_holes_and_stops_where_it_should(tmp_path):
    s = _store(tmp_path)
    try:
        s.create_topic("H", 1)
        s.put_batch([Message("H", b"h-%d" % i) for i in range(20)])
        lose_message(s, "H", 0, 10)                                # a lost message: a hole at 10
        records = Records(s, asyncio.Event(), 4 << 20)
        heads = _frames(records, {"topic": "H", "queue_id": 0, "offset": 0, "max_count": 4, "end": 15})
        assert heads[-1]["next_offset"] == 15 and sum(h["count"] for h in heads) == 14     # all but the hole
        assert all(h["code"] == Code.OK for h in heads) and len(heads) == 4
        heads = _frames(records, {"topic": "H", "queue_id": 0, "offset": 10, "max_count": 1, "end": 13})
        assert [(h["code"], h["next_offset"]) for h in heads] == [(Code.MESSAGE_NOT_FOUND, 11), (Code.OK, 12),
                                                                  (Code.OK, 13)]
        heads = _frames(records, {"topic": "H", "queue_id": 0, "offset": 12, "max_count": 100})   # to the end
        assert [(h["code"], h["count"], h["next_offset"]) for h in heads] == [(Code.OK, 8, 20)]
        heads = _frames(records, {"topic": "H", "queue_id": 0, "offset": 20})                     # at the end
        assert [(h["code"], h["status"]) for h in heads] == [(Code.MESSAGE_NOT_FOUND, "OFFSET_OVERFLOW_ONE")]
        for req, code in (({"topic": "H", "queue_id": 0, "offset": 99}, Code.ILLEGAL_OFFSET),
                          ({"topic": "H", "queue_id": 3, "offset": 0}, Code.TOPIC_NOT_FOUND),
                          ({"topic": "H"}, Code.BAD_REQUEST)):
            assert [h["code"] for h in _frames(records, req)] == [code]                    # one answer, the end
    finally:
        s.shutdown()


def test_a_stream_that_waits_goes_on_when_records_arrive(tmp_path):
    """With wait_ms the stream long-polls at the queue's end and goes on (here until ``end``)."""
    s = _store(tmp_path)
    try:
        s.create_topic("W", 1)
        s.put_batch([Message("W", b"w-0")])

        async def collect():
            arrivals = asyncio.Event()
            records = Records(s, arrivals, 4 << 20)
            req = json.dumps({"topic": "W", "queue_id": 0, "offset": 0, "wait_ms": 60_000, "end": 3}).encode()
            out = []
            async for raw in records.stream(req, _Context(None)):
                head, _sizes, _data = unframe(raw)
                out.append((head["code"], head["next_offset"]))
                if len(out) == 1:           # answered what there was: the next pull waits for this put
                    s.put_batch([Message("W", b"w-1"), Message("W", b"w-2")])
                    arrivals.set()
            return out
        assert asyncio.run(asyncio.wait_for(collect(), PATIENCE_S)) == [(Code.OK, 1), (Code.OK, 3)]
    finally:
        s.shutdown()
