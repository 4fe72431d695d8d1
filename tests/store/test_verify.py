"""The store's self-check (MessageStore.check(), `tidemq verify`): counts what it walked, and names
a damaged record, a unit pointing at the wrong record, a unit pointing at nothing."""

from __future__ import annotations

from tidemq.store import Message
from tidemq.store.verify import CheckReport, check_store
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import MEMORY_ROOT, memory_config

SEG = 8 * 1024


def filled(stores, n=30):
    s = stores(memory_config(segment_size_bytes=SEG, topic_queues_default=2), FaultyFileIO())
    rs = [s.put(Message("T", b"m%02d" % i + b"x" * 500, keys=[f"k{i}"])) for i in range(n)]
    assert all(r.ok for r in rs)
    return s, rs


def test_a_healthy_store_checks_out_with_its_counts(stores):
    s, rs = filled(stores)
    seen = []
    rep = check_store(s, progress=lambda done, total: seen.append((done, total)))
    assert rep.ok and rep.problems == []
    assert (rep.records, rep.queues, rep.units) == (30, 2, 30)
    assert rep.segments == len(s.segments) > 1 and rep.bytes == sum(r.size for r in rs)
    assert rep.index_files == len(s.index.files) >= 1
    assert seen[-1][0] == seen[-1][1], "progress ends at the total"


def test_bit_rot_in_a_record_is_named(stores):
    s, rs = filled(stores)
    path = MEMORY_ROOT + "/commitlog/" + "0" * 20
    s.fio.files[path].data[rs[3].commitlog_offset + 200] ^= 0xFF       # a byte of the body
    rep = s.check()
    assert not rep.ok
    assert any(p.startswith(f"log: an invalid record at {rs[3].commitlog_offset}") for p in rep.problems), rep.problems


def test_units_pointing_at_the_wrong_record_or_at_nothing_are_named(stores):
    s, rs = filled(stores)
    cq = s.queues.get("T", 0)
    other = next(r for r in rs if r.queue_id == 1)
    cq.put_unit_checked(1, other.commitlog_offset, other.size, 0)
    cq.put_unit_checked(2, s.commitlog_max_offset + 100, 50, 0)
    rep = s.check()
    assert not rep.ok
    assert f"queue T/0: unit 1 points at T/1@{other.queue_offset}" in rep.problems
    assert any(p.startswith("queue T/0: unit 2 points at no record") for p in rep.problems), rep.problems


def test_a_report_keeps_at_most_a_thousand_problems():
    rep = CheckReport()
    for i in range(1500):
        rep.problem(f"p{i}")
    assert not rep.ok and len(rep.problems) == 1000 and rep.problems[-1] == "p999"
