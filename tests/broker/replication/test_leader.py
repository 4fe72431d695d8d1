"""broker/replication/leader.py: the leader's side of tidemq.Replication over a real gRPC server and
a real store. A stream begins with HELLO and is refused (REFUSE, with why) otherwise, when the
member may not be served, or when the follower's log goes past the leader's; else the log is sent
from the asked offset byte for byte, then each append as it happens, heartbeats in between; the
follower's ACKs are confirmations; the stream ends with REFUSE once the broker stops leading.
Epochs and State answer as the leader is.

The node is a stand-in holding what the server reads (role, epoch, store, acks, settings)."""

import asyncio
import os
import threading

import grpc
import pytest

from tidemq.protocol import replication as rp
from tidemq.store import Message, MessageStore, StoreConfig

from ...support.replication import LeaderNode, leader_server
from ...support.wait import wait_until

EPOCH = 3


@pytest.fixture
def store(tmp_path):
    s = MessageStore(StoreConfig(root_dir=str(tmp_path / "store"), segment_size_bytes=1 << 20, index_slots=100,
                                 index_entries=400)).start()
    s.create_topic("T", 2)
    assert s.put_batch([Message("T", os.urandom(300)) for _ in range(40)]).all_ok()
    yield s
    s.shutdown()


def log_bytes(store, end):
    with open(os.path.join(store.config.root_dir, "commitlog", "0" * 20), "rb") as f:
        return f.read(end)


def with_leader(node, check):
    """check(channel) on the loop of a gRPC server serving ReplicationServer(node)."""
    async def main():
        async with leader_server(node) as ep, grpc.aio.insecure_channel(ep) as ch:
            await check(ch)
    asyncio.run(main())


def open_stream(ch, first: bytes):
    """(call, queue of frames to send after ``first``: None ends the requests)."""
    sends: asyncio.Queue = asyncio.Queue()

    async def requests():
        yield first
        while (x := await sends.get()) is not None:
            yield x
    return ch.stream_stream(rp.STREAM_PATH)(requests(), timeout=120), sends


async def first_frame(ch, first: bytes) -> rp.Frame:
    call, sends = open_stream(ch, first)
    frames = [rp.decode(r) async for r in call]
    return frames[0]


@pytest.mark.parametrize("case", ["no hello", "not json", "may not serve", "log ahead"])
def test_a_stream_that_cannot_be_served_is_refused_with_why(store, case):
    node = LeaderNode(store, EPOCH, refusal="this broker follows 127.0.0.1:8081" if case == "may not serve" else None)
    first = {"no hello": b"junk", "not json": rp.encode(rp.HELLO, 1, 0, 0, b"[1"),
             "may not serve": rp.hello("g", "f", "e", 1, 0),
             "log ahead": rp.hello("g", "f", "e", 1, store.replica.end + 1)}[case]

    async def check(ch):
        fr = await first_frame(ch, first)
        assert fr.kind == rp.REFUSE and fr.epoch == EPOCH
        says = {"no hello": "must begin with a HELLO", "not json": "must begin with a HELLO",
                "may not serve": "follows 127.0.0.1:8081", "log ahead": "after mine"}[case]
        assert says in fr.payload.decode()
    with_leader(node, check)
    assert node.acks.followers == {}


def test_the_log_is_sent_byte_for_byte_then_each_append_and_acks_confirm(store):
    node = LeaderNode(store, EPOCH)
    end = store.replica.end
    got = bytearray()
    heartbeat = threading.Event()

    async def check(ch):
        call, sends = open_stream(ch, rp.hello("g", "f1", "127.0.0.1:9", EPOCH, 0))
        it = call.__aiter__()

        async def until(want_end):
            while len(got) < want_end:
                fr = rp.decode(await it.__anext__())
                assert fr.epoch == EPOCH
                if fr.kind == rp.DATA:
                    assert fr.offset == len(got) and len(fr.payload) <= 4096
                    got.extend(fr.payload)
        await until(end)
        assert bytes(got) == log_bytes(store, end)
        assert node.seen == ["f1"] and node.acks.followers["f1"].connected
        await sends.put(rp.encode(rp.ACK, EPOCH, end))
        await asyncio.to_thread(wait_until, lambda: node.acks.followers["f1"].confirmed == end, "the ACK")

        assert store.put(Message("T", b"one more")).ok        # an append, as the broker's put path says it
        node.acks.appended(store.replica.end)
        await until(store.replica.end)
        assert bytes(got) == log_bytes(store, store.replica.end)

        while not heartbeat.is_set():                          # nothing new: heartbeats at the end
            fr = rp.decode(await it.__anext__())
            if fr.kind == rp.HEARTBEAT:
                assert fr.offset == fr.end == store.replica.end
                heartbeat.set()

        node.leading = False                                   # a failover: the stream ends, refused
        rest = [rp.decode(r) async for r in it]
        assert rest and rest[-1].kind == rp.REFUSE
        await sends.put(None)
    with_leader(node, check)
    assert not node.acks.followers["f1"].connected


async def state_doc(ch, size_max=1 << 30):
    """The State answer put back together from its STATE frames."""
    whole = rp.StateAssembler(size_max)
    got = None
    async for raw in ch.unary_stream(rp.STATE_PATH)(b"", timeout=60):
        got = whole.add(rp.decode(raw))
    return rp.loads(got)


def test_epochs_and_state_answer_as_the_leader_is(store):
    node = LeaderNode(store, EPOCH)

    async def check(ch):
        doc = rp.loads(await ch.unary_unary(rp.EPOCHS_PATH)(b"", timeout=60))
        assert doc["leader"] and doc["epoch"] == EPOCH and doc["max"] == store.replica.end
        assert doc["group"] == "g" and doc["member"] == "g-0" and doc["view"] == {"group": "g"}
        node.fenced = True
        assert not rp.loads(await ch.unary_unary(rp.EPOCHS_PATH)(b"", timeout=60))["leader"]
        st = await state_doc(ch)
        assert st == {"ok": False, "error": "not ready"}, "no service to copy the state of yet"
        node.leading, node.refusal = False, "this broker follows 127.0.0.1:8081"
        st = await state_doc(ch)
        assert st == {"ok": False, "error": "this broker follows 127.0.0.1:8081"}
    with_leader(node, check)
