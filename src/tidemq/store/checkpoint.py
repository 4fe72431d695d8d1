"""The checkpoint file and the abort file.

Checkpoint (``<root>/checkpoint``, 1 KiB): two 512-byte slots written in turn,
each big-endian::

    magic u32 'TDCP' | version i32 | sequence i64 |
    physic_timestamp_ms i64 | logics_timestamp_ms i64 | index_timestamp_ms i64 |
    physic_offset i64      commit log durable up to here (fsynced)
    logics_offset i64      consume-queue units of every record before it are durable
    index_offset i64       index entries of every record before it are durable
    crc32 u32 of everything before it

A slot is written with pwrite and fsync; the reader takes the valid slot with
the highest sequence, so a torn checkpoint write falls back to the previous
one instead of to nothing. RocketMQ keeps only the three timestamps; the offsets
let recovery start exactly where the durable state ends (the timestamps are
kept and reported).

Abort file (``<root>/abort``): created at start, removed at a clean shutdown once
everything was flushed and dispatched; found at start, it means the last run
did not end cleanly.
"""

from __future__ import annotations

import struct
import threading
import zlib
from dataclasses import dataclass

from ..io import FileIO

SLOT = struct.Struct(">Iiqqqqqqq")
assert SLOT.size == 64
CRC = struct.Struct(">I")
SLOT_BYTES = 512
CP_MAGIC = 0x54444350  # 'TDCP'
CP_VERSION = 1


@dataclass
class CheckpointState:
    physic_timestamp_ms: int = 0
    logics_timestamp_ms: int = 0
    index_timestamp_ms: int = 0
    physic_offset: int = 0
    logics_offset: int = 0
    index_offset: int = 0

    @property
    def min_timestamp_ms(self) -> int:
        return min(self.physic_timestamp_ms, self.logics_timestamp_ms)

    @property
    def dispatch_safe_offset(self) -> int:
        """Every record before this offset is durable in the log, the queues and the index."""
        return min(self.physic_offset, self.logics_offset, self.index_offset)


def best_slot(raw: bytes) -> tuple[int, list[int]] | None:
    """(sequence, values) of the valid slot of ``raw`` (the file's bytes) with the highest sequence."""
    best = None
    for i in range(2):
        chunk = raw[i * SLOT_BYTES:i * SLOT_BYTES + SLOT.size + CRC.size]
        if len(chunk) < SLOT.size + CRC.size:
            continue
        (crc,) = CRC.unpack_from(chunk, SLOT.size)
        if zlib.crc32(chunk[:SLOT.size]) != crc:
            continue
        magic, version, seq, *vals = SLOT.unpack_from(chunk, 0)
        if magic != CP_MAGIC or version != CP_VERSION:
            continue
        if best is None or seq > best[0]:
            best = (seq, vals)
    return best


def read_state(fio: FileIO, path: str) -> CheckpointState | None:
    """The checkpoint at ``path`` read only (nothing created; readers of a store's files): None when
    there is none, or no valid slot."""
    if not fio.exists(path):
        return None
    h = fio.open(path, readonly=True)
    try:
        best = best_slot(fio.pread(h, 2 * SLOT_BYTES, 0))
    finally:
        fio.close(h)
    return CheckpointState(*best[1]) if best is not None else None


class Checkpoint:
    def __init__(self, fio: FileIO, path: str) -> None:
        self.fio = fio
        self.path = path
        self.state = CheckpointState()
        self.valid = False          # a valid slot was read at open
        self._seq = 0
        self._handle = None
        self._lock = threading.Lock()

    def open(self) -> CheckpointState:
        existed = self.fio.exists(self.path)
        self._handle = self.fio.open(self.path, create=True)
        if existed:
            best = best_slot(self.fio.pread(self._handle, 2 * SLOT_BYTES, 0))
            if best is not None:
                self._seq = best[0]
                self.state = CheckpointState(*best[1])
                self.valid = True
        return self.state

    def update(self, **fields: int) -> None:
        with self._lock:
            for k, v in fields.items():
                setattr(self.state, k, v)

    def flush(self) -> None:
        """Write the current state into the older slot and fsync it."""
        with self._lock:
            self._seq += 1
            s = self.state
            body = SLOT.pack(CP_MAGIC, CP_VERSION, self._seq, s.physic_timestamp_ms, s.logics_timestamp_ms,
                             s.index_timestamp_ms, s.physic_offset, s.logics_offset, s.index_offset)
            data = body + CRC.pack(zlib.crc32(body))
            slot = self._seq % 2
            self.fio.pwrite(self._handle, data, slot * SLOT_BYTES)
            self.fio.fsync(self._handle)

    def close(self) -> None:
        if self._handle is not None:
            self.fio.close(self._handle)
            self._handle = None


class AbortFile:
    def __init__(self, fio: FileIO, path: str, directory: str) -> None:
        self.fio = fio
        self.path = path
        self.directory = directory

    def exists(self) -> bool:
        return self.fio.exists(self.path)

    def create(self) -> None:
        h = self.fio.open(self.path, create=True)
        self.fio.close(h)
        self.fio.fsync_dir(self.directory)

    def remove(self) -> None:
        try:
            self.fio.unlink(self.path)
        except FileNotFoundError:
            return
        self.fio.fsync_dir(self.directory)
