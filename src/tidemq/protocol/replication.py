"""``/tidemq.Replication/<Method>``: how a follower copies its leader (docs/broker-protocol.md,
4.12). Raw bytes both ways, no protobuf (as tidemq.Data).

    Stream    bidirectional. The follower sends HELLO (JSON: who it is, the epoch it knows, the
              offset it wants), then ACK frames (its confirmed offset: written, or on disk where
              it runs SYNC_FLUSH). The leader sends DATA frames (commit-log bytes from an
              offset: whole records within one segment, CRC-32 of the payload in the header),
              HEARTBEAT frames while there is nothing new (its log's end, for the lag), or one
              REFUSE frame (text) and ends the stream: not the leader, an older epoch, a bad hello.
    Epochs    unary, JSON: the leader's epoch entries, log offsets and group view, for the
              follower's divergence check before it streams (store/epochs.py).
    State     unary, JSON: the leader's broker state (topics, consumer offsets, pop state and its
              key, timer progress, transaction decisions; broker/replication/state.py).

Frame: a 40-byte header, big-endian, then ``length`` bytes of payload::

    MAGIC u32 | KIND u8 | pad 3 | EPOCH i64 | OFFSET i64 | END i64 | CRC u32 (of the payload) | LENGTH u32

OFFSET: DATA, where the payload starts in the log; ACK, the follower's confirmed offset.
END: the leader's log end when the frame was made (DATA, HEARTBEAT). EPOCH: the sender's
epoch. A frame whose magic, length or CRC do not check is a ``FrameError``: the stream is
dropped and made again from the follower's end, so nothing damaged is ever written.
"""

from __future__ import annotations

import json
import struct
from typing import NamedTuple

from ..record.crc import crc32
from .data import FrameError

SERVICE = "tidemq.Replication"
STREAM = "Stream"
EPOCHS = "Epochs"
STATE = "State"
STREAM_PATH = f"/{SERVICE}/{STREAM}"
EPOCHS_PATH = f"/{SERVICE}/{EPOCHS}"
STATE_PATH = f"/{SERVICE}/{STATE}"

MAGIC = 0x7D3A11CE
HEADER = struct.Struct(">IB3xqqqII")
assert HEADER.size == 40

DATA = 1
HEARTBEAT = 2
REFUSE = 3
HELLO = 10
ACK = 11
KINDS = {DATA, HEARTBEAT, REFUSE, HELLO, ACK}

PAYLOAD_MAX = 64 << 20          # the largest payload a frame may say it has (replication_frame_bytes_max's bound)


class Frame(NamedTuple):
    kind: int
    epoch: int
    offset: int
    end: int
    payload: bytes

    def json(self) -> dict:
        """The payload of a HELLO as a dict (FrameError when it is not one)."""
        try:
            doc = json.loads(self.payload)
        except (ValueError, UnicodeDecodeError):
            raise FrameError("the payload is not JSON") from None
        if not isinstance(doc, dict):
            raise FrameError("the payload is not a JSON object")
        return doc


def encode(kind: int, epoch: int = 0, offset: int = 0, end: int = 0, payload: bytes = b"") -> bytes:
    return HEADER.pack(MAGIC, kind, epoch, offset, end, crc32(payload), len(payload)) + payload


def decode(raw: bytes) -> Frame:
    """A frame from its bytes; FrameError when they are not one (magic, kind, length, CRC)."""
    if len(raw) < HEADER.size:
        raise FrameError(f"{len(raw)} bytes: shorter than a frame header")
    magic, kind, epoch, offset, end, crc, length = HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise FrameError("not a replication frame (magic)")
    if kind not in KINDS:
        raise FrameError(f"unknown frame kind {kind}")
    if length > PAYLOAD_MAX or HEADER.size + length != len(raw):
        raise FrameError(f"frame says {length} payload bytes, has {len(raw) - HEADER.size}")
    payload = raw[HEADER.size:]
    if crc32(payload) != crc:
        raise FrameError("payload CRC does not match (damaged in transit)")
    return Frame(kind, epoch, offset, end, payload)


def hello(group: str, member: str, endpoint: str, epoch: int, from_offset: int, **extra) -> bytes:
    doc = {"group": group, "member": member, "endpoint": endpoint, **extra}
    return encode(HELLO, epoch, from_offset, 0, json.dumps(doc).encode())


def dumps(obj) -> bytes:
    return json.dumps(obj).encode()


def loads(raw: bytes):
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
