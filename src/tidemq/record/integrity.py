"""Read-side integrity: which records of a batch fail their CRCs, and the count and log of
what the read paths refused to serve.

Every read path checks a record before serving it: ``StoredMessage.intact()`` for one decoded
message (``get``, ``get_by_commitlog_offset``), ``damaged_records`` for a batch of records as
stored (``get_raw`` / PullRecords, the Spark decoder). A read through consume-queue units also
checks that each record is the one its unit stands for (``expect``: topic, queue id, queue offset;
``StoredMessage.stands_for`` for one): a unit has no CRC of its own, and a damaged one can point at
an intact record of another queue, which must never be served as this queue's. A record passes when its body CRC and its
record CRC hold (codec.py: the record CRC covers the 88-byte header, TOTALSIZE, MAGIC and
BODYLEN among it, and the tail, so its digits match only for the record written at that
position with that size). The batch check reads the fixed fields and the CRC digits of every
record with numpy (one gather each), runs the three CRCs of each record as C calls in one loop
over memoryview slices (no copy, nothing compared in Python), and compares them with numpy.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..accel import ACCEL
from .crc import crc32 as _crc32
from .codec import (CRC_DIGITS_BACK, OFF_BODY, OFF_BODYCRC, OFF_BODYLEN, OFF_QUEUEID, OFF_QUEUEOFFSET,
                    RECORD_CRC_DIGITS, RECORD_MIN, TAIL_MIN)

log = logging.getLogger("tidemq.store")

DAMAGE_LOG_INTERVAL_S = 10.0       # at most one log line per interval about damaged records read

_POW10 = 10 ** np.arange(RECORD_CRC_DIGITS, dtype=np.int64)[::-1]
_TAIL_END = np.arange(CRC_DIGITS_BACK, dtype=np.int64)        # the digits and the separator after them
_CRC_AND_LEN = np.r_[np.arange(OFF_BODYCRC, OFF_BODYCRC + 4), np.arange(OFF_BODYLEN, OFF_BODYLEN + 4)]
_TAIL_ROOM = TAIL_MIN - CRC_DIGITS_BACK     # bytes a record needs after its body before the CRC digits
_QUEUE_FIELDS = np.r_[np.arange(OFF_QUEUEID, OFF_QUEUEID + 4), np.arange(OFF_QUEUEOFFSET, OFF_QUEUEOFFSET + 8)]

# expect: (topic bytes, queue id, each record's queue offset): what records read through consume-queue
# units must be (a record that is not is listed with the damaged ones)
Expect = tuple[bytes, int, np.ndarray] | None


def expectation(expect) -> tuple[bytes, int, np.ndarray] | None:
    """``expect`` as the compiled loops take it: (bytes, int, contiguous int64 array); None stays None."""
    if expect is None:
        return None
    if not isinstance(expect, tuple) or len(expect) != 3 or not isinstance(expect[0], (bytes, bytearray)):
        raise TypeError("expect must be None or (topic bytes, queue id, queue offsets int64)")
    topic, queue_id, queue_offsets = expect
    if not -(1 << 63) <= queue_id < 1 << 63:
        raise OverflowError("expect: the queue id is out of the int64 range")
    return bytes(topic), int(queue_id), np.ascontiguousarray(queue_offsets, np.int64)


def damaged_records(buf, starts, sizes, expect: Expect = None) -> list[int]:
    """Indices of the records at ``starts`` (of ``sizes`` bytes, as consume-queue units say;
    each within ``buf``: an mmap, bytes or a numpy uint8 array) that fail their checks, or (given
    ``expect``: topic bytes, queue id, each record's queue offset) are not the records their units
    stand for: one C loop (tidemq._accel.damaged) when tidemq.accel has it, else py_damaged_records."""
    if ACCEL is None:
        return py_damaged_records(buf, starts, sizes, expect)
    return ACCEL.damaged(buf, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(sizes, np.int64),
                         expectation(expect))


def py_not_theirs(a: np.ndarray, p: np.ndarray, sizes: np.ndarray, body_len: np.ndarray, expect) -> np.ndarray:
    """Which of the records at ``p`` of ``a`` (``sizes`` bytes each, at least RECORD_MIN, within
    ``a``; ``body_len``: their BODYLEN read unsigned) are not the ones their units stand for:
    another queue id, queue offset or topic than ``expect``'s (expectation's: topic bytes, queue id,
    queue offsets).
    Reads only bytes of each record (a topic that cannot fit is not read)."""
    topic, queue_id, queue_offsets = expect
    tl = len(topic)
    if tl > 255 or not len(p):                          # TOPICLEN is one byte: no record can be of it
        return np.ones(len(p), bool)
    f = np.ascontiguousarray(a[p[:, None] + _QUEUE_FIELDS])
    qid = f[:, :4].copy().view(">i4")[:, 0].astype(np.int64)
    qoff = f[:, 4:].copy().view(">i8")[:, 0]
    fits = body_len <= sizes - (OFF_BODY + 1 + tl)
    t = np.where(fits, p + OFF_BODY + body_len, p)       # TOPICLEN and the topic, within the record
    named = a[np.minimum(t[:, None] + np.arange(tl + 1), len(a) - 1)]
    same = fits & (named[:, 0] == tl) & (named[:, 1:] == np.frombuffer(topic, np.uint8)).all(axis=1)
    return ~(same & (qid == queue_id) & (qoff == queue_offsets))


def py_damaged_records(buf, starts, sizes, expect: Expect = None) -> list[int]:
    """damaged_records in Python: the fixed fields with numpy, the CRCs per record."""
    starts = np.asarray(starts, np.int64)
    sizes = np.asarray(sizes, np.int64)
    expect = expectation(expect)
    if expect is not None and len(expect[2]) != len(starts):
        raise ValueError("expect: one int64 queue offset per record")
    n = len(buf)
    # too small, or not within buf (compared by differences: no sum can overflow): damaged, never read
    small = (sizes < RECORD_MIN) | (starts < 0) | (starts > n) | (sizes > n - np.minimum(np.maximum(starts, 0), n))
    idx = np.flatnonzero(~small)
    bad = np.flatnonzero(small).tolist()
    if not len(idx):
        return bad
    p, ends = starts[idx], starts[idx] + sizes[idx]
    a = np.frombuffer(buf, np.uint8) if not isinstance(buf, np.ndarray) else buf
    try:
        fixed = a[p[:, None] + _CRC_AND_LEN]                  # (n, 8): BODYCRC, BODYLEN
        last = a[(ends - CRC_DIGITS_BACK)[:, None] + _TAIL_END]   # (n, 11): the digits, the separator
        be = fixed.view(">u4")                      # big-endian, unsigned: a negative length is huge
        body_crc, body_len = be[:, 0].astype(np.int64), be[:, 1].astype(np.int64)
        strangers = None if expect is None else py_not_theirs(a, p, sizes[idx], body_len,
                                                              (expect[0], expect[1], expect[2][idx]))
    finally:
        del a                                   # no numpy view may pin an mmap past this call
    digits = last[:, :RECORD_CRC_DIGITS] - ord("0")           # uint8: anything but a digit is >= 10
    ok = (digits < 10).all(axis=1) & (last[:, RECORD_CRC_DIGITS] == 2)   # the separator
    stored = digits.astype(np.int64) @ _POW10
    d = ends - CRC_DIGITS_BACK
    b1 = p + OFF_BODY + body_len
    ok &= b1 + _TAIL_ROOM <= d                   # the body leaves room for the tail
    b1 = np.minimum(b1, d)                      # (one that does not: any slice, it is bad anyway)
    # the three CRCs of each record in record order (header, body and tail are adjacent: the
    # cache lines are read once), compared afterwards with numpy
    bodies: list[int] = []
    records: list[int] = []
    body, record = bodies.append, records.append
    crc32 = _crc32
    mv = memoryview(buf)
    try:
        for pos, e1, e2 in zip(p.tolist(), b1.tolist(), d.tolist()):
            h = pos + OFF_BODY
            body(crc32(mv[h:e1]))
            record(crc32(mv[pos:h], crc32(mv[e1:e2])))
    finally:
        mv.release()
    ok &= (np.array(bodies, np.int64) & 0x7FFFFFFF) == body_crc
    ok &= np.array(records, np.int64) == stored
    if strangers is not None:
        ok &= ~strangers
    if not ok.all():
        bad += idx[~ok].tolist()
        if len(bad) > 1:
            bad.sort()
    return bad


class DamageCounter:
    """Records a read path refused to serve: counted (``total``: the store's
    stats()["records_damaged"], the broker's tidemq_records_damaged_total) and logged at WARNING
    with their offsets, one line per DAMAGE_LOG_INTERVAL_S at most per condition, with the count
    since the last line (a corrupt segment read over and over does not flood the log). Two
    conditions, said as what they are: a record that fails its CRC (or is not a record at all), and
    an intact record that is not the queue's (``stranger``: its consume-queue unit, which has no CRC
    of its own, is damaged and points at another topic's, queue's or offset's record; counted in
    ``strangers`` too)."""

    def __init__(self, interval_s: float = DAMAGE_LOG_INTERVAL_S) -> None:
        self.total = 0
        self.strangers = 0
        self.interval_s = interval_s
        self._next_log = {False: 0.0, True: 0.0}
        self._unlogged = {False: 0, True: 0}

    def note(self, topic: str, queue_id: int, queue_offset: int, commitlog_offset: int,
             stranger: bool = False) -> None:
        self.total += 1
        self.strangers += stranger
        now = time.monotonic()
        if now < self._next_log[stranger]:
            self._unlogged[stranger] += 1
            return
        more, self._unlogged[stranger] = self._unlogged[stranger], 0
        self._next_log[stranger] = now + self.interval_s
        since = f" ({more} more since the last line)" if more else ""
        if stranger:
            log.warning("damaged consume-queue unit: %s/%d queue offset %d points at commit-log offset %d, an intact "
                        "record of another topic, queue or offset (not served here); its own record is not in the "
                        "log: skipped, readers go on after it%s; run `tidemq verify`", topic, queue_id, queue_offset,
                        commitlog_offset, since)
        else:
            log.warning("damaged record not served (fails its CRC): %s/%d queue offset %d, commit-log offset %d; "
                        "skipped, readers go on after it%s; run `tidemq verify`", topic, queue_id, queue_offset,
                        commitlog_offset, since)
