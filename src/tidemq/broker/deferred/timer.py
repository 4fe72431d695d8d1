"""Delayed messages: parked in the schedule topic, moved to their topic when due.

A DELAY message whose delivery time is in the future is stored in
``rmq_sys_wheel_timer`` (one queue; the real topic and the time in properties,
see parking.py), so it is durable like any message and invisible to consumers.
ONE task per broker (:meth:`Timer.run`) reads that queue in order into a
time-ordered index (a heap of ``(deliver_ms, schedule offset)``: 16 bytes of
data per waiting message, no timer each) and, as entries fall due, puts the
messages into their real topics in batches.

Progress, ``<root>/broker/timer/checkpoint.json`` (state/layout.py; a checked document,
state/checked.py, written atomically at most once a second, and at shutdown)::

    {"enqueued": E, "low": L, "delivered_before_ms": T, "last": [Q, P]}

meaning: every schedule message at an offset below E whose time is below T was
moved, and every offset below L was moved; the message at schedule offset Q (the
last one read, below E) was the record at commit-log offset P. A failure of the log
cuts the schedule queue back and the next delayed messages take its offsets again:
killed before the timer was cut back (cut_back rewrites the checkpoint), the next
start finds another record at Q and cuts the progress back to the first offset
whose record lies past P (a queue's records lie in the log in its order), so a
message parked at a reused offset is neither skipped as moved nor left unread. At start the queue is read again
from L: offsets below E with a time below T are skipped, the rest are waiting.
What was moved after the last checkpoint looks unmoved; for every entry parked
before the start :func:`parking.already_moved` asks the index before putting it
(when it falls due, by this process's clock: the wall clock may have stepped back
across the restart), so a kill -9 neither loses nor doubles a message. A message due while the
broker was down is moved in the first round after the start. A damaged checkpoint falls
back to its previous version, or to none: the queue is read again from its start, and
every entry is looked up in the index before it is moved (none doubled).

Recall (RecallMessage, RocketMQ 5.3.2+): a waiting message is recalled by its schedule offset
(:meth:`Timer.recall`, given a handle by recall.py); it stays in the schedule queue and is never
moved: the offset is kept in the checkpoint's ``"recalled"`` list, written before the answer, until
the timer has passed it. A message whose time has come (moved, or being moved) cannot be recalled
any more (RocketMQ: "recall failed, timestamp invalid").

Bounds: at most ``timer_pending_max`` waiting messages (a send beyond is refused
by the service), ``round_max`` (ROUND_MAX) reads or moves per round.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import logging
import os
import threading
from typing import Callable

from ...store import MessageStore
from ... import checked
from ...said import Conditions, kind_of
from ..state.layout import StateLayout, state_dir as state_dir_of
from . import parking
from ..topic_names import SCHEDULE_TOPIC
from .parking import PROP_DELIVER_MS

log = logging.getLogger("tidemq.broker")

ROUND_MAX = 1024                # schedule messages read, or moved, per round at most
CHECKPOINT_INTERVAL_S = 1.0
RETRY_AFTER_FAILURE_S = 1.0
NEVER = 1 << 62


class Recall(enum.Enum):
    """What a recall found (:meth:`Timer.recall`)."""
    RECALLED = "recalled"            # it will never be moved (or was recalled before)
    DUE = "due"                      # its time came: moved, or being moved
    UNKNOWN = "unknown"              # no such waiting message at that offset


class Timer:
    def __init__(self, store: MessageStore, on_moved: Callable[[], None] = lambda: None, state_dir: str | None = None,
                 round_max: int = ROUND_MAX) -> None:
        """``state_dir``: the broker's state directory (default: the store root's, state/layout.py)."""
        self.store = store
        self.on_moved = on_moved
        self.round_max = round_max
        self.failures = Conditions(log, "timer")     # a disk refusing its progress: said once (turn)
        self.path = StateLayout(state_dir or state_dir_of(store.config.root_dir)).timer_checkpoint
        self.heap: list[tuple[int, int]] = []      # (deliver_ms, schedule offset), waiting
        self._offsets: list[int] = []              # offsets of the heap's entries (min: "low"), lazily pruned
        self._moved: set[int] = set()              # moved offsets still in _offsets
        self.read_offset = 0                       # next schedule offset to read into the heap
        self._skip_below = (0, 0)                  # (E, T) of the checkpoint the start read
        self.recover_below = 0                     # entries parked before the start may have been moved before it
        self.wake = asyncio.Event()
        self._saved: tuple | None = None
        self._saved_at = 0.0
        self.recalled: set[int] = set()            # schedule offsets recalled, not passed yet (never moved)
        self._recall_lock = threading.Lock()       # a recall and a round's choice of what is due: one at a time
        self._due_through_ms = 0                   # the latest time a round took due messages at
        self._moving: list[tuple[int, int]] = []   # (deliver_ms, offset) a round took off the heap, not settled
        # offset -> (deliver_ms, end of its copy in the log) of moves whose copy was not flushed yet when
        # it was put (ASYNC_FLUSH): a failure of the log can take the copy back (cut_back)
        self._unflushed: dict[int, tuple[int, int]] = {}
        self._cuts = 0                             # failures of the log seen (cut_back)
        self._taken: list[Callable[[int], bool]] = []   # what each of them took (cut_back's ``taken``)
        self._last: tuple[int, int] | None = None  # (schedule offset, commit-log offset) of the last message read
        self._saved_last: list | None = None       # the checkpoint's "last", while what it covered is re-read

    # Start / stop ---------------------------------------------------------------------
    def open(self) -> None:
        parking.ensure_topic(self.store, SCHEDULE_TOPIC)
        self.store.fio.makedirs(os.path.dirname(self.path))
        low = self.store.min_offset(SCHEDULE_TOPIC, 0)
        doc = checked.load(self.store.fio, self.path, "timer progress", check=check_progress).doc
        if doc is not None:
            end = self.store.max_offset(SCHEDULE_TOPIC, 0)
            if doc["enqueued"] > end or doc["low"] > end:
                # progress through offsets this log does not hold (a promoted follower's copy of its old
                # leader's, ASYNC replication: the tail the failover took back): the messages parked from
                # now on get those offsets, and must be neither left unread nor skipped as moved. The
                # progress is cut back to the end, durably before anything is parked
                log.warning("timer progress %s stood past the schedule queue's end %d: cut back to it", doc, end)
                doc = {**doc, "enqueued": min(doc["enqueued"], end), "low": min(doc["low"], end),
                       "recalled": [o for o in doc.get("recalled", ()) if o < end]}
                checked.write(self.store.fio, self.path, doc)
            doc = self._cut_where_reused(doc)
            self._skip_below = (doc["enqueued"], doc["delivered_before_ms"])
            self._saved_last = doc.get("last")
            low = max(low, doc["low"])
            self.recalled = {o for o in doc.get("recalled", ()) if o >= low}
            self._saved = (doc["enqueued"], doc["low"], doc["delivered_before_ms"])
        self.read_offset = low
        # an offset, not a time: the old process moved what was due by ITS clock, which a step of the
        # wall clock (back, across the restart) may put past this one's; every entry parked before
        # this start is looked up in the index when it falls due, whenever that is
        self.recover_below = self.store.max_offset(SCHEDULE_TOPIC, 0)

    def _cut_where_reused(self, doc: dict) -> dict:
        """``doc`` (the checkpoint read at start), cut back to where its offsets still name the records
        it counted: its "last" message is another record now (a failure of the log cut the queue back and
        the next delayed messages took its offsets; the process was killed before cut_back rewrote the
        checkpoint). Written durably before anything is parked when cut."""
        last = doc.get("last")
        if last is None:
            return doc
        q, p = last
        now = parking.read_at(self.store, SCHEDULE_TOPIC, q)
        if now is None or now is parking.NOT_READABLE or now.commitlog_offset == p:
            return doc                    # the same record (or none to tell by: cleaned away, not readable)
        lo, hi = self.store.min_offset(SCHEDULE_TOPIC, 0), q
        while lo < hi:                    # the first offset whose record lies past P (reused): the cut
            mid = (lo + hi) // 2
            m = parking.read_at(self.store, SCHEDULE_TOPIC, mid)
            if m is None or m is parking.NOT_READABLE or m.commitlog_offset > p:
                hi = mid                  # (not readable: taken as reused, read again and looked up)
            else:
                lo = mid + 1
        cut = lo
        log.warning("timer progress %s: schedule offset %d is another message than the one it counted (the log "
                    "failed and its offsets were taken again): cut back to %d", doc, q, cut)
        doc = {**doc, "enqueued": min(doc["enqueued"], cut), "low": min(doc["low"], cut),
               "recalled": [o for o in doc.get("recalled", ()) if o < cut]}
        doc.pop("last")
        fp = self._fingerprint(cut - 1)
        if fp is not None:
            doc["last"] = list(fp)
        checked.write(self.store.fio, self.path, doc)
        return doc

    def _fingerprint(self, offset: int) -> tuple[int, int] | None:
        """(``offset``, the commit-log offset of its record) as the schedule queue holds it now; None: none."""
        if offset < 0:
            return None
        m = parking.read_at(self.store, SCHEDULE_TOPIC, offset)
        if m is None or m is parking.NOT_READABLE:
            return None
        return offset, m.commitlog_offset

    def close(self) -> None:
        self.checkpoint(force=True)

    @property
    def pending(self) -> int:
        return len(self.heap) + max(0, self.store.max_offset(SCHEDULE_TOPIC, 0) - self.read_offset)

    def next_due_ms(self) -> int | None:
        return self.heap[0][0] if self.heap else None

    # Reading the schedule queue -------------------------------------------------------
    def enqueue(self, limit: int | None = None) -> int:
        """Read up to ``limit`` (default round_max) new schedule messages into the heap; how many were read."""
        limit = self.round_max if limit is None else limit
        e, t = self._skip_below
        first = self.read_offset
        cuts = self._cuts
        for nxt, msgs in parking.batches(self.store, SCHEDULE_TOPIC, self.read_offset, limit):
            with self._recall_lock:
                if self._cuts != cuts:           # a cut of the log (cut_back) while it read: read again
                    return 0
                for m in msgs:
                    d = int(m.properties.get(PROP_DELIVER_MS, "0"))
                    if not (m.queue_offset < e and d < t):          # not moved before the last checkpoint
                        heapq.heappush(self.heap, (d, m.queue_offset))
                        heapq.heappush(self._offsets, m.queue_offset)
                if msgs:
                    self._last = (msgs[-1].queue_offset, msgs[-1].commitlog_offset)
                self.read_offset = nxt
        return self.read_offset - first

    # Moving due messages --------------------------------------------------------------
    def move_due(self, now_ms: int, limit: int | None = None) -> tuple[int, bool]:
        """Put the messages due by ``now_ms`` (at most ``limit``, default round_max) into their topics.
        Returns (moved, failed): failed means a put was refused (they wait for a retry). While their
        put runs (it may wait, on a thread) they count as waiting for ``progress`` (a checkpoint or a
        follower's copy written meanwhile never says they were moved); a put that raises puts them
        back on the heap."""
        limit = self.round_max if limit is None else limit
        due: list[tuple[int, int]] = []
        with self._recall_lock:
            self._due_through_ms = max(self._due_through_ms, now_ms)
            while self.heap and self.heap[0][0] <= now_ms and len(due) < limit:
                due.append(heapq.heappop(self.heap))
            self._moving = due
        if not due:
            return 0, False
        settled: set[int] = set()
        try:
            return self._move(due, settled)
        finally:
            with self._recall_lock:
                for d, o in due:
                    # the put raised: they wait for the next round (unless a cut of the log took their
                    # offset back meanwhile: read again from there, cut_back)
                    if o not in settled and o < self.read_offset:
                        heapq.heappush(self.heap, (d, o))
                self._moving = []

    def _move(self, due: list[tuple[int, int]], settled: set[int]) -> tuple[int, bool]:
        msgs, which = [], []
        not_now = False
        for d, o in due:
            if o in self.recalled:                               # recalled: passed, never moved
                self._done(o)
                settled.add(o)
                continue
            s = parking.read_at(self.store, SCHEDULE_TOPIC, o)
            if s is parking.NOT_READABLE:                        # there, not readable now: back on the heap
                not_now = True
                continue
            if s is None:
                log.error("delayed message at schedule offset %d is gone from the store (retention?)", o)
                self._done(o)
                settled.add(o)
                continue
            if int(s.properties.get(PROP_DELIVER_MS, "0")) != d:
                not_now = True  # another message took the offset (a cut of the log): cut_back reads it again
                continue
            if o < self.recover_below and parking.already_moved(self.store, s):
                self._done(o)                                    # moved just before a crash
                settled.add(o)
                continue
            real = s.properties.get(parking.PROP_REAL_TOPIC, "")
            n = self.store.queue_count(real)
            if n == 0:
                log.error("delayed message %s: its topic %r no longer exists; dropped", s.msg_id, real)
                self._done(o)
                settled.add(o)
                continue
            msgs.append(parking.unpark(s, n))
            which.append((d, o))
        failed = not_now
        moved = 0
        if msgs:
            cuts = self._cuts
            results = self.store.put_batch(msgs)
            unsure = parking.may_be_taken_back(self.store)
            with self._recall_lock:     # (cut_back runs on the loop while this round runs on a thread)
                # a cut of the log (cut_back) after the copies were written and before this: cut_back did
                # not see them as unflushed; a copy any of those cuts took is not a move (moved again)
                since = self._taken[cuts:] if self._cuts != cuts else ()
                for (d, o), r in zip(which, results):
                    if not r.ok:
                        continue
                    end = r.commitlog_offset + r.size
                    if any(taken(end) for taken in since):
                        failed = True                            # back on the heap (move_due)
                        log.warning("delayed message at schedule offset %d: its move was taken back by the "
                                    "failure of the log; moved again", o)
                        continue
                    self._passed(o)
                    settled.add(o)
                    moved += 1
                    if unsure(end):
                        self._unflushed[o] = (d, end)
            for (d, o), r in zip(which, results):
                if not r.ok:
                    failed = True                                # back on the heap (move_due)
                    log.warning("delayed message at schedule offset %d not moved yet: %s %s", o,
                                r.status.name, r.error or "")
        if moved:
            self.on_moved()
        return moved, failed

    def _done(self, offset: int) -> None:
        with self._recall_lock:
            self._passed(offset)

    def _passed(self, offset: int) -> None:
        """``offset`` moved or passed for good (under _recall_lock: cut_back rewrites what this reads)."""
        if offset >= self.read_offset:          # a cut of the log took it back meanwhile (cut_back)
            return
        self._moved.add(offset)
        offs = self._offsets
        while offs and offs[0] in self._moved:
            self._moved.discard(heapq.heappop(offs))

    # After a failure of the commit log -----------------------------------------------------
    def cut_back(self, end: int | None, taken: Callable[[int], bool]) -> None:
        """A failure of the commit log (store/log_failure.py) cut the schedule queue back to ``end``
        (None: not cut) and took the records ending where ``taken`` (LogFailure.covers) says: what was read
        past ``end`` is forgotten (the delayed messages parked from now on take those offsets: read
        them, never take one for another), and a move whose copy was taken back waits again. The
        checkpoint says so before this returns (OSError: at the next round's)."""
        with self._recall_lock:
            self._cuts += 1
            self._taken.append(taken)
            back = [(o, d) for o, (d, ce) in self._unflushed.items() if taken(ce)]
            for o, _d in back:
                del self._unflushed[o]
            if end is not None and self.read_offset > end:
                self.heap = [(d, o) for d, o in self.heap if o < end]
                heapq.heapify(self.heap)
                self._offsets = [o for o in self._offsets if o < end]
                heapq.heapify(self._offsets)
                self._moved = {o for o in self._moved if o < end}
                self.recalled = {o for o in self.recalled if o < end}
                self.read_offset = end
                # what the checkpoint says it read through: the message below the cut, as the log holds it
                self._last = self._fingerprint(end - 1)
                if self._saved_last is not None and self._saved_last[0] >= end:
                    self._saved_last = list(self._last) if self._last is not None else None
                e, t = self._skip_below
                self._skip_below = (min(e, end), t)
                self.recover_below = min(self.recover_below, end)
                if self._saved is not None:
                    self._saved = (min(self._saved[0], end), min(self._saved[1], end), self._saved[2])
            for o, d in back:
                if o < self.read_offset:         # its schedule message is still there: moved again when due
                    log.warning("delayed message at schedule offset %d: its move was taken back by the failure "
                                "of the log; moved again", o)
                    self._moved.discard(o)
                    if o not in self._offsets:
                        heapq.heappush(self._offsets, o)
                    heapq.heappush(self.heap, (d, o))
        self.checkpoint(force=True)

    # Recall ---------------------------------------------------------------------------
    def recall(self, offset: int, due_ms: int, now_ms: int) -> Recall:
        """Recall the waiting message at schedule ``offset`` (due at ``due_ms``, as its handle says and
        the caller checked against the message): never moved from now on, durably (the checkpoint is
        written before this returns; OSError if it cannot be)."""
        with self._recall_lock:
            if offset in self.recalled:
                return Recall.RECALLED
            if due_ms <= max(now_ms, self._due_through_ms):
                return Recall.DUE
            if offset < self.store.min_offset(SCHEDULE_TOPIC, 0) or offset >= self.store.max_offset(SCHEDULE_TOPIC, 0):
                return Recall.UNKNOWN
            self.recalled.add(offset)
        try:
            self.checkpoint(force=True, recall=True)
        except OSError:
            with self._recall_lock:
                self.recalled.discard(offset)
            raise
        return Recall.RECALLED

    # Progress -------------------------------------------------------------------------
    def progress(self) -> tuple[int, int, int] | None:
        """(enqueued, low, delivered_before_ms) as the checkpoint says them now; None while the queue
        is read again up to what the last checkpoint covered (that checkpoint still holds)."""
        if self.read_offset < self._skip_below[0]:
            return None
        with self._recall_lock:             # (a round on a thread takes entries off the heap under it)
            low = self._offsets[0] if self._offsets else self.read_offset
            first = min([self.heap[0][0]] if self.heap else [], default=NEVER)
            return self.read_offset, low, min([first] + [d for d, _ in self._moving])

    def snapshot(self) -> dict | None:
        """The checkpoint's document as it would be written now (replication copies it); None: none yet."""
        state = self.progress()
        last = self._last
        if state is None:
            state, last = self._saved, self._saved_last
        if state is None:
            return None
        doc = {"enqueued": state[0], "low": state[1], "delivered_before_ms": state[2]}
        if last is not None and last[0] < state[0]:
            doc["last"] = list(last)
        if self.recalled:
            with self._recall_lock:             # every offset below low is passed: its recall is done
                self.recalled = {o for o in self.recalled if o >= state[1]}
            doc["recalled"] = sorted(self.recalled)
        return doc

    def checkpoint(self, force: bool = False, recall: bool = False) -> None:
        """Write the progress (at most once a second unless ``force``); ``recall``: a recall is being
        answered, written whatever the progress (the last checkpoint's, while it is re-read)."""
        state = self.progress()
        if state is None and not recall:                    # still re-reading what the last checkpoint covered
            return
        if not recall and (state == self._saved or
                           (not force and self.store.clock.monotonic_s() - self._saved_at < CHECKPOINT_INTERVAL_S)):
            return
        doc = self.snapshot()
        if doc is None:                                     # nothing moved nor read yet: nothing to skip at start
            doc = {"enqueued": 0, "low": 0, "delivered_before_ms": 0, "recalled": sorted(self.recalled)}
        checked.write(self.store.fio, self.path, doc)
        if state is not None:
            self._saved = state
        self._saved_at = self.store.clock.monotonic_s()

    # The one task -----------------------------------------------------------------------
    async def run(self) -> None:
        """Read, move, checkpoint; sleep until the next due time or a new delayed message."""
        while True:
            self.wake.clear()
            busy, failed = await self.turn()
            if busy and not failed:
                await asyncio.sleep(0)
                continue
            nxt = self.next_due_ms()
            wait = CHECKPOINT_INTERVAL_S if nxt is None else (nxt - self.store.clock.now_ms()) / 1000
            wait = min(max(wait, 0.0), RETRY_AFTER_FAILURE_S if failed else CHECKPOINT_INTERVAL_S)
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=wait)
            except asyncio.TimeoutError:
                pass

    async def turn(self) -> tuple[bool, bool]:
        """One round of run(), its checkpoint written: (busy, failed). A disk that refuses the checkpoint
        (full, failing: OSError) is said once while it lasts, counted, without a traceback (said.py);
        anything else once per round, with its traceback."""
        loop = asyncio.get_running_loop()
        try:
            if self.store.puts_may_wait:      # its puts wait for the disk or followers: not on the loop
                fut = loop.run_in_executor(None, self._round)
                try:
                    busy, failed = await asyncio.shield(fut)
                except asyncio.CancelledError:
                    await fut         # stopping: the round ends before the checkpoint is written
                    raise
            else:
                busy, failed = self._round()
            self.checkpoint()
        except OSError as e:
            self.failures.failed(kind_of(e), f"its progress could not be written ({e})")
            return False, True
        except Exception:  # noqa: BLE001 - the task must outlive one bad round
            log.exception("timer round failed")
            return False, True
        self.failures.recovered("its progress is written again")
        return busy, failed

    def _round(self) -> tuple[bool, bool]:
        if self._unflushed:
            unsure = parking.may_be_taken_back(self.store)
            with self._recall_lock:
                self._unflushed = {o: v for o, v in self._unflushed.items() if unsure(v[1])}
        read = self.enqueue()
        moved, failed = self.move_due(self.store.clock.now_ms())
        return read >= self.round_max or moved >= self.round_max, failed


def check_progress(doc) -> None:
    """Raises unless ``doc`` is the timer's progress (a damaged file that still parses)."""
    if not (isinstance(doc, dict) and all(type(doc.get(k)) is int
                                          for k in ("enqueued", "low", "delivered_before_ms"))):
        raise checked.Damaged("not the timer's progress")
    last = doc.get("last")
    if last is not None and not (isinstance(last, list) and len(last) == 2 and all(type(x) is int for x in last)):
        raise checked.Damaged("not the timer's progress: last is not [offset, commit-log offset]")
    rec = doc.get("recalled", [])
    if not (isinstance(rec, list) and all(type(o) is int for o in rec)):
        raise checked.Damaged("not the timer's progress: recalled is not a list of offsets")
