"""A consume-queue unit that does not stand for its record, found again in the commit log.

A unit has no CRC of its own (20 bytes: commit-log offset i64, size i32, tags hash i64). A damaged
one points at garbage, or at an intact record of another topic, queue or queue offset; the read
paths never serve such a record (reader.py: counted, logged). But the record the unit stood for is
usually intact in the log, and skipping the unit cost that intact message: the consumer moved past
its queue offset and never saw it. The consume queue is derived data, so the read path finds the
record again instead:

* from the end of the nearest intact unit before it (a record boundary: ``PREVIOUS_UNITS_MAX``
  units back at most, else the log's first offset), the log is walked (``CommitLog.iter_records``:
  CRC-checked, damage skipped as recovery skips it) for the record of (topic, queue id, queue
  offset); the walk stops at a record of the same queue with a larger queue offset (records of a
  queue lie in the log in queue-offset order), at the readable end, or after ``SCAN_BYTES_MAX``;
  stopped at that larger queue offset ``n``, the walk has also shown that no record of the queue
  offsets between is in the log: those are kept as not found at once (``ABSENT_MAX`` at most), so
  a stretch of holes whose records are gone (a replica's damaged stretch, a rebuild's marks) costs
  one walk, not one each (from the log's start, with no intact unit near);
* found: the unit it should be is kept here (``patch`` puts it over what the queue file holds at
  every read of that stretch) and the read starts again; not found (the record itself is damaged
  or gone): that is kept too (the log is not walked again for it), and the unit is skipped as
  before (MESSAGE_DAMAGED, counted).

What is kept lives in memory (at most ``KEPT_MAX`` units; past it, forgotten and found again on
demand): the queue file is not written from the read path (units are written by the dispatch
only). Each kept unit goes with the bytes the queue file held there when it was looked for, and is
put over those bytes only: a queue cut and written again (a replica's or a failed log's cut) or a
topic deleted and made again reads its own units, never a unit found for what was there before. ``tidemq verify`` reports the damaged units; a rebuild of the queue mends the file.

A walk reads up to ``SCAN_BYTES_MAX`` of the log. The broker reads on its event loop, so there the
walks run aside (``walk_aside``): on a thread of their own, one at a time (``WALKS_PENDING_MAX``
waiting at most), and ``find`` raises ``WalkPending`` instead of walking; the reader answers what
it read before the damaged unit (next offset: the unit's), or with nothing before it "not readable
yet" at the read's offset (OFFSET_OVERFLOW_ONE, next offset the read's own: the caller reads it
again), and the waiters ``on_walked`` gathered are called when the walk is kept, so a long poll
reads again then. A walk that fails is remembered (``FAILED_FOR_S``, ``FAILED_MAX`` at most): the
reads of its unit raise ``WalkFailed`` (as the walk inline would raise to its read) instead of
asking for it again at every read. What a walk keeps is the same on either thread (the readable end is the one
of the read that asked).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

import numpy as np

from ..record import codec
from .consume_queue import UNIT, UNIT_SIZE

log = logging.getLogger("tidemq.store")

PREVIOUS_UNITS_MAX = 64          # units looked at before a damaged one for where to start the walk
SCAN_BYTES_MAX = 256 << 20       # log bytes walked at most for one damaged unit
KEPT_MAX = 100_000               # units found again (or holes) kept at most
ABSENT_MAX = 16_384              # units after a damaged one a walk can show absent, kept as not found at once
WALKS_PENDING_MAX = 64           # walks waiting for the walking thread at most (walk_aside; past it: asked again later)
READ_AHEAD_BYTES = 4 << 20       # log bytes a walk aside asks the kernel to read ahead at a time
WAITERS_MAX = 1024               # on_walked callbacks kept at most (past it, the oldest are called at once)
FAILED_FOR_S = 10.0              # a walk aside that failed is not asked again for this long (its reads: WalkFailed)
FAILED_MAX = 1024                # failed walks remembered at most (past it, the oldest are forgotten)


class WalkPending(Exception):
    """The walk a read needs runs aside (walk_aside): nothing of it is kept yet; read again later.
    ``walked``: the walks kept so far (on_walked's ``since``); ``queue_offset``: the damaged unit's
    (what a read found before it is answered)."""

    def __init__(self, walked: int, queue_offset: int) -> None:
        super().__init__(walked, queue_offset)
        self.walked = walked
        self.queue_offset = queue_offset


class WalkFailed(Exception):
    """The walk aside a read needs failed (its cause: ``__cause__``), as the walk inline would have
    raised to the read: remembered for FAILED_FOR_S (or until the unit or the log's first offset
    changes), not walked again at every read meanwhile. ``queue_offset``: the damaged unit's (a read
    that found messages before it answers them, as for WalkPending)."""

    def __init__(self, topic: str, queue_id: int, queue_offset: int) -> None:
        super().__init__(topic, queue_id, queue_offset)
        self.queue_offset = queue_offset


class UnitRepair:
    def __init__(self, commit_log, topics) -> None:
        self.commit_log = commit_log
        self.topics = topics
        # (topic, queue id) -> queue offset -> (the unit the file held then, the unit found; None: not found)
        self.kept: dict[tuple[str, int], dict[int, tuple[bytes, bytes | None]]] = {}
        # the same, the units found only (what patch puts in place: a read looks at these alone)
        self.found: dict[tuple[str, int], dict[int, tuple[bytes, bytes]]] = {}
        self.count = 0
        self.found_again = 0          # damaged units whose record was found in the log (served)
        self.not_found = 0            # damaged units whose record is not in the log (skipped)
        self._lock = threading.Lock()
        self.fio = None               # walk_aside: read-ahead of each stretch a walk reads (FileIO.read_ahead)
        self._aside = False           # walks on the walking thread (walk_aside), never the caller's
        self._pending: dict[tuple[str, int, int], tuple] = {}   # walks asked for, in order, not kept yet
        self._waiters: list[Callable[[], None]] = []
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.walked = 0               # walks aside kept (or ended) so far
        self.monotonic_s = None       # walk_aside: the clock failed walks are remembered by
        # (topic, queue id, queue offset) -> (the unit the file held, the log's first offset, until, the failure)
        self._failed: dict[tuple[str, int, int], tuple[bytes, int, float, BaseException]] = {}

    # Walks aside --------------------------------------------------------------------------------
    def walk_aside(self, fio, monotonic_s: Callable[[], float]) -> None:
        """From now on, walks run on a thread of their own (started here) and ``find`` raises
        WalkPending where it would walk; ``fio``'s read_ahead is asked for each stretch walked. A
        walk that fails is remembered for FAILED_FOR_S by ``monotonic_s()`` (WalkFailed)."""
        with self._lock:
            if self._thread is not None:
                return
            self.fio = fio
            self.monotonic_s = monotonic_s
            self._aside = True
            self._stopped = False
            self._thread = threading.Thread(target=self._run, name="tidemq-unit-walk", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """The walking thread ends (the walk under way at its next record); what was asked and not
        walked is dropped (its readers read again and are answered by the stopped store)."""
        with self._lock:
            self._stopped = True
            self._pending.clear()
            self._failed.clear()
            t, self._thread = self._thread, None
            self._wake.notify_all()
            waiters, self._waiters = self._waiters, []
        if t is not None and t is not threading.current_thread():
            t.join()
        for w in waiters:
            w()

    def on_walked(self, callback: Callable[[], None], since: int | None = None) -> bool:
        """Call ``callback()`` once (from the walking thread) after the next walk is kept; at once
        when one was kept after ``since`` (a count of ``walked`` a read saw: WalkPending). False (and
        no call) when no walk is asked for and none was kept since then."""
        with self._lock:
            now = since is not None and self.walked != since
            if not now and not self._pending:
                return False
            if not now:
                self._waiters.append(callback)
        if now:
            callback()
            return True
        with self._lock:
            drop = self._waiters[:-WAITERS_MAX] if len(self._waiters) > WAITERS_MAX else []
            del self._waiters[:len(drop)]
        for w in drop:
            w()
        return True

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                key = next(iter(self._pending))
                cq, seen, end = self._pending[key]
            topic, queue_id, q = key
            failed = None
            try:
                unit, absent = self._walk(cq, topic, queue_id, q, end)
                if not self._stopped:
                    self._keep(cq, topic, queue_id, q, seen, unit, absent)
            except Exception as e:             # (a walk meeting a store being closed under it, a read error)
                log.exception("looking for the record of consume-queue unit %s/%d queue offset %d failed",
                              topic, queue_id, q)
                failed = e.with_traceback(None)        # (no frames held while it is remembered)
            with self._lock:
                if failed is not None:
                    while len(self._failed) >= FAILED_MAX:
                        del self._failed[next(iter(self._failed))]
                    self._failed[key] = (seen, self.commit_log.min_offset, self.monotonic_s() + FAILED_FOR_S,
                                         failed)
                self._pending.pop(key, None)
                self.walked += 1
                waiters, self._waiters = self._waiters, []
            for w in waiters:
                w()

    def patch(self, topic: str, queue_id: int, offset: int, raw: bytes) -> bytes:
        """``raw`` (units from queue offset ``offset``) with the units found again put over it."""
        kept = self.found.get((topic, queue_id)) if self.found else None
        if not kept:
            return raw
        n = len(raw) // UNIT_SIZE
        # (list(kept): a copy made at once, as find may add to it from another reader's thread)
        hits = [q for q in list(kept) if offset <= q < offset + n] if len(kept) < n else \
            [offset + i for i in range(n) if offset + i in kept]
        out = None
        for q in hits:
            e = kept.get(q)
            if e is None:
                continue
            seen, unit = e
            i = (q - offset) * UNIT_SIZE
            if raw[i:i + UNIT_SIZE] == seen:          # the file still holds what was looked at
                if out is None:
                    out = bytearray(raw)
                out[i:i + UNIT_SIZE] = unit
        return raw if out is None else bytes(out)

    @staticmethod
    def suspects(off: np.ndarray, size: np.ndarray, log_min: int, log_end: int) -> list[int]:
        """Indexes of the units (their offsets and sizes, int64 arrays) that may not stand for their record: a hole (size
        0: a rebuild's mark for a record that is not in the log -- or a page of zeros), a negative
        size or offset, a record said to lie past the log's end (a unit pointing before the log's
        first offset counts as cleaned away: it is never looked for)."""
        bad = (size <= 0) | (off < 0) | ((size > 0) & (off >= log_min) & (off + size > log_end))
        return [int(i) for i in np.flatnonzero(bad)]

    def known(self, topic: str, queue_id: int, q: int, seen: bytes) -> bool:
        """Whether unit ``q`` was looked for while the queue file held ``seen`` there."""
        kept = self.kept.get((topic, queue_id))
        e = kept.get(q) if kept is not None else None
        return e is not None and e[0] == seen

    def find(self, cq, topic: str, queue_id: int, q: int, end: int) -> bool:
        """Look for the record of unit ``q`` of ``cq`` in the log (up to log offset ``end``, the
        readable end); keep what it is (the unit, or a hole). True when found (read again).
        Walking aside (walk_aside): the walk is asked for and WalkPending raised."""
        seen = bytes(cq.read(q, 1))
        if len(seen) != UNIT_SIZE or self.known(topic, queue_id, q, seen):
            # looked for already (what was found is in what was read), or the unit not readable now
            # (its file cut or gone meanwhile): nothing kept that patch could never match, no read again
            return False
        if self._aside:
            with self._lock:
                key = (topic, queue_id, q)
                f = self._failed.get(key)
                if f is not None:
                    if f[0] == seen and f[1] == self.commit_log.min_offset and self.monotonic_s() < f[2]:
                        raise WalkFailed(topic, queue_id, q) from f[3]
                    del self._failed[key]       # (its time is over, or the unit or the log changed: walked again)
                if key not in self._pending and len(self._pending) < WALKS_PENDING_MAX and not self._stopped:
                    self._pending[key] = (cq, seen, end)
                    self._wake.notify()
                walked = self.walked
            raise WalkPending(walked, q)
        unit, absent = self._walk(cq, topic, queue_id, q, end)
        return self._keep(cq, topic, queue_id, q, seen, unit, absent)

    def _walk(self, cq, topic: str, queue_id: int, q: int, end: int) -> tuple[bytes | None, int]:
        """(the unit of the record of (topic, queue id, q) in the log, or None; the units after q the
        walk showed absent from the log)."""
        start = self._start(cq, topic, queue_id, q)
        unit = None
        absent = 0                         # the units after q the walk showed absent from the log
        if start is None:
            return unit, absent
        ahead = start                      # read-ahead asked for up to here (walk_aside)
        for kind, phys, size, mf, pos in self.commit_log.iter_records(start):
            if phys >= end or phys - start > SCAN_BYTES_MAX or (self._aside and self._stopped):
                break
            if self.fio is not None and phys >= ahead:
                ahead = min(mf.start_offset + mf.size, phys + READ_AHEAD_BYTES)
                self.fio.read_ahead(mf.mapping, pos, ahead - phys)
            if kind != codec.REC_OK:
                continue
            qid, qoff, _ts, t, props_raw = codec.decode_meta(mf.mapping, pos)
            if t != topic or qid != queue_id or self.topics.is_dead(topic, phys):
                continue
            if qoff > q:               # past it: the queue's records lie in queue-offset order,
                absent = min(qoff - q - 1, ABSENT_MAX)  # and none of those between was in the walk
                break
            if qoff == q:
                props = codec.decode_properties(props_raw) if props_raw else {}
                unit = UNIT.pack(phys, size, codec.tags_hash(props.get(codec.PROP_TAGS)))
                break
        return unit, absent

    def _keep(self, cq, topic: str, queue_id: int, q: int, seen: bytes, unit: bytes | None, absent: int) -> bool:
        """What a walk found for unit ``q`` (the file holding ``seen`` there) kept; True when found."""
        with self._lock:
            if self.count >= KEPT_MAX:
                self.kept, self.found, self.count = {}, {}, 0
            kept = self.kept.setdefault((topic, queue_id), {})
            kept[q] = (seen, unit)
            if unit is not None:
                self.found.setdefault((topic, queue_id), {})[q] = (seen, unit)
            elif q in self.found.get((topic, queue_id), ()):
                del self.found[(topic, queue_id)][q]          # (looked for again: the file changed)
            self.count += 1
            if unit is None:
                self.not_found += 1
            else:
                self.found_again += 1
            if absent:
                after = cq.read(q + 1, absent)
                for i in range(len(after) // UNIT_SIZE):
                    if q + 1 + i not in kept:
                        kept[q + 1 + i] = (bytes(after[i * UNIT_SIZE:(i + 1) * UNIT_SIZE]), None)
                        self.count += 1
                        self.not_found += 1
        if unit is not None:
            log.warning("consume-queue unit %s/%d queue offset %d is damaged; its record is intact in the "
                        "commit log at %d: served from there (run `tidemq verify`)", topic, queue_id, q,
                        UNIT.unpack(unit)[0])
        return unit is not None

    def _start(self, cq, topic: str, queue_id: int, q: int) -> int | None:
        """Where the walk starts: the end of the nearest intact unit's record before ``q`` (the log's
        first offset when there is none near)."""
        lo = max(cq.min_offset, q - PREVIOUS_UNITS_MAX)
        raw = self.patch(topic, queue_id, lo, cq.read(lo, q - lo)) if q > lo else b""
        for i in range(len(raw) // UNIT_SIZE - 1, -1, -1):
            phys, size, _th = UNIT.unpack_from(raw, i * UNIT_SIZE)
            if size <= 0:
                continue
            m = self.commit_log.read_message(phys, size)
            if m is not None and m.intact() and m.topic == topic and m.queue_id == queue_id \
                    and m.queue_offset == lo + i:
                return phys + size
        return self.commit_log.min_offset
