"""A raw read's records in one copy, with room for the wire's header in front of them.

``get_raw`` (reader.py) serves the records of one queue, which lie strided in a commit-log
segment between the other queues' records. ``frame_records`` copies them back to back into one
new bytes object laid out as

    room bytes (zero) | the sizes, i32 little-endian | the records, back to back

and checks each record's CRCs on the copy as it is made (the copy is in the cache then). The
broker's PullRecords answer (protocol/pull_frame.py) is that object once ``fill_room`` has written
the header into the room: the records are copied once, from the mapping into the answer gRPC
sends, where a gather followed by a join of header, sizes and records copied them twice.

One C loop (tidemq._accel.frame_records, fill_room) when tidemq.accel has it; else the Python
twins, which give the same bytes in a bytearray (tests/test_accel.py holds them to it).
"""

from __future__ import annotations

import numpy as np

from ..accel import ACCEL
from ..bulk import gather_bytes
from .integrity import py_damaged_records

ROOM = 256          # what PullRecords' header needs (~200 bytes with every number at its longest)


def frame_records(buf, starts, sizes, room: int = 0) -> tuple[bytes | bytearray, list[int]]:
    """(frame, bad): the records at ``starts`` of ``buf`` (``sizes`` bytes each, every one within
    buf) laid out after ``room`` zero bytes and their sizes, and the indices of those that fail
    their CRCs (integrity.damaged_records' checks). ValueError for a record outside buf."""
    starts = np.ascontiguousarray(starts, np.int64)
    sizes = np.ascontiguousarray(sizes, np.int64)
    if ACCEL is None:
        return py_frame_records(buf, starts, sizes, room)
    return ACCEL.frame_records(buf, starts, sizes, room)


def py_frame_records(buf, starts: np.ndarray, sizes: np.ndarray, room: int = 0) -> tuple[bytearray, list[int]]:
    """frame_records in Python: Arrow's gather, then the batch check (a bytearray, not bytes)."""
    if len(starts) != len(sizes) or room < 0:
        raise ValueError("frame_records: starts and sizes must be int64 arrays of one length")
    n = len(buf)
    if len(starts) and ((starts < 0) | (sizes < 0) | (sizes > 0x7FFFFFFF) | (starts > n - sizes)).any():
        raise ValueError("frame_records: a record lies outside the buffer")
    data = gather_bytes(buf, starts, sizes)
    frame = bytearray(room)
    frame += sizes.astype("<i4").tobytes()
    frame += data
    at = np.cumsum(sizes) - sizes
    return frame, py_damaged_records(np.frombuffer(data, np.uint8), at, sizes)


def fill_room(frame: bytes | bytearray, head: bytes) -> None:
    """Write ``head`` over the front of a frame ``frame_records`` made (its room: every byte of it
    still zero, else ValueError). A bytes frame is changed in place: it is the one bytes object
    tidemq writes after making it, before anything else has it."""
    if isinstance(frame, bytearray):
        py_fill_room(frame, head)
    elif ACCEL is not None:
        ACCEL.fill_room(frame, head)
    else:
        raise TypeError("fill_room: a bytes frame without tidemq._accel (frame_records made a bytearray)")


def py_fill_room(frame: bytearray, head: bytes) -> None:
    if len(head) > len(frame) or any(frame[:len(head)]):
        raise ValueError("fill_room: the frame has no zeroed room of that size")
    frame[:len(head)] = head
