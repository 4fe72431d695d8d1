"""``python -m _traced_broker serve ...``: tidemq's broker with timestamps (CLOCK_MONOTONIC, the same
clock in every process) taken on a SYNC put's way through replication, for bench/replication_hops.py.
Wrapped, not changed: the leader's frame writes (``ReplicationServer._grpc_stream``'s send), its
reading of ACKs (``ReplicaAcks.confirm``), a SYNC put's wait (``StorePuts._confirmed``), a request's
whole time (``RecordSends.send``); the follower's frame reads and ACK writes (``GrpcStream``) and its
passes (``follower.write_frames``). The events go to ``$BENCH_TRACE_OUT`` as JSON every half second.
Everything else is tidemq.cli.main as it is."""

import json
import os
import threading
import time

from tidemq.broker import puts
from tidemq.broker.produce import send_records
from tidemq.broker.replication import acks, follower, leader, transport
from tidemq.protocol import replication as rp

EVENTS: list = []
now = time.monotonic
HEADER = rp.HEADER


def _offsets(frame: bytes) -> tuple[int, int, int]:
    """(kind, offset, payload bytes) of a replication frame, from its header alone."""
    _magic, kind, _epoch, offset, _end, _hw, _crc, length = HEADER.unpack_from(frame)
    return kind, offset, length


def _dump() -> None:
    out = os.environ["BENCH_TRACE_OUT"]
    while True:
        time.sleep(0.5)
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(EVENTS, f)
        os.replace(tmp, out)


async def _grpc_stream(self, request_iterator, context) -> None:
    write = context.write

    async def send(frame: bytes) -> None:
        t = now()
        await write(frame)
        EVENTS.append(("send", t, now(), *_offsets(frame)))
    try:
        await self.serve_stream(request_iterator, send)
    except Exception as e:  # noqa: BLE001 - a follower's stream ended (as the real handler: quietly)
        EVENTS.append(("stream_ended", now(), repr(e)))


_confirm = acks.ReplicaAcks.confirm


def _confirm_timed(self, member, conn, offset):
    EVENTS.append(("confirm", now(), offset))
    return _confirm(self, member, conn, offset)


_wait = puts.StorePuts._confirmed


async def _wait_timed(self, rep, end):
    t = now()
    await _wait(self, rep, end)
    EVENTS.append(("put", t, now(), end))


_send = send_records.RecordSends.send


async def _send_timed(self, raw, context):
    t = now()
    out = await _send(self, raw, context)
    EVENTS.append(("request", t, now(), len(raw)))
    return out


_read, _write = transport.GrpcStream.read, transport.GrpcStream.write


async def _read_timed(self):
    raw = await _read(self)
    if raw:
        EVENTS.append(("received", now(), *_offsets(raw)))
    return raw


async def _write_timed(self, frame):
    t = now()
    await _write(self, frame)
    kind, offset, _ = _offsets(frame)
    if kind == rp.ACK:
        EVENTS.append(("ack", t, now(), offset))


_write_frames = follower.write_frames


def _write_frames_timed(store, writes, written, dispatch=True):
    t = now()
    try:
        return _write_frames(store, writes, written, dispatch)
    finally:
        EVENTS.append(("pass", t, now(), writes[0].offset, sum(len(w.payload) for w in writes), len(writes)))


leader.ReplicationServer._grpc_stream = _grpc_stream
acks.ReplicaAcks.confirm = _confirm_timed
puts.StorePuts._confirmed = _wait_timed
send_records.RecordSends.send = _send_timed
transport.GrpcStream.read, transport.GrpcStream.write = _read_timed, _write_timed
follower.write_frames = _write_frames_timed

if __name__ == "__main__":
    threading.Thread(target=_dump, daemon=True).start()
    from tidemq.cli.main import cli
    cli()
