"""Dispatch: commit log -> consume queues + index, in log order.

Two ways in, one result:

* ``dispatch_batch`` runs inline in the put path, under the put lock, with the
  fields the writer already has (no re-read of the log). RocketMQ re-reads the
  log in a separate ReputMessageService; doing it inline costs less in Python
  and keeps the same order, and there is no dispatch lag to bound.
* ``redispatch`` reads records back from the log from any record boundary and
  puts their units idempotently (a unit already there is skipped, a torn one is
  rewritten). Recovery and the write-error self-healing use it; started at the
  log's first offset over an empty ``consumequeue/`` it rebuilds every queue, so
  consume queues and the index are always rebuildable from the commit log alone.

A failed consume-queue or index write is retried ``dispatch_write_retries_max``
times; if it still fails, ``pending_from`` records the first record whose
dispatch is incomplete and ``error`` says why. The store refuses puts while
``error`` is set and calls ``heal()`` from its flush service: once a redispatch
from ``pending_from`` succeeds the error clears by itself, without a restart.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

from ..accel import ACCEL
from ..record import codec
from ..record.crc import crc32
from .consume_queue import UNIT, ConsumeQueue, ConsumeQueueTable
from .index_file import HASHED_ITEM, IndexService

log = logging.getLogger("tidemq.store")

HEAL_STEP_RECORDS = 4096       # records one step of healing re-dispatches while it holds the put lock


@dataclass
class RedispatchReport:
    from_offset: int = 0
    end_offset: int = 0
    records: int = 0
    complete: bool = True          # it reached the log's end (False: it stopped at records_max)
    units_appended: int = 0
    units_fixed: int = 0
    units_skipped: int = 0
    index_entries: int = 0
    queues_rebuilt: list[str] = field(default_factory=list)


def index_keys(topic: str, keys, uniq: str | None) -> list[str]:
    out = [f"{topic}#{k}" for k in keys if k]
    if uniq:
        out.append(f"{topic}#{uniq}")
    return out


def py_dispatch_merge(entries: list[tuple], index: bool) -> tuple[dict, list]:
    """Deferred dispatches (dispatch_batch's arguments each, in log order) merged for one write of
    each: (units, runs). ``units``: consume queue -> [first queue offset, bytearray of its units]
    (the first entry of a queue has its own pair taken, as it is when its units are a bytearray,
    the later ones' units added to it: an entry's units and index items are its own, each append
    builds them afresh, put_lock.py). ``runs``: [bytearray of hashed index items (HASHED_ITEM: as
    record_loop.append_slices collects them; (keys, phys) pairs hashed here as key_hash does), store
    time ms], one per second of store time of consecutive entries (a run's time its last entry's);
    none when ``index`` is false. Twin of tidemq._accel.dispatch_merge (the same units and runs)."""
    units: dict = {}
    get = units.get
    runs: list = []
    last = None                  # runs[-1]
    pack = HASHED_ITEM.pack
    for u, items, now_ms, _first, _end in entries:
        for cq, g in u.items():
            have = get(cq)
            if have is None:
                units[cq] = g if type(g[1]) is bytearray else [g[0], bytearray(g[1])]
            else:                 # (log order: this queue's units continue where the last entry's end)
                have[1] += g[1]
        if index and items:
            if type(items) is not bytearray:
                items = bytearray(b"".join(pack(crc32(k.encode("utf-8")) & 0x7FFFFFFF, phys)
                                           for ks, phys in items for k in ks))
            if last is not None and last[1] // 1000 == now_ms // 1000:
                last[0] += items
                last[1] = now_ms
            else:
                last = [items, now_ms]
                runs.append(last)
    return units, runs


dispatch_merge = ACCEL.dispatch_merge if ACCEL is not None else py_dispatch_merge


class _UnitWriter:
    """Recovery's unit writes: appends buffered per queue (one pwrite per 4096 units, not
    one per record), units already there checked against a read-ahead chunk (one pread per
    4096 units); anything else goes through ConsumeQueue.put_unit_checked."""

    CHUNK_UNITS = 4096

    def __init__(self, rewrite: bool = False) -> None:
        """``rewrite``: a unit found as it should be is written again all the same (recovery after an
        abnormal stop: recovery._rewrite says why)."""
        self.pending: dict[ConsumeQueue, list] = {}     # cq -> [first queue offset, bytearray]
        self.chunks: dict[ConsumeQueue, tuple[int, bytes]] = {}
        self.rewrite = rewrite

    HOLE = UNIT.pack(0, 0, 0)      # a unit of size 0: the message is lost (get skips it, verify reports it)

    def put(self, cq: ConsumeQueue, qoff: int, unit: bytes, fill_gaps: bool = False) -> str:
        p = self.pending.get(cq)
        expected = cq.max_offset + (len(p[1]) // 20 if p is not None else 0)
        if fill_gaps and qoff > expected and (cq.files or p is not None):
            # a rebuild past a corrupt record: its queue offset stays a hole, the rest is reachable
            if p is None:
                p = self.pending[cq] = [expected, bytearray()]
            p[1] += self.HOLE * (qoff - expected)
            expected = qoff
        if qoff == expected:
            if p is None:
                self.pending[cq] = [qoff, bytearray(unit)]
            else:
                p[1] += unit
                if len(p[1]) >= self.CHUNK_UNITS * 20:
                    self.flush(cq)
            return "appended"
        if p is not None:
            self.flush(cq)
        if cq.min_offset <= qoff < cq.max_offset:
            c = self.chunks.get(cq)
            if c is None or not (c[0] <= qoff < c[0] + len(c[1]) // 20):
                c = self.chunks[cq] = (qoff, cq.read(qoff, self.CHUNK_UNITS))
            i = (qoff - c[0]) * 20
            if c[1][i:i + 20] == unit:
                if self.rewrite:
                    cq.write_units(qoff, unit)
                return "skip"
            self.chunks.pop(cq, None)
        return cq.put_unit_checked(qoff, *UNIT.unpack(unit))

    def flush(self, cq: ConsumeQueue) -> None:
        p = self.pending.pop(cq, None)
        if p is not None:
            cq.append(p[0], bytes(p[1]))

    def flush_all(self) -> None:
        for cq in list(self.pending):
            self.flush(cq)


class Dispatcher:
    def __init__(self, queues: ConsumeQueueTable, index: IndexService | None, retries_max: int) -> None:
        self.queues = queues
        self.index = index
        self.retries_max = retries_max
        self.dispatched_offset = 0          # every record before it is in the queues and index
        self.last_store_timestamp_ms = 0
        self.pending_from: int | None = None
        self.error: str | None = None
        self.write_failures = 0
        self.is_dead = lambda topic, phys: False   # TopicTable.is_dead: records of deleted topics

    # Inline path --------------------------------------------------------------------
    def dispatch_batch(self, units: dict, index_items, now_ms: int, first_phys: int,
                       end_offset: int) -> None:
        """Write the units and index entries of the records just appended (built by the append).

        units: consume queue -> [first queue offset, bytearray of units]; index_items: (keys, phys)
        pairs, or a bytearray of hashed items (index_file.HASHED_ITEM: record_loop.append_slices').
        """
        self._dispatch(units, ((index_items, now_ms),) if index_items else (), now_ms, first_phys, end_offset)

    def dispatch_many(self, entries: list[tuple]) -> None:
        """``dispatch_batch(*entry)`` for each of ``entries`` (consecutive appends, in log order: the
        dispatches puts left for after their answer, put_lock.PutLock), written as one: each consume
        queue's units in one write, the index entries in one run per second of store time (an index
        entry keeps its time in seconds: a run's entries take its last put's time), merged by
        dispatch_merge (compiled when tidemq.accel has it). The outcome is the same as one
        dispatch_batch after the other (a failure: ``pending_from`` the first entry's first record,
        healed from the log)."""
        units, runs = dispatch_merge(entries, self.index is not None)
        self._dispatch(units, runs, entries[-1][2], entries[0][3], entries[-1][4])

    def _dispatch(self, units: dict, runs, now_ms: int, first_phys: int, end_offset: int) -> None:
        """dispatch_batch's writes: ``runs`` the index items as (items, store time ms) pairs."""
        if self.pending_from is not None:
            # an earlier batch is not fully dispatched: this one waits for heal() (order is kept)
            return
        try:
            # (after a failure pending_from is set and later batches wait above: every queue here
            # continues exactly at its max offset)
            for cq, g in units.items():
                try:                  # (the first attempt inline: _retry_after the others)
                    cq.append(g[0], g[1])
                except OSError as e:
                    self._retry_after(e, cq.append, cq.dir, g[0], g[1])
            index = self.index
            if index is not None:
                for index_items, ts_ms in runs:
                    if isinstance(index_items, bytearray):
                        put, flat, total = index.put_hashed, index_items, len(index_items) // HASHED_ITEM.size
                    else:
                        put = index.put_many
                        flat = [(k, phys) for ks, phys in index_items for k in ks]
                        total = len(flat)
                    done = 0
                    while done < total:      # each call fills what fits in one file
                        try:
                            done += put(flat, done, ts_ms)
                        except OSError as e:
                            done += self._retry_after(e, put, index.dir, flat, done, ts_ms)
        except Exception as e:        # noqa: BLE001 - never out of a put: refuse writes until healed
            self._fail(first_phys, e if isinstance(e, OSError) else OSError(0, repr(e)))
            return
        self.dispatched_offset = end_offset
        self.last_store_timestamp_ms = now_ms

    def _retry_after(self, e: OSError, fn, where: str, *args):
        """A write whose first attempt (made inline by the caller: no frame per write) failed with
        ``e``: failures counted (``write_failures``), tried again up to ``retries_max`` times, 1, 2, ..
        ms apart; what it returns, or an OSError naming ``where`` once the retries are spent."""
        for attempt in range(1, self.retries_max + 1):
            self.write_failures += 1
            time.sleep(0.001 * attempt)
            try:
                return fn(*args)
            except OSError as again:
                e = again
        self.write_failures += 1
        raise OSError(e.errno, f"{e.strerror or e} ({where})") from e

    def fail(self, from_offset: int, e: OSError) -> None:
        """Record a dispatch from ``from_offset`` that could not be done (puts are refused until
        ``heal`` redispatches from there)."""
        self._fail(from_offset, e)

    def _fail(self, from_offset: int, e: OSError) -> None:
        self.pending_from = from_offset if self.pending_from is None else min(self.pending_from, from_offset)
        self.error = f"consume queue / index write failed: {e}"
        log.error("dispatch failed at commit-log offset %d: %s; puts are refused until it heals",
                  from_offset, e)

    def heal(self, commit_log, lock=None, step_records: int = HEAL_STEP_RECORDS) -> bool:
        """Retry an incomplete dispatch from the log; True when the error is gone.

        In steps of at most ``step_records`` records, each under ``lock`` (the store's put lock) and
        the lock released between them: a put or a read that needs the lock waits one step, never
        the whole re-dispatch. Puts are refused while ``error`` stands (StoreWriter.refusal, checked
        under the lock), so nothing is appended between steps; a step still runs under the lock
        because topic creation, deletion and a follower's truncation change the queues under it."""
        if self.pending_from is None:
            return True
        began, done = self.pending_from, 0
        pos = began
        while True:
            with lock if lock is not None else nullcontext():
                if self.pending_from is None:
                    return True
                try:
                    rep = self.redispatch(commit_log, pos, records_max=step_records)
                except OSError as e:
                    self.error = f"consume queue / index write failed: {e}"
                    return False
                done += rep.records
                pos = rep.end_offset
                if rep.complete:
                    log.warning("dispatch healed: %d records re-dispatched from %d", done, began)
                    self.pending_from = None
                    self.error = None
                    return True

    # Read-back path -------------------------------------------------------------------
    def redispatch(self, commit_log, from_offset: int, rebuild: bool = False,
                   only: set[tuple[str, int]] | None = None, index_from: int | None = None,
                   records_max: int | None = None, rewrite: bool = False) -> RedispatchReport:
        """Dispatch every valid record from ``from_offset`` to the log's end (idempotent); with
        ``records_max``, at most that many (``complete`` False when it stopped there: go on from
        ``end_offset``); ``rewrite``: units already right are written again (_UnitWriter).

        rebuild: queues are rebuilt from scratch (an empty queue starts at the first
        offset it meets). Queues found with missing units are rebuilt from the log's start.
        """
        rep = RedispatchReport(from_offset=from_offset, end_offset=from_offset)
        gaps: set[tuple[str, int]] = set()
        index = self.index
        # index entries are in log order: records before the index's last entry are indexed already
        index_end = index.end_phy_offset if index is not None else -1
        if index_from is not None:
            # after a crash the index header may be newer than its entries: re-index from the last
            # durable point (lookups drop duplicates)
            index_end = min(index_end, index_from)
        writer = _UnitWriter(rewrite)
        try:
            self._redispatch_records(commit_log, from_offset, rebuild, only, rep, gaps, writer, index, index_end,
                                     records_max)
        finally:
            writer.flush_all()
        if gaps and not rebuild:
            for topic, qid in sorted(gaps):
                cq = self.queues.get_or_create(topic, qid)
                cq.reset_to(0)
                rep.queues_rebuilt.append(f"{topic}/{qid}")
            log.warning("consume queues with missing units rebuilt from the commit log: %s",
                        ", ".join(rep.queues_rebuilt))
            sub = self.redispatch_rebuild(commit_log, gaps)
            rep.units_appended += sub.units_appended
        self.dispatched_offset = max(self.dispatched_offset, rep.end_offset)
        return rep

    def _redispatch_records(self, commit_log, from_offset, rebuild, only, rep, gaps, writer, index,
                            index_end, records_max=None) -> None:
        pack = UNIT.pack
        for kind, phys, size, mf, pos in commit_log.iter_records(from_offset, verify_crc=False):
            if records_max is not None and rep.records >= records_max:
                rep.complete = False
                return
            if kind != codec.REC_OK:
                rep.end_offset = phys + size if kind == codec.REC_BLANK else phys
                continue
            qid, qoff, store_ts, topic, props_raw = codec.decode_meta(mf.mapping, pos)
            if (only is not None and (topic, qid) not in only) or self.is_dead(topic, phys):
                rep.end_offset = phys + size
                continue
            props = codec.decode_properties(props_raw) if props_raw else {}
            cq = self.queues.get_or_create(topic, qid)
            if rebuild and cq.max_offset == 0 and not cq.files and qoff > 0 and cq not in writer.pending:
                cq.reset_to(qoff)
            res = writer.put(cq, qoff, pack(phys, size, codec.tags_hash(props.get(codec.PROP_TAGS))),
                             fill_gaps=rebuild)
            if res == "appended":
                rep.units_appended += 1
            elif res == "fixed":
                rep.units_fixed += 1
            elif res == "skip":
                rep.units_skipped += 1
            else:
                gaps.add((topic, qid))
            if index is not None and phys >= index_end:
                ks = props.get(codec.PROP_KEYS)
                for k in index_keys(topic, ks.split(codec.KEY_SEP) if ks else (), props.get(codec.PROP_UNIQ_KEY)):
                    index.put(k, phys, store_ts)
                    rep.index_entries += 1
            rep.records += 1
            rep.end_offset = phys + size
            self.last_store_timestamp_ms = store_ts

    def redispatch_rebuild(self, commit_log, only: set[tuple[str, int]]) -> RedispatchReport:
        saved = self.index
        self.index = None      # the index already had its pass
        try:
            return self.redispatch(commit_log, commit_log.min_offset, rebuild=True, only=only)
        finally:
            self.index = saved
