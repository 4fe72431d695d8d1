"""Consumers are served only what cannot be taken back (issue 27.2), through the broker's read
paths without a server: PullMessage (Pull), PullRecords (Records) and ReceiveMessage
(Consumption) over a real SYNC_FLUSH store whose commit-log fsync the test holds (the FileIO
seam). The issue's reproduction (every message pulled 1.5 s before its send was answered) without
time: while the fsync is held no long poll returns the message, an arrival does not make them
spin, and once the fsync ends every one of them gets it, durable."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import threading

from tidemq.broker.consume.group_offsets import GroupOffsets
from tidemq.broker.consume.pop_state import PopState
from tidemq.broker.consume.pull import Pull
from tidemq.broker.consume.pull_records import Records
from tidemq.broker.consume.receive import Consumption
from tidemq.config import BrokerConfig
from tidemq.io import OsFileIO
from tidemq.protocol.pull_frame import decode_response, encode_request
from tidemq.protocol.stubs import pb, spb
from tidemq.store import Message, MessageStore, StoreConfig

from ...support.wait import PATIENCE_S, wait_until


class HeldFsyncs(OsFileIO):
    """Commit-log fsyncs wait for ``gate`` while ``held`` (``entered``: one waits)."""

    def __init__(self) -> None:
        self.paths: dict = {}
        self.held = False
        self.gate = threading.Event()
        self.entered = threading.Event()

    def open(self, path, create=False, readonly=False):
        h = super().open(path, create, readonly)
        self.paths[h] = path
        return h

    def fsync(self, handle) -> None:
        if self.held and "commitlog" in self.paths.get(handle, ""):
            self.entered.set()
            assert self.gate.wait(2 * PATIENCE_S), "the test never let the fsync end"
        super().fsync(handle)


class Context:
    def time_remaining(self):
        return 3600.0


def test_no_consumer_gets_a_message_before_its_fsync_ended_and_none_spins(tmp_path):
    fio = HeldFsyncs()
    root = str(tmp_path / "store")
    store = MessageStore(StoreConfig(root_dir=root, flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=600_000,
                                     segment_size_bytes=256 << 10, index_slots=1000, index_entries=4000,
                                     preallocate_next_segment=False), fio=fio).start()
    pop = PopState(store.fio, root)
    pop.open()
    try:
        store.create_topic("T", 1)
        consumption = Consumption(store, BrokerConfig(), pop)
        offsets = GroupOffsets(store.fio, root)
        offsets.load()
        pulls = Pull(store, offsets, consumption.arrivals)
        records = Records(store, consumption.arrivals, 64 << 20)
        fetches = [0]
        real_get, real_raw = store.get, store.get_raw

        def counting(fn):
            def call(*a, **k):
                fetches[0] += 1
                return fn(*a, **k)
            return call

        store.get, store.get_raw = counting(real_get), counting(real_raw)
        mq = pb.MessageQueue(topic=pb.Resource(name="T"), id=0)
        at_durable: dict[str, int] = {}

        async def collect(name, gen):
            out = [r async for r in gen]
            at_durable[name] = store.commit_log.flushed_offset
            return out

        async def pull_records():
            raw = await records.pull(encode_request("T", 0, 0, wait_ms=600_000), Context())
            at_durable["records"] = store.commit_log.flushed_offset
            return raw

        async def scenario():
            loop = asyncio.get_running_loop()
            polls = [
                asyncio.ensure_future(collect("pull", pulls.pull(spb.PullMessageRequest(
                    group=pb.Resource(name="g"), message_queue=mq, offset=0, batch_size=8,
                    long_polling_timeout={"seconds": 600}), Context()))),
                asyncio.ensure_future(pull_records()),
                asyncio.ensure_future(collect("receive", consumption.receive(spb.ReceiveMessageRequest(
                    group=pb.Resource(name="g"), message_queue=pb.MessageQueue(topic=pb.Resource(name="T")),
                    batch_size=8, invisible_duration={"seconds": 30}, long_polling_timeout={"seconds": 600}),
                    Context()))),
            ]
            while fetches[0] < 3:                   # each looked once and waits (nothing else runs)
                await asyncio.sleep(0)
            fio.held = True
            sent = loop.run_in_executor(None, lambda: store.put(Message("T", b"m0")))
            try:
                assert await loop.run_in_executor(None, fio.entered.wait, PATIENCE_S), "the fsync never began"
                assert store.max_offset("T", 0) == 1 and store.readable_max_offset("T", 0) == 0
                consumption.notify_arrival()            # an arrival wakes them (another send's, an ack)
                for _ in range(2000):                   # they look, find nothing readable, wait for the store
                    if len(store.readable.waiters) >= 3 or any(p.done() for p in polls):
                        break
                    await asyncio.sleep(0)
                assert not any(p.done() for p in polls) and not sent.done(), "served before its fsync ended"
                assert len(store.readable.waiters) >= 3
                looked = fetches[0]
                for _ in range(200):
                    await asyncio.sleep(0)
                assert fetches[0] == looked, "a woken poll finding nothing readable must wait, not spin"
                assert not any(p.done() for p in polls), "served before its fsync ended"
            finally:
                fio.held = False
                fio.gate.set()
            r = await asyncio.wait_for(sent, PATIENCE_S)
            return r, await asyncio.wait_for(asyncio.gather(*polls), PATIENCE_S)

        r, (pulled, raw, received) = asyncio.run(scenario())
        assert r.ok
        end = r.commitlog_offset + r.size
        assert [x.message.body for x in pulled if x.HasField("message")] == [b"m0"]
        head, sizes, _data = decode_response(raw)
        assert head["count"] == 1 and len(sizes) == 4       # one i32 size
        assert [x.message.body for x in received if x.HasField("message")] == [b"m0"]
        assert all(at >= end for at in at_durable.values()), ("served before durable", at_durable, end)
    finally:
        pop.close()
        store.shutdown()


def test_query_offset_end_is_the_readable_end(tmp_path):
    fio = HeldFsyncs()
    root = str(tmp_path / "store")
    store = MessageStore(StoreConfig(root_dir=root, flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=600_000,
                                     segment_size_bytes=256 << 10, index_slots=1000, index_entries=4000,
                                     preallocate_next_segment=False), fio=fio).start()
    try:
        store.create_topic("T", 1)
        assert store.put(Message("T", b"a")).ok
        offsets = GroupOffsets(store.fio, root)
        offsets.load()
        pulls = Pull(store, offsets, asyncio.Event())
        req = spb.QueryOffsetRequest(message_queue=pb.MessageQueue(topic=pb.Resource(name="T"), id=0),
                                     query_offset_policy=pb.QueryOffsetPolicy.END)
        fio.held = True
        t = threading.Thread(target=lambda: store.put(Message("T", b"b")))
        t.start()
        try:
            assert fio.entered.wait(PATIENCE_S)
            wait_until(lambda: store.max_offset("T", 0) == 2, "the record to be dispatched")
            assert pulls.query_offset(req).offset == 1, "never past what a consumer can read"
        finally:
            fio.held = False
            fio.gate.set()
        t.join(PATIENCE_S)
        assert pulls.query_offset(req).offset == 2
    finally:
        store.shutdown()


class NoDeadline:
    def time_remaining(self):
        return None


@contextlib.contextmanager
def unit_two_damaged(tmp_path, fio):
    """A store of five messages on T (b0..b4) whose consume-queue unit 2 points at another topic's
    intact record (its own is intact in the log: a walk finds it), opened on ``fio`` with damaged
    units walked aside (store/unit_repair.py); (store, pop state, root), both closed at the end."""
    import glob
    import os

    from tidemq.store.consume_queue import UNIT

    root = str(tmp_path / "store")
    cfg = StoreConfig(root_dir=root, segment_size_bytes=256 << 10, index_slots=1000, index_entries=4000,
                      preallocate_next_segment=False)
    store = MessageStore(cfg).start()
    store.create_topic("T", 1)
    store.create_topic("O", 1)
    for i in range(5):
        assert store.put(Message("T", b"b%d" % i)).ok
    other = store.put(Message("O", b"o0")).commitlog_offset
    store.shutdown()
    [path] = glob.glob(os.path.join(root, "consumequeue", "T", "0", "*"))
    with open(path, "r+b") as f:
        f.seek(2 * UNIT.size)
        f.write(UNIT.pack(other, 100, 0))
    store = MessageStore(cfg, fio=fio).start()
    pop = PopState(store.fio, root)
    pop.open()
    try:
        store.walk_units_aside()
        yield store, pop, root
    finally:
        pop.close()
        store.shutdown()


def walk_failed(store) -> None:
    """Unit 2's walk asked for and ended (it fails: FailingWalk), so that its reads raise WalkFailed."""
    r = store.get("g", "T", 0, 2)
    done = threading.Event()
    store.notify_readable(done.set, r.walking)
    assert done.wait(PATIENCE_S), "the walk ended (failed)"


