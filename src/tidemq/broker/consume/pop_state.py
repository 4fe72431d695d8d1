"""Pop consumption (what the SimpleConsumer and PushConsumer use): state, handles, journal.

Per (group, topic, queue) the broker keeps a *cursor* (the next offset never
handed out) and the *in-flight* messages (offset -> delivery attempt, the time
they become visible again, the sequence number of their current receipt
handle). A message is done when it leaves the in-flight set by an ack; the
group's committed offset of a queue is min(in-flight offsets, cursor).
Messages a tag filter skips are never in flight, so they count as consumed.

Receipt handle: ``topic:queue:offset:seq:mac``, the MAC an HMAC-SHA1 (first 16
hex digits) of group, topic, queue, offset and seq under a secret kept in
``<root>/broker/pop/secret`` (state/layout.py; checked: protection/handle_key.py). A forged handle fails the MAC; a stale
one (the message was redelivered, or its invisible time changed since) fails the seq;
both answer INVALID_RECEIPT_HANDLE. The seq jumps by SEQ_GAP at every open, so a promoted
follower (which opens its leader's last copy) never makes a handle its old leader gave after
that copy. A renewal by the broker (renew.py) keeps the seq: the handle the client holds stays
valid. Acking a message that is already acked answers OK (a client resends an ack whose answer
was lost).

Durability: every change is a line in ``<root>/broker/pop/journal`` (state/journal.py:
JSON lines and a snapshot; a torn last line is cut at start), written before the
answer goes out, fsynced every second; a broker killed with -9
loses no ack and no delivery: at start the snapshot and journal are replayed,
in-flight messages come back when their invisible time is over, nothing acked
is delivered again. Replaying an operation twice changes nothing, so a crash
between a snapshot and the journal's truncation is harmless.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from dataclasses import dataclass, field

from ...io import FileIO
from ..protection import handle_key
from ..state.journal import COMPACT_BYTES, Journal
from ..state.layout import StateLayout

log = logging.getLogger("tidemq.broker")


@dataclass
class Inflight:
    attempt: int
    visible_at_ms: int
    seq: int
    client: str = ""           # auto-renewed for this client (renew.py); "" none
    renew_until_ms: int = 0    # ... up to this time at most


@dataclass
class QueueState:
    cursor: int = 0
    inflight: dict[int, Inflight] = field(default_factory=dict)
    # (offset, commit-log offset) of the last record the cursor moved past, when known: a failure of the
    # log takes records and the next messages take their offsets; a kill -9 before the broker's
    # listener rewound the cursor leaves it past them. At start another record there says so
    # (receive.Consumption.cursors_where_reused)
    last: tuple[int, int] | None = None

    @property
    def committed(self) -> int:
        return min(min(self.inflight, default=self.cursor), self.cursor)

    def holds(self, now_ms: int) -> bool:
        """In-order consumption: while a message handed out is still invisible (not acked, its
        invisible time not over) the queue gives the group nothing, not even an expired one."""
        return any(i.visible_at_ms > now_ms for i in self.inflight.values())


def _fields(i: Inflight) -> list:
    """An in-flight entry in the snapshot: [attempt, visible at, seq] (+ [client, renew until])."""
    out = [i.attempt, i.visible_at_ms, i.seq]
    return out + [i.client, i.renew_until_ms] if i.client else out


# Consumption.read_at's answer for a message in flight whose record is there but not readable now:
# past the readable end (a promoted leader's high watermark behind its old leader's), or the store not
# running. It stays in flight and is read again later; only one gone from the store (cleaned) is dropped
NOT_READABLE = object()


SEQ_GAP = 1 << 32      # the seq moves this far at every open: more than a leader delivers between two copies


class HandleError(ValueError):
    """A receipt handle that is forged, malformed or stale."""


class PopState:
    def __init__(self, fio: FileIO, state_dir: str, compact_bytes: int = COMPACT_BYTES) -> None:
        """``state_dir``: the broker's state directory (state/layout.py); the pop state is its pop/.
        ``compact_bytes``: the journal is folded into the snapshot beyond this size."""
        self.fio = fio
        layout = StateLayout(state_dir)
        self.journal = Journal(fio, layout.pop_dir, compact_bytes)
        self.secret_path = layout.pop_secret
        self.queues: dict[tuple[str, str, int], QueueState] = {}
        self.seq = 0
        # client -> (group, topic, queue, offset) of its in-flight messages the broker renews
        self.renewing: dict[str, set[tuple[str, str, int, int]]] = {}
        self.touched_ms: dict[tuple[str, str, int], int] = {}   # last delivery or ack since start
        # (topic, queue, offset) -> the commit-log offset of the record there (None: none): the
        # fingerprint of a skip (QueueState.last); None: skips carry none
        self.unit_at = None

    # Start / stop ---------------------------------------------------------------------
    def open(self) -> None:
        self.fio.makedirs(os.path.dirname(self.secret_path))
        try:
            os.chmod(os.path.dirname(self.secret_path), 0o700)     # it holds the handles' secret
        except OSError:
            pass
        self.secret = handle_key.load(self.fio, self.secret_path)     # checked: a damaged key is never used
        replayed = self.journal.open(self._load, self._apply, "pop state")
        # handles made from now on are new ones for sure: a promoted follower opens its leader's last
        # copy, and the leader went on delivering (seq + 1, ...) after it; without the gap the same
        # messages got the same handles again, and an old consumer's ack counted for a new delivery
        self.seq += SEQ_GAP
        if replayed:
            log.info("pop state: %d journal entries replayed, %d queue(s), %d message(s) in flight", replayed,
                     len(self.queues), sum(len(q.inflight) for q in self.queues.values()))

    def close(self) -> None:
        self.journal.close(self.snapshot())

    def flush(self) -> None:
        self.journal.flush()
        if self.journal.wants_compaction:
            self.compact()

    def compact(self) -> None:
        self.journal.compact(self.snapshot())

    def _load(self, doc: dict) -> None:
        self.seq = doc["seq"]
        for key, q in doc["queues"].items():
            g, t, qid = json.loads(key)
            self.queues[(g, t, qid)] = st = QueueState(q["cursor"])
            if q.get("last") is not None:
                st.last = tuple(q["last"])
            for o, fields in q["inflight"].items():
                self._set(g, t, qid, int(o), Inflight(*fields))

    def snapshot(self) -> dict:
        return {"seq": self.seq, "queues": {
            json.dumps([g, t, q]): {"cursor": st.cursor,
                                    "inflight": {str(o): _fields(i) for o, i in st.inflight.items()},
                                    **({"last": list(st.last)} if st.last is not None else {})}
            for (g, t, q), st in self.queues.items()}}

    # Journal ----------------------------------------------------------------------------
    def _log(self, rec: dict) -> None:
        if rec["op"] in ("pop", "ack"):          # live operations only (not a replay at start)
            self.touched_ms[(rec["g"], rec["t"], rec["q"])] = int(time.time() * 1000)
        self._apply(rec)
        self.journal.append(rec)

    def _apply(self, r: dict) -> None:
        g, t, q, o = r["g"], r["t"], r["q"], r["o"]
        st = self.state(g, t, q)
        op = r["op"]
        if op == "pop":           # delivered (first time or again): in flight with a new handle
            self._set(g, t, q, o, Inflight(r["a"], r["v"], r["s"], r.get("c", ""), r.get("u", 0)))
            if o >= st.cursor:
                st.last = (o, r["p"]) if "p" in r else st.last
            st.cursor = max(st.cursor, o + 1)
            self.seq = max(self.seq, r["s"])
        elif op == "skip":        # the cursor moved past offsets never delivered (filtered, cleaned)
            if o > st.cursor and "p" in r:
                st.last = (o - 1, r["p"])
            st.cursor = max(st.cursor, o)
        elif op == "ack":
            self._set(g, t, q, o, None)
        elif op == "chg":         # the client's new invisible time: a new handle, no more renewal
            cur = st.inflight.get(o)
            if cur is not None:
                self._set(g, t, q, o, Inflight(cur.attempt, r["v"], r["s"]))
            self.seq = max(self.seq, r["s"])
        elif op == "cur":         # the cursor back to the queue's end: it stood past it (rewind)
            st.cursor = o
            if st.last is not None and st.last[0] >= o:
                st.last = None
        elif op == "rst":         # reset by an operator: nothing in flight, the cursor where it says
            for off in list(st.inflight):
                self._set(g, t, q, off, None)
            st.cursor = o
            st.last = None
        elif op == "rnw":         # the broker's new invisible time (renewed, or released: c ""), same handle
            cur = st.inflight.get(o)
            if cur is not None and cur.seq == r["s"]:
                c = r["c"]
                self._set(g, t, q, o, Inflight(cur.attempt, r["v"], cur.seq, c, cur.renew_until_ms if c else 0))
        else:
            raise ValueError(op)

    def _set(self, g: str, t: str, q: int, o: int, inf: Inflight | None) -> None:
        """Put (None: remove) the in-flight entry of an offset, keeping ``renewing`` in step."""
        inflight = self.state(g, t, q).inflight
        old = inflight.pop(o, None)
        if old is not None and old.client:
            owned = self.renewing.get(old.client)
            if owned is not None:
                owned.discard((g, t, q, o))
                if not owned:
                    del self.renewing[old.client]
        if inf is not None:
            inflight[o] = inf
            if inf.client:
                self.renewing.setdefault(inf.client, set()).add((g, t, q, o))

    def state(self, group: str, topic: str, qid: int) -> QueueState:
        st = self.queues.get((group, topic, qid))
        if st is None:
            st = self.queues[(group, topic, qid)] = QueueState()
        return st

    # Operations -------------------------------------------------------------------------
    def deliver(self, group: str, topic: str, qid: int, offset: int, attempt: int, visible_at_ms: int,
                client: str = "", renew_until_ms: int = 0, commitlog_offset: int | None = None) -> str:
        """In flight until ``visible_at_ms``; with ``client``, renewed for it up to ``renew_until_ms``.
        ``commitlog_offset``: where its record lies in the log (QueueState.last)."""
        self.seq += 1
        rec = {"op": "pop", "g": group, "t": topic, "q": qid, "o": offset, "a": attempt, "v": visible_at_ms,
               "s": self.seq}
        if commitlog_offset is not None:
            rec["p"] = commitlog_offset
        if client:
            rec.update(c=client, u=renew_until_ms)
        self._log(rec)
        return self.handle(group, topic, qid, offset, self.seq)

    def skip_to(self, group: str, topic: str, qid: int, offset: int) -> None:
        if offset > self.state(group, topic, qid).cursor:
            rec = {"op": "skip", "g": group, "t": topic, "q": qid, "o": offset}
            p = self._unit_at(topic, qid, offset - 1)
            if p is not None and p >= 0:
                rec["p"] = p
            self._log(rec)

    def _unit_at(self, topic: str, qid: int, offset: int) -> int | None:
        if self.unit_at is None:
            return None
        try:
            return self.unit_at(topic, qid, offset)
        except OSError:
            return None

    def current(self, group: str, handle: str, topic_: str | None = None) -> tuple[str, int, int, bool]:
        """(topic, queue, offset, in flight) of the delivery a handle names: in flight False once
        the message is done (acked, dead-lettered). HandleError if forged, unknown or stale, or
        (``topic_`` given) of another topic."""
        topic, qid, offset, seq = self.parse(group, handle, topic_)
        st = self.state(group, topic, qid)
        cur = st.inflight.get(offset)
        if cur is None:
            if offset < st.cursor:
                return topic, qid, offset, False
            raise HandleError("no such delivery")
        if cur.seq != seq:
            raise HandleError("the receipt handle is stale (the message was delivered again or its "
                              "invisible time changed since)")
        return topic, qid, offset, True

    def ack(self, group: str, handle: str, topic_: str | None = None) -> tuple[str, int, int]:
        topic, qid, offset, inflight = self.current(group, handle, topic_)
        if inflight:                               # else acked already: OK again
            self._log({"op": "ack", "g": group, "t": topic, "q": qid, "o": offset})
        return topic, qid, offset

    def change_invisible(self, group: str, handle: str, visible_at_ms: int, topic_: str | None = None) -> str:
        topic, qid, offset, seq = self.parse(group, handle, topic_)
        cur = self.state(group, topic, qid).inflight.get(offset)
        if cur is None or cur.seq != seq:
            raise HandleError("the receipt handle is stale or the message was acked")
        self.seq += 1
        self._log({"op": "chg", "g": group, "t": topic, "q": qid, "o": offset, "v": visible_at_ms, "s": self.seq})
        return self.handle(group, topic, qid, offset, self.seq)

    def renew(self, group: str, topic: str, qid: int, offset: int, visible_at_ms: int, client: str) -> None:
        """The broker moves an in-flight message's invisible time (the handle stays valid): renewed
        for ``client``, or with client "" no longer renewed (released, or renewed long enough)."""
        cur = self.state(group, topic, qid).inflight[offset]
        self._log({"op": "rnw", "g": group, "t": topic, "q": qid, "o": offset, "v": visible_at_ms, "s": cur.seq,
                   "c": client})

    def reset(self, group: str, topic: str, qid: int, offset: int) -> None:
        """`tidemq group reset`: the group's next message is ``offset``; what it had in flight is
        forgotten (its handles are stale), so it is delivered again if at or after ``offset``."""
        self._log({"op": "rst", "g": group, "t": topic, "q": qid, "o": offset})

    def rewind(self, group: str, topic: str, qid: int, offset: int) -> None:
        """The cursor back to ``offset``, the queue's end, from past it: a promoted follower's copy of
        its old leader's state (ASYNC replication: the tail the failover took back), a log whose
        unflushed tail a crash took. In-flight messages stay as they are."""
        self._log({"op": "cur", "g": group, "t": topic, "q": qid, "o": offset})

    def drop(self, group: str, topic: str, qid: int, offset: int) -> None:
        """Done without an ack (moved to the dead-letter queue, or cleaned from the store)."""
        self._log({"op": "ack", "g": group, "t": topic, "q": qid, "o": offset})

    # Handles ----------------------------------------------------------------------------
    def _mac(self, group: str, topic: str, qid: int, offset: int, seq: int) -> str:
        msg = f"{group}|{topic}|{qid}|{offset}|{seq}".encode()
        return hmac.new(self.secret, msg, hashlib.sha1).hexdigest()[:16]

    def handle(self, group: str, topic: str, qid: int, offset: int, seq: int) -> str:
        return f"{topic}:{qid}:{offset}:{seq}:{self._mac(group, topic, qid, offset, seq)}"

    def parse(self, group: str, handle: str, topic_: str | None = None) -> tuple[str, int, int, int]:
        """(topic, queue, offset, seq) of a handle; HandleError when it is forged, of another group or
        (``topic_`` given: the request's, which is what its caller was authorized for) of another topic."""
        try:
            topic, qid, offset, seq, mac = handle.rsplit(":", 4)
            qid, offset, seq = int(qid), int(offset), int(seq)
        except ValueError:
            raise HandleError("malformed receipt handle") from None
        if not hmac.compare_digest(mac, self._mac(group, topic, qid, offset, seq)):
            raise HandleError("forged receipt handle, or one of another consumer group")
        if topic_ is not None and topic_ != topic:
            raise HandleError(f"the receipt handle is of topic {topic!r}, not of {topic_!r} (the request's)")
        return topic, qid, offset, seq
