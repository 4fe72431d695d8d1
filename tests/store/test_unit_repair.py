"""store/unit_repair.py through the store's read paths, on real files: a damaged consume-queue unit
whose record is intact in the commit log costs no message (get and get_raw serve the record from the
log, in its place); a record that is itself damaged is still never served (skipped, counted)."""

from __future__ import annotations

import asyncio
import errno
import glob
import os
import struct
import threading

import pytest

from tidemq.io import OsFileIO
from tidemq.store import Message
from tidemq.store.consume_queue import UNIT
from tidemq.store.types import GetStatus

N = 10


def _filled(make_config, open_store):
    cfg = make_config()
    s = open_store(cfg)
    s.create_topic("T", 2)
    s.create_topic("Other", 1)
    for i in range(N):
        assert s.put(Message("T", b"b%d" % i, queue_id=0)).ok
        assert s.put(Message("Other", b"o%d" % i, queue_id=0)).ok
    other = s.get("G", "Other", 0, 4).messages[0].commitlog_offset
    s.shutdown()
    return cfg, other


def _damage_unit(cfg, q: int, unit: bytes) -> None:
    path = glob.glob(os.path.join(cfg.root_dir, "consumequeue", "T", "0", "*"))[0]
    with open(path, "r+b") as f:
        f.seek(q * 20)
        f.write(unit)


def _bodies_by_get(s) -> list[bytes]:
    out, off = [], 0
    for _ in range(4 * N):
        r = s.get("G", "T", 0, off, max_count=3)
        out += [m.body for m in r.messages]
        if r.next_offset >= N:
            break
        off = r.next_offset
    return out


def _bodies_by_get_raw(s) -> list[bytes]:
    out, off = [], 0
    for _ in range(4 * N):
        r = s.get_raw("T", 0, off, max_count=3)
        if r.records is not None:
            sizes, data = r.records
            at = 0
            for size in sizes:
                out.append(bytes(data[at:at + int(size)]))
                at += int(size)
        if r.next_offset >= N:
            break
        off = r.next_offset
    return out


