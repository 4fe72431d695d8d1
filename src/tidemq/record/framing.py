"""A raw read's records in one copy, with room for the wire's header in front of them.

``get_raw`` (reader.py) serves the records of one queue, which lie strided in a commit-log
segment between the other queues' records. ``frame_records`` copies them back to back into one
new bytes object laid out as

    room bytes | the sizes, i32 little-endian | the records, back to back

checks each record's CRCs on the copy as it is made (the copy is in the cache then) and, given a
``head`` function, writes the header it answers into the room in the same pass, before the object
leaves the function: the broker's PullRecords answer (protocol/pull_frame.py) is that object, the
records copied once, from the mapping into the answer gRPC sends (a gather followed by a join of
header, sizes and records copied them twice). No bytes object is ever changed after it was made.

One C loop (tidemq._accel.frame_records) when tidemq.accel has it; else the Python twin, which
gives the same bytes in a bytearray (tests/test_accel.py holds them to it).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..accel import ACCEL
from ..bulk import gather_bytes
from ..record.crc import crc32
from .integrity import Expect, expectation, py_damaged_records

ROOM = 256          # what PullRecords' header needs (~210 bytes with every number at its longest)
ROOM_MAX = 1 << 20

# head(crc, bad) -> the header's bytes (at most room) or None: crc is CRC-32 of everything after the room
Head = Callable[[int, list], "bytes | None"]


def frame_records(buf, starts, sizes, room: int = 0, head: Head | None = None,
                  expect: Expect = None) -> tuple[bytes | bytearray, list[int], bool]:
    """(frame, bad, headed): the records at ``starts`` of ``buf`` (``sizes`` bytes each, every one
    within buf) laid out after ``room`` bytes and their sizes, the indices of those that fail their
    CRCs (integrity.damaged_records' checks) or, given ``expect`` (topic bytes, queue id, each
    record's queue offset), are not the records their consume-queue units stand for (checked in
    the same pass), and whether ``head`` wrote the room (its bytes, or None: the room stays zero).
    ValueError for a record outside buf."""
    starts = np.ascontiguousarray(starts, np.int64)
    sizes = np.ascontiguousarray(sizes, np.int64)
    if ACCEL is None:
        return py_frame_records(buf, starts, sizes, room, head, expect)
    return ACCEL.frame_records(buf, starts, sizes, room, head, expectation(expect))


def py_frame_records(buf, starts: np.ndarray, sizes: np.ndarray, room: int = 0, head: Head | None = None,
                     expect: Expect = None) -> tuple[bytearray, list[int], bool]:
    """frame_records in Python: Arrow's gather, then the batch check (a bytearray, not bytes)."""
    if len(starts) != len(sizes) or not 0 <= room <= ROOM_MAX:
        raise ValueError("frame_records: starts and sizes must be int64 arrays of one length (room: 0 .. 1 MiB)")
    if head is not None and not callable(head):
        raise TypeError("frame_records: head must be callable or None")
    expect = expectation(expect)
    if expect is not None and len(expect[2]) != len(starts):
        raise ValueError("expect: one int64 queue offset per record")
    n = len(buf)
    if len(starts) and ((starts < 0) | (sizes < 0) | (sizes > 0x7FFFFFFF) | (starts > n) | (sizes > n - starts)).any():
        raise ValueError("frame_records: a record lies outside the buffer")
    data = gather_bytes(buf, starts, sizes)
    frame = bytearray(room)
    frame += sizes.astype("<i4").tobytes()
    frame += data
    at = np.cumsum(sizes) - sizes
    bad = py_damaged_records(np.frombuffer(data, np.uint8), at, sizes, expect)
    headed = False
    if head is not None:
        h = head(crc32(memoryview(frame)[room:]), bad)
        if h is not None:
            if not isinstance(h, bytes) or len(h) > room:
                raise ValueError("frame_records: head() must answer bytes of at most room, or None")
            frame[:len(h)] = h
            headed = True
    return frame, bad, headed
