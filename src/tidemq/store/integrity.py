"""Read-side integrity: which records of a batch fail their CRCs, and the count and log of
what the read paths refused to serve.

Every read path checks a record before serving it: ``StoredMessage.intact()`` for one decoded
message (``get``, ``get_by_commitlog_offset``), ``damaged_records`` for a batch of records as
stored (``get_raw`` / PullRecords, the Spark decoder). A record passes when its body CRC and its
record CRC hold (codec.py: the record CRC covers the 88-byte header, TOTALSIZE, MAGIC and
BODYLEN among it, and the tail, so its digits match only for the record written at that
position with that size). The batch check reads the fixed fields of every record with numpy and
runs the CRCs in C in one loop (the body through a memoryview slice: no copy).
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..accel import ACCEL
from ..crc import crc32 as _crc32
from .codec import CRC_DIGITS_BACK, OFF_BODY, OFF_BODYCRC, OFF_BODYLEN, RECORD_CRC_DIGITS, RECORD_MIN, TAIL_MIN

log = logging.getLogger("tidemq.store")

DAMAGE_LOG_INTERVAL_S = 10.0       # at most one log line per interval about damaged records read

_BE32 = np.array([1 << 24, 1 << 16, 1 << 8, 1], np.int64)
_DIGITS = np.arange(RECORD_CRC_DIGITS, dtype=np.int64)
_POW10 = 10 ** _DIGITS[::-1]
_TAIL_END = np.arange(CRC_DIGITS_BACK, dtype=np.int64)        # the digits and the separator after them
_CRC_AND_LEN = np.r_[np.arange(OFF_BODYCRC, OFF_BODYCRC + 4), np.arange(OFF_BODYLEN, OFF_BODYLEN + 4)]


def damaged_records(buf, starts, sizes) -> list[int]:
    """Indices of the records at ``starts`` (of ``sizes`` bytes, as consume-queue units say;
    each within ``buf``: an mmap, bytes or a numpy uint8 array) that fail their checks: one C
    loop (tidemq._accel.damaged) when tidemq.accel has it, else py_damaged_records."""
    if ACCEL is None:
        return py_damaged_records(buf, starts, sizes)
    return ACCEL.damaged(buf, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(sizes, np.int64))


def py_damaged_records(buf, starts, sizes) -> list[int]:
    """damaged_records in Python: the fixed fields with numpy, the CRCs per record."""
    starts = np.asarray(starts, np.int64)
    sizes = np.asarray(sizes, np.int64)
    small = sizes < RECORD_MIN
    idx = np.flatnonzero(~small)
    bad = np.flatnonzero(small).tolist()
    if not len(idx):
        return bad
    p, ends = starts[idx], starts[idx] + sizes[idx]
    a = np.frombuffer(buf, np.uint8) if not isinstance(buf, np.ndarray) else buf
    try:
        last = a[(ends - CRC_DIGITS_BACK)[:, None] + _TAIL_END].astype(np.int64)
        fixed = a[p[:, None] + _CRC_AND_LEN].astype(np.int64)
    finally:
        del a                                   # no numpy view may pin an mmap past this call
    digits = last[:, :RECORD_CRC_DIGITS] - ord("0")
    ok = ((digits >= 0) & (digits <= 9)).all(axis=1) & (last[:, RECORD_CRC_DIGITS] == 2)   # the separator
    stored = np.where(ok, digits @ _POW10, -1)
    body_crc, body_len = fixed[:, :4] @ _BE32, fixed[:, 4:] @ _BE32      # unsigned: a negative length is huge
    b1 = p + OFF_BODY + body_len
    crc32 = _crc32
    mv = memoryview(buf)
    try:
        for k, pos, e1, d, bc, rc in zip(idx.tolist(), p.tolist(), b1.tolist(), (ends - CRC_DIGITS_BACK).tolist(),
                                         body_crc.tolist(), stored.tolist()):
            if e1 + TAIL_MIN - CRC_DIGITS_BACK > d or crc32(mv[pos + OFF_BODY:e1]) & 0x7FFFFFFF != bc \
                    or crc32(mv[pos:pos + OFF_BODY], crc32(mv[e1:d])) != rc:
                bad.append(k)
    finally:
        mv.release()
    return sorted(bad) if len(bad) > 1 else bad


class DamageCounter:
    """Records a read path refused to serve because they fail their CRC (or are not records at
    all): counted (``total``: the store's stats()["records_damaged"], the broker's
    tidemq_records_damaged_total) and logged at WARNING with their offsets, one line per
    DAMAGE_LOG_INTERVAL_S at most (a corrupt segment read over and over does not flood the log)."""

    def __init__(self, interval_s: float = DAMAGE_LOG_INTERVAL_S) -> None:
        self.total = 0
        self.interval_s = interval_s
        self._next_log = 0.0
        self._unlogged = 0

    def note(self, topic: str, queue_id: int, queue_offset: int, commitlog_offset: int) -> None:
        self.total += 1
        now = time.monotonic()
        if now < self._next_log:
            self._unlogged += 1
            return
        more, self._unlogged = self._unlogged, 0
        self._next_log = now + self.interval_s
        log.warning("damaged record not served (fails its CRC): %s/%d queue offset %d, commit-log offset %d; "
                    "skipped, readers go on after it%s; run `tidemq verify`", topic, queue_id, queue_offset,
                    commitlog_offset, f" ({more} more since the last line)" if more else "")