DAMAGE = {
    "a stranger": lambda other: UNIT.pack(other, 100, 0),            # another topic's intact record
    "past the log": lambda other: UNIT.pack(1 << 40, 120, 0),
    "negative": lambda other: struct.pack(">qiq", -12345, 99, 7),
    "not a hole": lambda other: UNIT.pack(77, 0, 3),
    "mid-record": lambda other: UNIT.pack(13, 114, 0),
    "zeros": lambda other: bytes(20),                                # a page of zeros: read as a hole
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
@pytest.mark.parametrize("path", ["get", "get_raw"])
def test_a_damaged_unit_whose_record_is_intact_costs_no_message(make_config, open_store, kind, path):
    cfg, other = _filled(make_config, open_store)
    _damage_unit(cfg, 2, DAMAGE[kind](other))
    s = open_store(cfg)
    if path == "get":
        assert _bodies_by_get(s) == [b"b%d" % i for i in range(N)]
    else:
        got = _bodies_by_get_raw(s)
        assert len(got) == N and all(b"b%d" % i in r for i, r in enumerate(got)), got
    assert s.reader.repair.found_again == 1 and s.stats()["records_damaged"] == 0
    assert all(b"o" not in b for b in _bodies_by_get(s)), "never another topic's message"


def test_a_record_that_is_itself_damaged_is_still_never_served(make_config, open_store):
    cfg, _ = _filled(make_config, open_store)
    s = open_store(cfg)
    phys = s.get("G", "T", 0, 2).messages[0].commitlog_offset
    s.shutdown()
    seg = sorted(glob.glob(os.path.join(cfg.root_dir, "commitlog", "*")))[0]
    with open(seg, "r+b") as f:                          # its body: its CRC fails
        f.seek(phys + 100)
        f.write(b"\xff\xfe")
    s = open_store(cfg)
    assert _bodies_by_get(s) == [b"b%d" % i for i in range(N) if i != 2]
    assert s.reader.repair.not_found == 1 and s.reader.repair.found_again == 0
    assert _bodies_by_get(s) == [b"b%d" % i for i in range(N) if i != 2]
    assert s.reader.repair.not_found == 1, "not looked for again"
    assert s.stats()["records_damaged"] == 2, "counted at each read, as before"


@pytest.mark.parametrize("path", ["get", "get_raw"])
def test_a_stretch_of_zeroed_units_costs_no_message(make_config, open_store, path):
    """A page of a consume-queue file read back as zeros (a torn write at a power loss) reads as holes:
    each hole's record is looked for in the log, once, and served."""
    cfg, _ = _filled(make_config, open_store)
    _damage_unit(cfg, 3, bytes(20 * 5))                  # units 3..7
    s = open_store(cfg)
    got = _bodies_by_get(s) if path == "get" else _bodies_by_get_raw(s)
    assert len(got) == N and all(b"b%d" % i in r for i, r in enumerate(got)), got
    assert s.reader.repair.found_again == 5


@pytest.mark.parametrize("path", ["get", "get_raw"])
def test_a_unit_found_again_is_not_put_over_a_new_queue_of_that_name(make_config, open_store, path):
    """What was found again stands for the queue file as it was: a topic deleted and made again (its
    queues start empty, new records at the same queue offsets) is read from its own units, never
    served the deleted topic's record the old damaged unit stood for."""
    cfg, other = _filled(make_config, open_store)
    _damage_unit(cfg, 2, DAMAGE["a stranger"](other))
    s = open_store(cfg)
    assert _bodies_by_get(s) == [b"b%d" % i for i in range(N)]
    assert s.reader.repair.found_again == 1
    s.delete_topic("T")
    s.create_topic("T", 2)
    for i in range(N):
        assert s.put(Message("T", b"new%d" % i, queue_id=0)).ok
    got = _bodies_by_get(s) if path == "get" else _bodies_by_get_raw(s)
    assert len(got) == N and all(b"new%d" % i in r for i, r in enumerate(got)), got


@pytest.mark.parametrize("path", ["get", "get_raw"])
def test_a_stretch_of_holes_whose_records_are_gone_costs_one_walk_of_the_log(make_config, open_store, path):
    """Holes whose records are not in the log (a replica's damaged stretch copied as it is, a rebuild's
    marks), more of them than PREVIOUS_UNITS_MAX: the walk for the first stops at the queue's next
    record, which shows every one between absent; none is walked for again (each walked from the log's
    start before: seconds of CPU per hole on a log of a few tens of MiB)."""
    cfg = make_config()
    s = open_store(cfg)
    s.create_topic("T", 1)
    n, holes = 120, range(10, 110)
    for i in range(n):
        assert s.put(Message("T", b"b%d" % i, queue_id=0)).ok
    phys = {i: s.get("G", "T", 0, i, max_count=1).messages[0].commitlog_offset for i in holes}
    s.shutdown()
    seg = min(glob.glob(os.path.join(cfg.root_dir, "commitlog", "*")))
    with open(seg, "r+b") as f:                          # their records damaged: not in the log
        for i in holes:
            f.seek(phys[i] + 100)
            f.write(b"\xff\xfe")
    _damage_unit(cfg, holes[0], bytes(20 * len(holes)))
    s = open_store(cfg)
    walks = []
    iter_records = s.commit_log.iter_records
    s.commit_log.iter_records = lambda start: walks.append(start) or iter_records(start)
    out, off = [], 0
    for _ in range(4 * n):
        if path == "get":
            r = s.get("G", "T", 0, off, max_count=32)
            out += [m.body for m in r.messages]
        else:
            r = s.get_raw("T", 0, off, max_count=32)
            if r.records is not None:
                sizes, data = r.records
                ends = [int(e) for e in sizes.cumsum()]
                out += [bytes(data[e - int(z):e]) for e, z in zip(ends, sizes)]
        if r.next_offset >= n:
            break
        off = r.next_offset
    assert len(out) == n - len(holes) and all(b"b%d" % i in m for i, m in
                                               zip([i for i in range(n) if i not in holes], out)), out
    assert len(walks) == 1 and s.reader.repair.not_found == len(holes)


class _HeldWalk(OsFileIO):
    """Real files; the read-ahead a walk aside asks for each stretch it reads is held until ``release``."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def read_ahead(self, mapping, offset: int, length: int) -> None:
        self.entered.set()
        assert self.release.wait(60), "hang bound"
        super().read_ahead(mapping, offset, length)


@pytest.mark.parametrize("path", ["get", "get_raw"])
def test_a_walk_runs_aside_while_the_event_loop_serves(make_config, open_store, path):
    """walk_units_aside (the broker's): a read on an event loop that needs a damaged unit's walk of the
    log answers "not readable yet" (OFFSET_OVERFLOW_ONE at its offset) at once; the walk runs on its
    own thread (held here in the middle) while the loop serves other reads and puts; once it is
    kept, the waiting long poll is woken and the read serves the record, as an inline walk does."""
    cfg, other = _filled(make_config, open_store)
    _damage_unit(cfg, 2, DAMAGE["a stranger"](other))
    fio = _HeldWalk()
    s = open_store(cfg, fio=fio)
    s.walk_units_aside()

    def read(off):
        return s.get("G", "T", 0, off, max_count=1) if path == "get" else s.get_raw("T", 0, off, max_count=1)

    async def serve():
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()
        r = read(2)
        assert (r.status, r.next_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 2)
        assert await asyncio.to_thread(fio.entered.wait, 60), "the walk started aside"
        # the walk is held: the loop goes on serving
        assert [m.body for m in s.get("G", "Other", 0, 0, max_count=N).messages] == [b"o%d" % i for i in range(N)]
        assert s.put(Message("T", b"more", queue_id=1)).ok
        assert read(2).status is GetStatus.OFFSET_OVERFLOW_ONE
        assert s.notify_readable(lambda: loop.call_soon_threadsafe(woken.set)), "woken when the walk is kept"
        fio.release.set()
        await asyncio.wait_for(woken.wait(), 60)
        return read(2)

    r = asyncio.run(serve())
    if path == "get":
        assert [m.body for m in r.messages] == [b"b2"]
    else:
        assert r.status is GetStatus.FOUND and b"b2" in bytes(r.records[1])
    got = _bodies_by_get(s) if path == "get" else _bodies_by_get_raw(s)
    assert len(got) == N and all(b"b%d" % i in r for i, r in enumerate(got)), got
    assert s.reader.repair.found_again == 1 and s.reader.repair.not_found == 0
    assert s.stats()["records_damaged"] == 0


@pytest.mark.parametrize("path", ["get", "get_raw"])
def test_a_unit_pointing_at_another_queues_record_is_said_as_such_not_as_a_crc_failure(make_config, open_store,
                                                                                        path, caplog):
    """A damaged unit pointing at an intact record of another topic (its own record not in the log)
    is skipped and counted as before, and the operator reads what it is: a damaged unit pointing at
    another record -- not "fails its CRC" (the record it points at is intact)."""
    cfg, other = _filled(make_config, open_store)
    s = open_store(cfg)
    phys = s.get("G", "T", 0, 2).messages[0].commitlog_offset
    s.shutdown()
    seg = sorted(glob.glob(os.path.join(cfg.root_dir, "commitlog", "*")))[0]
    with open(seg, "r+b") as f:                          # its own record gone (damaged)
        f.seek(phys + 100)
        f.write(b"\xff\xfe")
    _damage_unit(cfg, 2, DAMAGE["a stranger"](other))
    s = open_store(cfg)
    caplog.set_level("WARNING", "tidemq.store")
    got = _bodies_by_get(s) if path == "get" else _bodies_by_get_raw(s)
    assert len(got) == N - 1 and all(b"b%d" % i in r for i, r in zip([i for i in range(N) if i != 2], got))
    said = [r.getMessage() for r in caplog.records if "queue offset 2" in r.getMessage()]
    assert len(said) == 1 and "points at commit-log offset %d" % other in said[0], said
    assert "CRC" not in said[0]
    assert s.reader.damage.strangers == 1 and s.stats()["records_damaged"] == 1


@pytest.mark.parametrize("path", ["get", "get_raw"])
def test_a_walk_aside_keeps_what_was_read_before_the_damaged_unit(make_config, open_store, path):
    """A read whose batch meets a damaged unit whose walk runs aside answers the messages before it
    (next offset: the damaged unit's), not "not readable yet" for the whole batch; the next read, at
    the damaged unit, waits for the walk and is served its record."""
    cfg, other = _filled(make_config, open_store)
    _damage_unit(cfg, 2, DAMAGE["a stranger"](other))
    fio = _HeldWalk()
    s = open_store(cfg, fio=fio)
    s.walk_units_aside()

    def read(off):
        return s.get("G", "T", 0, off, max_count=8) if path == "get" else s.get_raw("T", 0, off, max_count=8)

    try:
        r = read(0)
        assert (r.status, r.next_offset) == (GetStatus.FOUND, 2), r
        if path == "get":
            assert [m.body for m in r.messages] == [b"b0", b"b1"]
        else:
            assert len(r.records[0]) == 2 and b"b0" in bytes(r.records[1]) and b"b1" in bytes(r.records[1])
        r = read(2)
        assert (r.status, r.next_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 2)
        assert fio.entered.wait(60), "the walk started aside"
    finally:
        fio.release.set()
    woken = threading.Event()
    s.notify_readable(woken.set, r.walking)
    assert woken.wait(60)
    got = _bodies_by_get(s) if path == "get" else _bodies_by_get_raw(s)
    assert len(got) == N and all(b"b%d" % i in r for i, r in enumerate(got)), got


class _FailingWalk(OsFileIO):
    """Real files; the read-ahead of a walk aside fails (EIO) while ``failing``; counts the walks."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = True
        self.walks = 0

    def read_ahead(self, mapping, offset: int, length: int) -> None:
        self.walks += 1
        if self.failing:
            raise OSError(errno.EIO, "read-ahead failed")
        super().read_ahead(mapping, offset, length)


@pytest.mark.parametrize("path", ["get", "get_raw"])
def test_a_walk_aside_that_failed_is_not_walked_again_at_every_read(make_config, open_store, path):
    """A walk aside that raises is remembered for its unit: the reads of it raise WalkFailed (as the
    walk inline raises to its read) instead of asking for the walk again at each read (a long poll
    walked up to 256 MiB per read until its deadline); after FAILED_FOR_S (the store's clock) it is
    walked again, and served once the walk works."""
    from tidemq.io import ManualClock
    from tidemq.store.unit_repair import FAILED_FOR_S, WalkFailed

    cfg, other = _filled(make_config, open_store)
    _damage_unit(cfg, 2, DAMAGE["a stranger"](other))
    fio = _FailingWalk()
    clock = ManualClock()
    s = open_store(cfg, fio=fio, clock=clock)
    s.walk_units_aside()

    def read(off):
        return s.get("G", "T", 0, off, max_count=1) if path == "get" else s.get_raw("T", 0, off, max_count=1)

    def walked(r):
        done = threading.Event()
        s.notify_readable(done.set, r.walking)
        assert done.wait(60), "hang bound"

    r = read(2)
    assert r.status is GetStatus.OFFSET_OVERFLOW_ONE
    walked(r)
    assert fio.walks == 1
    for _ in range(5):
        with pytest.raises(WalkFailed) as e:
            read(2)
        assert isinstance(e.value.__cause__, OSError)
    r = s.get("G", "T", 0, 0, max_count=8) if path == "get" else s.get_raw("T", 0, 0, max_count=8)
    assert (r.status, r.next_offset) == (GetStatus.FOUND, 2), "what is before it is served"
    assert fio.walks == 1, "not walked again"
    assert s.reader.repair.walked == 1
    fio.failing = False
    clock.advance(FAILED_FOR_S + 1)
    r = read(2)
    assert r.status is GetStatus.OFFSET_OVERFLOW_ONE
    walked(r)
    assert fio.walks == 2
    got = _bodies_by_get(s) if path == "get" else _bodies_by_get_raw(s)
    assert len(got) == N and all(b"b%d" % i in r for i, r in enumerate(got)), got