class HeldWalk(OsFileIO):
    """Real files; a damaged unit's walk aside (store/unit_repair.py) held in its first read-ahead
    until ``release``."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def read_ahead(self, mapping, offset: int, length: int) -> None:
        self.entered.set()
        assert self.release.wait(2 * PATIENCE_S), "the test never let the walk end"
        super().read_ahead(mapping, offset, length)


def test_a_walk_aside_serves_what_is_before_it_and_a_pull_that_asked_not_to_wait_does_not(tmp_path):
    """A damaged consume-queue unit (queue offset 2) whose record is intact in the log, its walk aside
    held: PullMessage and ReceiveMessage from 0 are served the two messages before it (next offset 2),
    not an empty answer; a PullMessage at 2 that asked not to wait (long polling 0 s, no call deadline)
    is answered at once (nothing yet, next offset 2: read again), not held for the walk (60 s; a call
    with a deadline still waits for it within its time, as tidemq.client's pulls rely on); once the
    walk is kept, the pull at 2 is served the record."""
    fio = HeldWalk()
    with unit_two_damaged(tmp_path, fio) as (store, pop, root):
        consumption = Consumption(store, BrokerConfig(), pop)
        offsets = GroupOffsets(store.fio, root)
        offsets.load()
        pulls = Pull(store, offsets, consumption.arrivals)
        mq = pb.MessageQueue(topic=pb.Resource(name="T"), id=0)

        def pull(offset):
            return pulls.pull(spb.PullMessageRequest(group=pb.Resource(name="g"), message_queue=mq, offset=offset,
                                                     batch_size=8, long_polling_timeout={"seconds": 0}), NoDeadline())

        async def scenario():
            first = [r async for r in pull(0)]
            received = [r async for r in consumption.receive(spb.ReceiveMessageRequest(
                group=pb.Resource(name="g"), message_queue=pb.MessageQueue(topic=pb.Resource(name="T")),
                batch_size=8, invisible_duration={"seconds": 30}, long_polling_timeout={"seconds": 0}),
                NoDeadline())]
            assert await asyncio.to_thread(fio.entered.wait, PATIENCE_S), "the walk started aside"
            at_once = asyncio.ensure_future(collect(pull(2)))
            for _ in range(2000):                # it answers, or it waits for the walk (nothing else runs)
                if at_once.done() or store.reader.repair._waiters:
                    break
                await asyncio.sleep(0)
            held = not at_once.done()
            fio.release.set()
            return first, received, held, await asyncio.wait_for(at_once, PATIENCE_S)

        async def collect(gen):
            return [r async for r in gen]

        try:
            first, received, held, at_two = asyncio.run(scenario())
        finally:
            fio.release.set()
        assert [r.message.body for r in first if r.HasField("message")] == [b"b0", b"b1"]
        assert [r.next_offset for r in first if r.HasField("next_offset")] == [2]
        assert [r.message.body for r in received if r.HasField("message")] == [b"b0", b"b1"]
        assert not held, "a pull that asked not to wait waited for the walk"
        assert not any(r.HasField("message") for r in at_two)
        assert [r.next_offset for r in at_two if r.HasField("next_offset")] == [2]
        done = threading.Event()
        store.notify_readable(done.set, 0)
        assert done.wait(PATIENCE_S), "the walk was kept"

        async def again():
            return await collect(pull(2))
        served = asyncio.run(again())
        assert [r.message.body for r in served if r.HasField("message")] == [b"b2", b"b3", b"b4"]


class FailingWalk(OsFileIO):
    """Real files; a damaged unit's walk aside (store/unit_repair.py) fails (EIO) at its read-ahead."""

    def read_ahead(self, mapping, offset: int, length: int) -> None:
        raise OSError(errno.EIO, "read-ahead failed")


def test_a_receive_meeting_a_unit_whose_walk_failed_hands_out_what_it_popped(tmp_path):
    """A damaged consume-queue unit (queue offset 2) whose walk aside failed (remembered: its reads
    raise WalkFailed): ReceiveMessage hands out the two messages before it, and a receive at it answers
    no message -- neither fails the call (after popping, which held what was popped invisible)."""
    with unit_two_damaged(tmp_path, FailingWalk()) as (store, pop, root):
        walk_failed(store)
        consumption = Consumption(store, BrokerConfig(), pop)
        req = spb.ReceiveMessageRequest(group=pb.Resource(name="g"), message_queue=pb.MessageQueue(
            topic=pb.Resource(name="T")), batch_size=8, invisible_duration={"seconds": 30},
            long_polling_timeout={"seconds": 0})

        async def receive():
            return [r async for r in consumption.receive(req, NoDeadline())]
        first = asyncio.run(receive())
        assert [r.message.body for r in first if r.HasField("message")] == [b"b0", b"b1"]
        second = asyncio.run(receive())
        assert not any(r.HasField("message") for r in second)
        assert pop.state("g", "T", 0).cursor == 2


def test_a_pull_meeting_a_unit_whose_walk_failed_is_answered_retry_there_and_said_once(tmp_path, caplog):
    """A damaged consume-queue unit (queue offset 2) whose walk aside failed (its reads raise WalkFailed
    for a while): PullMessage, PullRecords and PullRecordsStream at it answer INTERNAL_SERVER_ERROR (a
    code the clients retry) with next offset 2 (pull again there), not a failed call; said once per
    queue without a traceback, however often it is pulled."""
    import logging

    with unit_two_damaged(tmp_path, FailingWalk()) as (store, pop, root):
        walk_failed(store)
        consumption = Consumption(store, BrokerConfig(), pop)
        offsets = GroupOffsets(store.fio, root)
        offsets.load()
        pulls = Pull(store, offsets, consumption.arrivals)
        records = Records(store, consumption.arrivals, 64 << 20)
        mq = pb.MessageQueue(topic=pb.Resource(name="T"), id=0)

        async def scenario():
            out = []
            for _ in range(3):
                out.append([r async for r in pulls.pull(spb.PullMessageRequest(
                    group=pb.Resource(name="g"), message_queue=mq, offset=2, batch_size=8,
                    long_polling_timeout={"seconds": 0}), NoDeadline())])
            raws = [await records.pull(encode_request("T", 0, 2), NoDeadline()) for _ in range(2)]
            streamed = [r async for r in records.stream(encode_request("T", 0, 2), NoDeadline())]
            return out, raws, streamed

        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tidemq.broker.consume.pull"):
            answers, raws, streamed = asyncio.run(scenario())
        for a in answers:
            assert [r.status.code for r in a if r.HasField("status")] == [pb.Code.INTERNAL_SERVER_ERROR]
            assert not any(r.HasField("message") for r in a)
            assert [r.next_offset for r in a if r.HasField("next_offset")] == [2]
        for raw in raws + streamed:
            head, _sizes, _data = decode_response(raw)
            assert (head["code"], head["next_offset"], head["count"]) == (pb.Code.INTERNAL_SERVER_ERROR, 2, 0)
        assert len(streamed) == 1
        said = [rec for rec in caplog.records if rec.name == "tidemq.broker.consume.pull"]
        assert len(said) == 2, "once for PullMessage, once for PullRecords"
        assert not any(rec.exc_info for rec in said)
