"""store/record_loop.py: the append's per-record loop, through each implementation there is (the
Python twin, and the compiled one when built): records packed one after the other that check and
decode, each at its queue's next offset (round-robin over the topic's write ids when none is given),
its consume-queue unit and index keys collected, its outcome in the result arrays; the loop stops
before a record that would pass the limit, and at an item it cannot pack, with nothing of it
written. (The two implementations held to the same bytes on random batches: tests/test_accel.py.)"""

from array import array

import pytest

from tidemq.record import codec
from tidemq.store import record_loop
from tidemq.store.consume_queue import UNIT
from tidemq.store.topics import TopicState

HOST = codec.encode_host("127.0.0.1:10911")
BASE = 1 << 30
NOW_MS = 1_700_000_000_123
IMPLS = {"python": record_loop.py_append}
if record_loop.append is not record_loop.py_append:
    IMPLS["selected"] = record_loop.append


@pytest.fixture(params=sorted(IMPLS))
def append(request):
    return IMPLS[request.param]


def topic(name="T", queues=3, offsets=None):
    t = TopicState(name, queues)
    t.queues = [f"{name}/{q}" for q in range(queues)]     # any hashable stands for a consume queue
    t.next_offsets = list(offsets or [0] * queues)
    return t


def item(i, t, body=b"body", qid=None, keys=None, uniq=None, tags_hash=0):
    props = codec.encode_properties({"UNIQ_KEY": uniq} if uniq else {}) + codec.RECORD_CRC_TAIL
    return (i, body, t, props, qid, 5, HOST, 0, 0, 0, 0, None, tags_hash, keys, uniq, None)


class Run:
    def __init__(self, n, size=1 << 16):
        self.buf = bytearray(size)
        self.units, self.index = {}, []
        self.res = (array("q", [-1] * n), array("i", [-1] * n), array("i", [-1] * n), array("q", [-1] * n), [None] * n)

    def __call__(self, append, batch, start=0, pos=0, limit=None):
        return append(batch, start, self.buf, pos, len(self.buf) if limit is None else limit, BASE, NOW_MS, HOST,
                      self.units, self.index, *self.res)

    def records(self, end):
        out, pos = [], 0
        while pos < end:
            kind, size = codec.check_record(self.buf, pos, end, True)
            assert kind == codec.REC_OK, (pos, kind)
            out.append(codec.decode_record(self.buf, pos, size))
            pos += size
        return out


def test_records_are_packed_in_order_and_check_and_decode(append):
    t = topic()
    batch = [item(i, t, body=b"m%d" % i * (i + 1), qid=i % 2) for i in range(6)]
    run = Run(6)
    k, pos, err = run(append, batch)
    assert (k, err) == (6, None)
    recs = run.records(pos)
    assert [r.body for r in recs] == [b"m%d" % i * (i + 1) for i in range(6)]
    assert [(r.queue_id, r.queue_offset) for r in recs] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    assert [r.commitlog_offset for r in recs] == list(run.res[0])
    assert all(r.store_timestamp_ms == NOW_MS for r in recs)
    assert recs[0].commitlog_offset == BASE and sum(run.res[1]) == pos
    assert t.next_offsets == [3, 3, 0]


def test_without_a_queue_id_puts_go_round_robin_over_the_write_ids(append):
    t = topic(queues=4, offsets=[10, 20, 30, 40])
    t.write_ids = (1, 3)
    t.rr = 1
    run = Run(4)
    k, pos, err = run(append, [item(i, t) for i in range(4)])
    assert (k, err) == (4, None)
    assert list(run.res[2]) == [3, 1, 3, 1] and list(run.res[3]) == [40, 20, 41, 21]
    assert t.rr == 5 and t.next_offsets == [10, 22, 30, 42]


def test_units_and_index_keys_are_collected_per_queue(append):
    t = topic(queues=2, offsets=[7, 0])
    batch = [item(0, t, qid=0, keys=["k0"], uniq="U0", tags_hash=11), item(1, t, qid=0, tags_hash=12),
             item(2, t, qid=1, keys=["k2", "x"])]
    run = Run(3)
    assert run(append, batch)[0] == 3
    phys, size = list(run.res[0]), list(run.res[1])
    assert run.units["T/0"][0] == 7 and bytes(run.units["T/0"][1]) == \
        UNIT.pack(phys[0], size[0], 11) + UNIT.pack(phys[1], size[1], 12)
    assert run.units["T/1"][0] == 0 and bytes(run.units["T/1"][1]) == UNIT.pack(phys[2], size[2], 0)
    assert run.index == [(["k0"], phys[0]), (["k2", "x"], phys[2])]
    assert run.res[4] == ["U0", None, None]


def test_it_stops_before_a_record_that_would_pass_the_limit(append):
    t = topic()
    batch = [item(i, t, body=b"x" * 100, qid=0) for i in range(5)]
    one = codec.record_size(100, 1, len(batch[0][3]))
    run = Run(5)
    k, pos, err = run(append, batch, limit=2 * one + one - 1)
    assert (k, pos, err) == (2, 2 * one, None)
    assert t.next_offsets[0] == 2 and list(run.res[3])[2:] == [-1, -1, -1]
    k, pos2, err = run(append, batch, start=2, pos=0)          # the rest, as into the next segment
    assert (k, pos2, err) == (5, 3 * one, None) and t.next_offsets[0] == 5


@pytest.mark.parametrize("bad", ["queue", "write_ids", "empty"])
def test_an_item_that_cannot_be_packed_stops_the_loop_with_nothing_of_it_written(append, bad):
    t = topic(queues=2)
    good = item(0, t, qid=1)
    if bad == "queue":
        wrong = item(1, t, qid=2)
    else:
        t.write_ids = (5,) if bad == "write_ids" else ()
        wrong = item(1, t)
    run = Run(3)
    k, pos, err = run(append, [good, wrong, item(2, t, qid=0)])
    assert k == 1 and isinstance(err, ValueError)
    assert len(run.records(pos)) == 1 and bytes(run.buf[pos:pos + 64]) == b"\0" * 64
    assert t.next_offsets == [0, 1] and t.rr == 0 and list(run.res[0])[1:] == [-1, -1]
