"""``/tidemq.Replication/<Method>``: how a follower copies its leader (docs/broker-protocol.md,
4.12). Raw bytes both ways, no protobuf (as tidemq.Data).

    Stream    bidirectional. The follower sends HELLO (JSON: who it is, the epoch it knows, the
              offset it wants), then ACK frames (its confirmed offset: written, or on disk where
              it runs SYNC_FLUSH; one per frame that changed it, and one per HEARTBEAT). The leader
              sends DATA frames (commit-log bytes from an offset: whole records within one
              segment, CRC-32 of the payload in the header), RAW frames (a stretch of its log that
              is not whole records: damaged on its disk; the follower writes it as it is, and
              reads skip it as recovery does), HEARTBEAT frames while there is nothing new (its
              log's end, for the lag), or one REFUSE frame (text) and ends the stream: not the
              leader, an older epoch, a bad hello. Every leader frame carries the high watermark
              (HW: what every member of the in-sync set has; a follower serves reads up to it).
    Epochs    unary, JSON: the leader's epoch entries, log offsets and group view, for the
              follower's divergence check before it streams (store/epochs.py).
    State     unary request, streamed answer: the leader's broker state (topics, consumer offsets,
              pop state and its key, timer progress, transaction decisions;
              broker/replication/state.py) as JSON in CHUNK frames of at most a frame's size
              (OFFSET: where the chunk starts in the document, END: the document's length), so
              a state of any size is copied (``state_document`` puts them together).

Frame: a 48-byte header, big-endian, then ``length`` bytes of payload::

    MAGIC u32 | KIND u8 | pad 3 | EPOCH i64 | OFFSET i64 | END i64 | HW i64 | CRC u32 (of the payload) | LENGTH u32

OFFSET: DATA and RAW, where the payload starts in the log; ACK, the follower's confirmed offset.
END: the leader's log end when the frame was made (DATA, RAW, HEARTBEAT). HW: the leader's high
watermark then. EPOCH: the sender's epoch. A frame whose magic, length or CRC do not check is a
``FrameError``: the stream is dropped and made again from the follower's end, so nothing damaged
in transit is ever written.
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
HEADER = struct.Struct(">IB3xqqqqII")
assert HEADER.size == 48

DATA = 1
HEARTBEAT = 2
REFUSE = 3
CHUNK = 4
RAW = 5
HELLO = 10
ACK = 11
KINDS = {DATA, HEARTBEAT, REFUSE, CHUNK, RAW, HELLO, ACK}

PAYLOAD_MAX = 64 << 20          # the largest payload a frame may say it has (replication_frame_bytes_max's bound)


class Frame(NamedTuple):
    kind: int
    epoch: int
    offset: int
    end: int
    payload: bytes
    hw: int = 0

    def json(self) -> dict:
        """The payload of a HELLO as a dict (FrameError when it is not one)."""
        try:
            doc = json.loads(self.payload)
        except (ValueError, UnicodeDecodeError):
            raise FrameError("the payload is not JSON") from None
        if not isinstance(doc, dict):
            raise FrameError("the payload is not a JSON object")
        return doc


def encode(kind: int, epoch: int = 0, offset: int = 0, end: int = 0, payload: bytes = b"", hw: int = 0) -> bytes:
    return HEADER.pack(MAGIC, kind, epoch, offset, end, hw, crc32(payload), len(payload)) + payload


def decode(raw: bytes) -> Frame:
    """A frame from its bytes; FrameError when they are not one (magic, kind, length, CRC)."""
    if len(raw) < HEADER.size:
        raise FrameError(f"{len(raw)} bytes: shorter than a frame header")
    magic, kind, epoch, offset, end, hw, crc, length = HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise FrameError("not a replication frame (magic)")
    if kind not in KINDS:
        raise FrameError(f"unknown frame kind {kind}")
    if length > PAYLOAD_MAX or HEADER.size + length != len(raw):
        raise FrameError(f"frame says {length} payload bytes, has {len(raw) - HEADER.size}")
    payload = raw[HEADER.size:]
    if crc32(payload) != crc:
        raise FrameError("payload CRC does not match (damaged in transit)")
    return Frame(kind, epoch, offset, end, payload, hw)


def hello(group: str, member: str, endpoint: str, epoch: int, from_offset: int, **extra) -> bytes:
    doc = {"group": group, "member": member, "endpoint": endpoint, **extra}
    return encode(HELLO, epoch, from_offset, 0, json.dumps(doc).encode())


def state_frames(doc: bytes, epoch: int, chunk_bytes: int):
    """The CHUNK frames of a state document ``doc`` (at least one, an empty document too)."""
    n = len(doc)
    for at in range(0, max(n, 1), chunk_bytes):
        yield encode(CHUNK, epoch, at, n, doc[at:at + chunk_bytes])


class StateAssembler:
    """Puts the CHUNK frames of one State answer back together (FrameError when they do not follow)."""

    def __init__(self, size_max: int) -> None:
        self.size_max = size_max
        self.parts: list[bytes] = []
        self.have = 0
        self.total: int | None = None

    def add(self, fr: Frame) -> bytes | None:
        """The document once whole, else None."""
        if fr.kind != CHUNK:
            raise FrameError(f"a frame of kind {fr.kind} in a state answer")
        if self.total is None:
            if not 0 <= fr.end <= self.size_max:
                raise FrameError(f"a state document of {fr.end} bytes (at most {self.size_max})")
            self.total = fr.end
        if fr.end != self.total or fr.offset != self.have or self.have + len(fr.payload) > self.total:
            raise FrameError(f"state chunk at {fr.offset} of {fr.end}, expected at {self.have} of {self.total}")
        self.parts.append(fr.payload)
        self.have += len(fr.payload)
        return b"".join(self.parts) if self.have == self.total else None


def dumps(obj) -> bytes:
    return json.dumps(obj).encode()


def loads(raw: bytes):
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
