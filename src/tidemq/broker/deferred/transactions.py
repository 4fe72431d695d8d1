"""Transactional messages: half messages, EndTransaction, the orphan check.

A TRANSACTION send is stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` (one queue; the real
topic in properties, parking.py), so consumers never see it. Its transaction id
is the half message's offset message id (store host + commit-log offset), so
EndTransaction finds it with one read. COMMIT puts a copy into the real topic,
then records the decision; ROLLBACK records it; nothing is put twice.

Decisions, ``<root>/broker/transactions/`` (state/layout.py; state/journal.py: snapshot +
JSON lines, written before the answer, fsynced every second)::

    {"op":"end","o":<half offset>,"r":"c"|"r"|"d","p":P}    commit / rollback / discarded after the checks
    {"op":"chk","o":<half offset>,"n":<checks so far>,"p":P}
    {"op":"low","o":<offset>,"q":Q,"p":P}             every half offset below is decided
    snapshot: {"low": L, "ended": {offset: r}, "checks": {offset: n}, "last": [Q, P]}

P: the commit-log offset of the half message at the line's offset (Q for "low": the last one read).
"last" is the highest half offset the state names with its record's commit-log offset. A failure of
the log cuts the half queue back and the next half messages take its offsets again: killed before
cut_back compacted the journal, the next start finds another record there and forgets the decisions
from the first offset whose record lies past P (a queue's records lie in the log in its order), so a
new transaction is never taken for an old one.

ONE task (:meth:`Transactions.run`) reads the half queue from ``low`` and keeps
the undecided ones. One left undecided for ``transaction_check_interval_s``
(since it was stored or last checked; for the first check, the message's own
``orphaned_transaction_recovery_duration`` when it gave one, kept as RocketMQ's
CHECK_IMMUNITY_TIME_IN_SECONDS and bounded by ``transaction_recovery_s_max``) is checked: a
RecoverOrphanedTransactionCommand goes on a live Telemetry stream of its sender,
or of a producer that declared its topic; the client answers with EndTransaction
(source SERVER_CHECK). Without such a stream the check waits (a Python producer
re-opens its stream only ~300 s after a broker restart) and is not counted.
After ``transaction_check_max`` checks it is discarded, as RocketMQ does.

Across kill -9: a commit whose decision line was lost after its put looks
undecided; every half message stored before the start is first looked up in
the real topic by its message id (parking.already_moved) and, if found, recorded
as committed, never put again.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable, Sequence

from ...config import BrokerConfig
from ...said import Conditions, kind_of
from ...protocol.stubs import Code, pb, spb, status
from ...store import Message, MessageStore, PutResult, StoreNotRunning
from ...record.codec import CodecError, StoredMessage, parse_offset_msg_id
from ..sessions.telemetry import Sessions
from ..state.journal import COMPACT_BYTES, Journal
from ..state.layout import StateLayout, state_dir as state_dir_of
from ..wire import PROP_ORPHAN_CHECK_S, to_wire
from . import parking
from ..topic_names import HALF_TOPIC
from .parking import PROP_REAL_TOPIC, PROP_TXN_CLIENT

log = logging.getLogger("tidemq.broker")

SCAN_MAX = 1024             # half messages read per round at most
CHECKS_PER_ROUND_MAX = 256  # orphan checks sent per round at most
RESOLUTIONS = {pb.TransactionResolution.COMMIT: "c", pb.TransactionResolution.ROLLBACK: "r"}
WORDS = {"c": "committed", "r": "rolled back", "d": "discarded after the maximum number of checks",
         "r|d": "rolled back or discarded"}


@dataclass
class Half:
    commitlog_offset: int
    topic: str
    client_id: str
    since_ms: int          # stored, or last checked
    first_ms: int | None = None   # the message's own wait before its first check (None: the interval)


class Transactions:
    def __init__(self, store: MessageStore, config: BrokerConfig, sessions: Sessions,
                 put: Callable[[Sequence[Message]], Awaitable[list[PutResult]]],
                 code_of: Callable[[PutResult], int], on_moved: Callable[[], None] = lambda: None,
                 state_dir: str | None = None, scan_max: int = SCAN_MAX,
                 checks_per_round_max: int = CHECKS_PER_ROUND_MAX, compact_bytes: int = COMPACT_BYTES) -> None:
        """``state_dir``: the broker's state directory (default: the store root's, state/layout.py)."""
        self.store = store
        self.failures = Conditions(log, "transactions")   # a disk refusing its journal: said once (run)
        self.config = config
        self.sessions = sessions
        self.put = put
        self.code_of = code_of
        self.on_moved = on_moved
        self.scan_max = scan_max
        self.checks_per_round_max = checks_per_round_max
        layout = StateLayout(state_dir or state_dir_of(store.config.root_dir))
        self.journal = Journal(store.fio, layout.transactions_dir, compact_bytes)
        self.low = 0
        self.ended: dict[int, str] = {}
        self.checks: dict[int, int] = {}
        self.pending: dict[int, Half] = {}
        self.scan_offset = 0
        self.recover_below = 0
        self._busy: dict[int, asyncio.Event] = {}
        # half offset -> end of its commit's copy in the log, while that copy is not flushed (ASYNC_FLUSH):
        # a failure of the log can take it back (cut_back)
        self._unflushed: dict[int, int] = {}
        self.cuts = 0                            # failures of the log seen (cut_back)
        self._cut_end = 0                        # where the last one cut the half queue back to
        self._taken: Callable[[int], bool] = lambda end: False     # what the last one took (LogFailure.covers)
        self._last: tuple[int, int] | None = None    # (half offset, commit-log offset): the highest one named
        self._scanned: tuple[int, int] | None = None  # the same of the last half message scan read

    # Start / stop ---------------------------------------------------------------------
    def open(self) -> None:
        parking.ensure_topic(self.store, HALF_TOPIC)

        def load(doc: dict) -> None:
            self.low = doc["low"]
            self.ended = {int(o): r for o, r in doc["ended"].items()}
            self.checks = {int(o): n for o, n in doc["checks"].items()}
            last = doc.get("last")
            if isinstance(last, list) and len(last) == 2 and all(type(x) is int for x in last):
                self._last = (last[0], last[1])

        replayed = self.journal.open(load, self._apply, "transactions")
        self.low = max(self.low, self.store.min_offset(HALF_TOPIC, 0))
        end = self.store.max_offset(HALF_TOPIC, 0)
        if self.low > end or any(o >= end for o in self.ended) or any(o >= end for o in self.checks):
            # decisions about half offsets this log does not hold (a promoted follower's copy of its old
            # leader's, ASYNC replication: the tail the failover took back): the half messages sent from
            # now on get those offsets and are new transactions. Forgotten, durably, before any is sent
            log.warning("transactions: decisions up to offset %d stood past the half queue's end %d: forgotten",
                        max([self.low, *self.ended, *self.checks]), end)
            self.low = min(self.low, end)
            self.ended = {o: r for o, r in self.ended.items() if o < end}
            self.checks = {o: n for o, n in self.checks.items() if o < end}
            self.journal.compact(self.snapshot())
        self._cut_where_reused()
        self.scan_offset = self.low
        self.recover_below = self.store.max_offset(HALF_TOPIC, 0)
        if replayed:
            log.info("transactions: %d journal entries replayed, %d decided above offset %d", replayed,
                     len(self.ended), self.low)

    def _cut_where_reused(self) -> None:
        """At start: the decisions from where the half queue's offsets name other records than the ones
        they were made about are forgotten, durably (module docstring: "last")."""
        if self._last is None:
            return
        q, p = self._last
        now = parking.read_at(self.store, HALF_TOPIC, q)
        if now is None or now is parking.NOT_READABLE or now.commitlog_offset == p:
            return                        # the same record (or none to tell by: cleaned away, not readable)
        lo, hi = self.store.min_offset(HALF_TOPIC, 0), q
        while lo < hi:                    # the first offset whose record lies past P (reused): the cut
            mid = (lo + hi) // 2
            m = parking.read_at(self.store, HALF_TOPIC, mid)
            if m is None or m is parking.NOT_READABLE or m.commitlog_offset > p:
                hi = mid                  # (not readable: taken as reused, looked up again)
            else:
                lo = mid + 1
        log.warning("transactions: half offset %d is another message than the one decided about (the log failed "
                    "and its offsets were taken again): decisions from offset %d forgotten", q, lo)
        self.low = min(self.low, lo)
        self.ended = {o: r for o, r in self.ended.items() if o < lo}
        self.checks = {o: n for o, n in self.checks.items() if o < lo}
        self._last = self._fingerprint(lo - 1)
        self.journal.compact(self.snapshot())

    def _fingerprint(self, offset: int) -> tuple[int, int] | None:
        """(``offset``, the commit-log offset of its record) as the half queue holds it now; None: none."""
        m = parking.read_at(self.store, HALF_TOPIC, offset) if offset >= 0 else None
        if m is None or m is parking.NOT_READABLE:
            return None
        return offset, m.commitlog_offset

    def _note(self, offset: int, commitlog_offset: int) -> None:
        if self._last is None or offset >= self._last[0]:
            self._last = (offset, commitlog_offset)

    def close(self) -> None:
        self.journal.close(self.snapshot())

    def snapshot(self) -> dict:
        doc = {"low": self.low, "ended": {str(o): r for o, r in self.ended.items()},
               "checks": {str(o): n for o, n in self.checks.items()}}
        if self._last is not None:
            doc["last"] = list(self._last)
        return doc

    def flush(self) -> None:
        """Every second: move ``low`` past decided offsets, fsync, compact when large."""
        if self._unflushed:
            unsure = parking.may_be_taken_back(self.store)
            self._unflushed = {o: e for o, e in self._unflushed.items() if unsure(e)}
        low = min(self.pending, default=self.scan_offset)
        if low > self.low:
            rec = {"op": "low", "o": low}
            if self._scanned is not None:
                rec["q"], rec["p"] = self._scanned
            self._log(rec)
        self.journal.flush()
        if self.journal.wants_compaction:
            self.journal.compact(self.snapshot())

    # Journal ----------------------------------------------------------------------------
    def _log(self, rec: dict) -> None:
        self._apply(rec)
        self.journal.append(rec)

    def _apply(self, r: dict) -> None:
        op, o = r["op"], r["o"]
        if type(r.get("p")) is int:
            self._note(r.get("q", o), r["p"])
        if op == "end":
            self.ended[o] = r["r"]
            self.checks.pop(o, None)
            self.pending.pop(o, None)
        elif op == "chk":
            self.checks[o] = max(self.checks.get(o, 0), r["n"])
        elif op == "low":
            self.low = max(self.low, o)
            for d in (self.ended, self.checks):
                for k in [k for k in d if k < self.low]:
                    del d[k]
        else:
            raise ValueError(op)

    # Sending a half message -------------------------------------------------------------
    def half(self, m: Message, client_id: str) -> Message:
        return parking.park(m, HALF_TOPIC, {PROP_TXN_CLIENT: client_id} if client_id else None)

    @property
    def undecided(self) -> int:
        return len(self.pending) + max(0, self.store.max_offset(HALF_TOPIC, 0) - self.scan_offset)

    # EndTransaction ---------------------------------------------------------------------
    def _find(self, request) -> tuple[StoredMessage | None, str]:
        try:
            _, phys = parse_offset_msg_id(request.transaction_id)
        except (CodecError, ValueError):
            return None, f"transaction id {request.transaction_id!r} is not one this broker gave"
        s = None
        if phys >= self.store.commitlog_min_offset:
            s = self.store.get_by_commitlog_offset(phys)
            if s is None and self._not_readable_now(phys):
                # in this log, past the readable end (a new leader whose high watermark has not reached
                # it yet): the broker's own record, read as the log holds it (never past a failure's cut,
                # commit_log.sealed_at). A commit's copy is acknowledged only once the in-sync set holds
                # it, and with it this half message, which lies before it
                s = self.store.commit_log.read_message(phys)
        if s is None or s.topic != HALF_TOPIC:
            return None, f"no half message for transaction {request.transaction_id!r} (unknown, or cleaned away)"
        if (request.message_id and s.msg_id != request.message_id) or \
                s.properties.get(PROP_REAL_TOPIC) != request.topic.name:
            return None, f"transaction {request.transaction_id!r} is not message {request.message_id!r} " \
                         f"of topic {request.topic.name!r}"
        return s, ""

    async def end(self, request) -> "pb.Status":
        s, why = self._find(request)
        if s is None:
            return status(Code.INVALID_TRANSACTION_ID, why)
        r = RESOLUTIONS.get(request.resolution)
        if r is None:                                 # the checker did not know: check again later
            return status(Code.OK, "no resolution: the transaction will be checked again")
        o = s.queue_offset
        while o in self._busy:                        # a commit of it is being put right now
            await self._busy[o].wait()
        prior = self.ended.get(o)
        if prior is None and o < self.low:             # decided, and forgotten: the real topic tells
            prior = "c" if parking.already_moved(self.store, s) else ("r" if r == "r" else "r|d")
        if prior is not None:
            if prior == r:
                return status(Code.OK)                # a resent answer
            return status(Code.INVALID_TRANSACTION_ID, f"transaction {request.transaction_id!r} was already "
                                                       f"{WORDS[prior]}")
        self._busy[o] = asyncio.Event()
        cuts = self.cuts
        try:
            if r == "c" and not (o < self.recover_below and parking.already_moved(self.store, s)):
                n = self.store.queue_count(s.properties[PROP_REAL_TOPIC])
                if n == 0:
                    return status(Code.TOPIC_NOT_FOUND, f"topic {request.topic.name!r} does not exist any more")
                res = (await self.put([parking.unpark(s, n)]))[0]
                if not res.ok:
                    return status(self.code_of(res), res.error or res.status.name)
                self.on_moved()
                copy_end = res.commitlog_offset + res.size
                if self.cuts != cuts and (o >= self._cut_end or self._taken(copy_end)):
                    # a failure of the log while it was put took its half message, or the copy: nothing
                    # decided (the offset may be another transaction's now; the copy is gone)
                    return status(Code.INTERNAL_SERVER_ERROR, "the commit log failed while the commit was "
                                                              "stored: end the transaction again")
                if parking.may_be_taken_back(self.store)(copy_end):
                    self._unflushed[o] = copy_end
            self._log({"op": "end", "o": o, "r": r, "p": s.commitlog_offset})
            return status(Code.OK)
        finally:
            self._busy.pop(o).set()

    # After a failure of the commit log -----------------------------------------------------
    def cut_back(self, end: int | None, taken: Callable[[int], bool]) -> None:
        """A failure of the commit log (store/log_failure.py) cut the half queue back to ``end`` (None:
        not cut) and took the records ending where ``taken`` (LogFailure.covers) says. Decisions,
        checks and pending halves past ``end`` are forgotten (the half messages sent from now on take
        those offsets: new transactions), and a commit whose copy was taken back is undecided again
        (checked, or ended again, and put again). Durably (the journal compacted) before this returns."""
        self.cuts += 1
        self._taken = taken
        back = [o for o, e in self._unflushed.items() if taken(e)]
        for o in back:
            del self._unflushed[o]
        if end is not None:
            self._cut_end = end
            self.pending = {o: h for o, h in self.pending.items() if o < end}
            self.ended = {o: r for o, r in self.ended.items() if o < end}
            self.checks = {o: n for o, n in self.checks.items() if o < end}
            self._unflushed = {o: e for o, e in self._unflushed.items() if o < end}
            if self._last is not None and self._last[0] >= end:
                self._last = self._fingerprint(end - 1)
            if self._scanned is not None and self._scanned[0] >= end:
                self._scanned = None
            self.low = min(self.low, end)
            self.scan_offset = min(self.scan_offset, end)
            self.recover_below = min(self.recover_below, end)
        else:
            self._cut_end = 1 << 62
        for o in back:
            if self.ended.get(o) == "c":
                log.warning("transactions: the commit of half offset %d was taken back by the failure of the log: "
                            "undecided again", o)
                del self.ended[o]
                self.low = min(self.low, o)
                self.scan_offset = min(self.scan_offset, o)     # read again: pending from there
        self.journal.compact(self.snapshot())

    # The checker ------------------------------------------------------------------------
    def scan(self, limit: int | None = None) -> int:
        """Read new half messages (at most ``limit``, default scan_max); undecided ones become
        pending. How many were read."""
        limit = self.scan_max if limit is None else limit
        first = self.scan_offset
        for nxt, msgs in parking.batches(self.store, HALF_TOPIC, self.scan_offset, limit):
            for s in msgs:
                o = s.queue_offset
                if o in self.ended or o < self.low:
                    continue
                if o < self.recover_below and parking.already_moved(self.store, s):
                    self._log({"op": "end", "o": o, "r": "c", "p": s.commitlog_offset})   # committed before a crash
                    continue
                self.pending[o] = Half(s.commitlog_offset, s.properties.get(PROP_REAL_TOPIC, ""),
                                       s.properties.get(PROP_TXN_CLIENT, ""), s.store_timestamp_ms,
                                       self._first_check_ms(s.properties.get(PROP_ORPHAN_CHECK_S)))
            if msgs:
                self._scanned = (msgs[-1].queue_offset, msgs[-1].commitlog_offset)
            self.scan_offset = nxt
        return self.scan_offset - first

    def _first_check_ms(self, seconds: str | None) -> int | None:
        """The wait before a half message's first check it asked for (None: it did not, or asked 0)."""
        if not seconds or not seconds.isdecimal() or int(seconds[:12]) == 0:      # (isdigit takes "\u00b2")
            return None
        return int(min(int(seconds[:12]), self.config.transaction_recovery_s_max) * 1000)

    def check(self, now_ms: int) -> int:
        """Send the orphan checks that are due; discard what was checked too often. Checks sent."""
        interval_ms = int(self.config.transaction_check_interval_s * 1000)
        sent = 0
        for o, h in list(self.pending.items()):
            if sent >= self.checks_per_round_max:
                break
            n = self.checks.get(o, 0)
            wait_ms = h.first_ms if n == 0 and h.first_ms is not None else interval_ms
            if now_ms - h.since_ms < wait_ms or o in self._busy:
                continue
            if n >= self.config.transaction_check_max:
                log.warning("half message at offset %d of topic %r discarded: unresolved after %d checks", o,
                            h.topic, n)
                self._log({"op": "end", "o": o, "r": "d", "p": h.commitlog_offset})
                continue
            session = self.sessions.producer_for(h.topic, h.client_id)
            if session is None:
                continue                                 # no producer reachable: not counted, wait
            s = self.store.get_by_commitlog_offset(h.commitlog_offset)
            if s is None and self._not_readable_now(h.commitlog_offset):
                continue                                 # there, not readable now: checked later
            if s is None:
                log.error("half message at offset %d is gone from the store; discarded", o)
                self._log({"op": "end", "o": o, "r": "d", "p": h.commitlog_offset})
                continue
            msg = to_wire(s, 1, "", 0)
            msg.topic.name = h.topic
            cmd = spb.TelemetryCommand(recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
                message=msg, transaction_id=s.offset_msg_id))
            if self.sessions.send(session, cmd):
                self._log({"op": "chk", "o": o, "n": n + 1, "p": h.commitlog_offset})
                h.since_ms = now_ms
                sent += 1
        return sent

    def _not_readable_now(self, commitlog_offset: int) -> bool:
        """Whether a record at ``commitlog_offset`` that could not be read is still in the log, only not
        readable now (past the readable end, the store not running): never a reason to discard it."""
        try:
            return commitlog_offset >= self.store.commitlog_min_offset and \
                commitlog_offset >= self.store.readable_end()
        except StoreNotRunning:
            return True

    async def run(self) -> None:
        period = min(self.config.transaction_check_interval_s / 2, 1.0)
        while True:
            try:
                busy = self.scan() >= self.scan_max
                self.check(self.store.clock.now_ms())
                self.failures.recovered()
            except OSError as e:          # a disk refusing its journal (full, failing): said once (said.py)
                self.failures.failed(kind_of(e), f"a check round failed ({e})")
                busy = False
            except Exception:  # noqa: BLE001 - the task must outlive one bad round
                log.exception("transaction check round failed")
                busy = False
            await asyncio.sleep(0 if busy else period)
