"""What the send path knows of messages sent before, to answer a resend instead of storing it
twice (the official clients resend with the same message id after a timeout or a lost answer).

Three sources, asked in this order for a batch of dedup keys (dedup.py: a hash of topic and id):

* the appended-but-unconfirmed puts: a message in the log whose put waits for the disk or the
  followers (from its append on: a resend that comes meanwhile, or after its caller went -- a
  client's deadline, a forwarding member giving up, which cancel the wait and leave the record in
  the log), or was answered FLUSH_DISK_TIMEOUT or FLUSH_SLAVE_TIMEOUT. Its resend is never appended
  again: it is answered the same code while the store still cannot confirm the message
  (MessageStore.confirm), and OK with the first offset once it can (then it moves to the window).
  When the store says the message can never be confirmed (a failed fsync covered it: what it
  covered is not durable, whatever a later fsync says), it is forgotten and its resend is stored
  again, as a new message. A put whose caller went is still settled when what it waited for comes
  (broker/puts.py ``on_gone``) and its entry asked the same way then (``settled_gone``), so entries
  do not outlive their puts; one that ended not confirmed in time (its followers, its fsync: no
  resend will come) is asked again at the next waiting puts (``_settle_late``), so that it moves to
  the window once its followers confirm it after all, as its resend would have moved it; an entry
  holds back only its own key (``surely_new``: the compiled lane takes every other message);
* the window of recent stores (dedup.DedupWindow): (queue offset, commit-log offset, transaction id)
  by a keyed hash of (topic, id). A match is confirmed by the message itself: the record at the
  entry's commit-log offset must be there, intact, with this topic (or, parked or a transaction's
  half, this real topic) and this id; anything else is no match, and the message is stored (a hash
  collision, crafted or not, can never make a message vanish as a "duplicate");
* for ``send_dedup_after_restart_s`` after a start, the store's index: a message of this id stored
  shortly before the start (the window is empty then), confirmed by its UNIQ_KEY.
"""

from __future__ import annotations

import struct
from collections import deque
from functools import lru_cache
from itertools import repeat
from typing import Callable

import numpy as np

from ...config import BrokerConfig
from ...record.codec import PROP_UNIQ_KEY
from ...store import MessageStore, PutReason, PutStatus
from ..deferred.parking import PROP_REAL_TOPIC
from ..topic_names import HALF_TOPIC, SYSTEM_TOPICS
from .batch import STORED
from .dedup import KEY, KEY_BYTES, DedupWindow, id_hash, key_at

SMALL = 8                       # puts of at most this many messages: remembered one by one (no numpy call)
UNCONFIRMED_MAX = 10_000        # appended sends not yet confirmed (disk, followers) remembered for their resends
APPENDED = (PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT)   # the put appended, not confirmed
# what MessageStore.confirm may answer while a message may still be confirmed later; any other reason
# is final (the message may not be durable: its resend is stored again)
NOT_YET = frozenset((PutReason.FLUSH_TIMEOUT, PutReason.REPLICATION_TIMEOUT, PutReason.REPLICA_LOST))


@lru_cache(maxsize=64)
def _split(n: int) -> struct.Struct:
    return struct.Struct(f"{KEY_BYTES}s" * n)


def split_keys(keys) -> tuple[bytes, ...]:
    """``keys`` (KEY_BYTES each, one after the other) as one bytes object each, in one C pass (a
    batch's per-message bookkeeping below is dict calls over these, no Python loop per message)."""
    n = len(keys) // KEY_BYTES
    return _split(n).unpack_from(keys) if n <= 1024 else \
        tuple(bytes(keys[KEY_BYTES * i:KEY_BYTES * (i + 1)]) for i in range(n))


class Unconfirmed(tuple):
    """A resend of a message in the log whose acknowledgement the store cannot give yet:
    (PutReason, text) to answer again; it is never stored a second time."""


class Resends:
    def __init__(self, store: MessageStore, config: BrokerConfig) -> None:
        self.store = store
        self.window = DedupWindow(config.send_dedup_window_entries)
        # after a start the window is empty: until then, ids it does not know are looked up in the
        # index (durable, rebuilt by recovery) among messages stored from ``_index_from_ms`` on
        span_s = config.send_dedup_after_restart_s if config.send_dedup_window_entries else 0.0
        if store.commitlog_max_offset == store.commitlog_min_offset:
            span_s = 0.0             # nothing was stored before this start: nothing to look up
        self._index_until_s = store.clock.monotonic_s() + span_s
        self._index_from_ms = store.clock.now_ms() - int(span_s * 1000)
        # dedup key -> (queue offset, transaction id, log end, commit-log offset) of puts appended, not confirmed
        self.unconfirmed: dict[bytes, tuple[int, str, int, int]] = {}
        # keys of entries whose put's caller went and that ended not confirmed in time, oldest first
        self._late: deque[bytes] = deque()
        self.collisions = 0          # window matches the stored record did not confirm (another message)

    @staticmethod
    def key(topic: str, message_id: str) -> bytes:
        """The dedup key of (topic, id): zero when there is no id (never found, never remembered)."""
        if not message_id:
            return bytes(KEY_BYTES)
        return id_hash(KEY, topic.encode(), message_id.encode("utf-8", "surrogatepass"))

    def find(self, keys, which, topic_of: Callable[[int], str],
             id_of: Callable[[int], str]) -> dict[int, tuple[int, str] | Unconfirmed]:
        """For the messages ``which`` (indexes) of a batch whose dedup keys are ``keys``: {index:
        (queue offset, transaction id) of an earlier store, or Unconfirmed}; {} in the common case."""
        found: dict = {}
        for i, (qoff, phys, txn) in self.window.find_keys(keys).items():
            if self._confirmed(phys, topic_of(i), id_of(i)):
                found[i] = (qoff, txn)
            else:
                self.collisions += 1
        if self.unconfirmed and not self.unconfirmed.keys().isdisjoint(split_keys(keys)):
            for i in which:
                k = key_at(keys, i)
                if k in self.unconfirmed:
                    got = self._unconfirmed(k)
                    if got is not None:
                        found[i] = got
        if self._index_until_s and self.store.clock.monotonic_s() < self._index_until_s:
            for i in which:
                if i not in found and any(keys[KEY_BYTES * i:KEY_BYTES * (i + 1)]):
                    earlier = self._stored_before_start(topic_of(i), id_of(i))
                    if earlier is not None:
                        found[i] = earlier
        else:
            self._index_until_s = 0.0
        if found and len(which) < len(keys) // KEY_BYTES:
            asked = set(which)
            found = {i: v for i, v in found.items() if i in asked}
        return found

    def surely_new(self, key: bytes) -> bool:
        """Whether ``find`` would answer {} for one message of dedup key ``key`` with nothing to look
        up: the window does not hold the key, nothing appended waits for its confirmation and the
        index is no longer asked (SendPath.send_one's precondition). False: ask ``find``. No effect
        but ``find``'s own: the index's time, once over, forgotten. (``find`` asks the unconfirmed
        only of the keys it holds: another message's entry there changes nothing for this one.)"""
        if key in self.unconfirmed:
            return False
        if self._index_until_s:
            if self.store.clock.monotonic_s() < self._index_until_s:
                return False
            self._index_until_s = 0.0
        return not self.window.find_keys(key)

    def _confirmed(self, phys: int, topic: str, message_id: str) -> bool:
        """Whether the record at ``phys`` is this message: intact, its id and its topic (or real topic)."""
        if not message_id:
            return False
        try:
            m = self.store.get_by_commitlog_offset(phys)
        except Exception:  # noqa: BLE001 - unreadable (cleaned, the store stopping): not confirmed
            return False
        if m is None or m.properties.get(PROP_UNIQ_KEY) != message_id:
            return False
        return m.topic == topic or m.properties.get(PROP_REAL_TOPIC) == topic

    def _unconfirmed(self, key: bytes) -> tuple[int, str] | Unconfirmed | None:
        offset, txn, end, phys = self.unconfirmed[key]
        why = self.store.confirm(end)
        if why in NOT_YET:
            return Unconfirmed((why, f"stored, not yet confirmed ({why.name})"))
        del self.unconfirmed[key]
        if why is not None:
            return None              # never to be confirmed: its resend is a new message
        self.window.put_key(key, offset, phys, txn)
        return offset, txn

    def _stored_before_start(self, topic: str, message_id: str) -> tuple[int, str] | Unconfirmed | None:
        """A message of this id stored shortly before the broker started or took the lead (the index
        has its UNIQ_KEY), remembered in the window once the store confirms it (Unconfirmed until
        then: a promoted follower's records past the high watermark, SYNC replication); None when
        there is none (or no index, or it will never be confirmed)."""
        if self.store.index is None or not message_id:
            return None
        found = [m for m in self.store.query_by_key(topic, message_id, 4, self._index_from_ms, whole_log=True)
                 if m.properties.get(PROP_UNIQ_KEY) == message_id]      # its id, not a key of another
        for parked in () if found else SYSTEM_TOPICS:     # a delayed or half message waits there (parking.py)
            found = [m for m in self.store.query_by_key(parked, message_id, 4, self._index_from_ms, whole_log=True)
                     if m.properties.get(PROP_UNIQ_KEY) == message_id and m.properties.get(PROP_REAL_TOPIC) == topic]
            if found:
                break
        if not found:
            return None
        why = self.store.confirm(found[0].commitlog_offset + found[0].store_size)
        if why in NOT_YET:
            return Unconfirmed((why, f"stored, not yet confirmed ({why.name})"))
        if why is not None:
            return None
        offset = found[0].queue_offset
        txn = found[0].offset_msg_id if found[0].topic == HALF_TOPIC else ""     # a half message's: its transaction
        self.window.put(topic, message_id, offset, found[0].commitlog_offset, txn)
        return offset, txn

    def remember(self, keys, offsets: list[int], physs: list[int], kinds: list[int], txns: dict[int, str]) -> None:
        """Messages just stored (``kinds[i]`` STORED: batch.Verdicts' columns): ``offsets`` their queue
        offsets, ``physs`` their records' commit-log offsets, ``txns`` {index: transaction id} of the
        TRANSACTION ones."""
        if len(kinds) == 1:                        # the common request: no array made
            if kinds[0] == STORED:
                key = key_at(keys, 0)
                if self.unconfirmed:               # confirmed now: the window answers its resends
                    self.unconfirmed.pop(key, None)
                self.window.put_key(key, offsets[0], physs[0], txns.get(0, "") if txns else "")
            return
        stored = np.array(kinds, np.uint8) == STORED
        if self.unconfirmed:
            every = split_keys(keys)
            if not stored.all():
                every = [every[i] for i in np.flatnonzero(stored).tolist()]
            deque(map(self.unconfirmed.pop, every, repeat(None)), maxlen=0)     # (one C loop)
        self.window.put_keys(keys, np.array(offsets, np.int64), np.array(physs, np.int64), stored)
        for i, txn in txns.items():
            self.window.put_key(key_at(keys, i), offsets[i], physs[i], txn)

    def remember_appended(self, keys, r, where: list[int] | None) -> None:
        """A put appended and waiting (for the disk, the followers): each record of ``r`` (the put's
        results, ``where`` the batch index of each, None: the same) remembered as not confirmed yet,
        its dedup key from ``keys``, until ``remember`` (confirmed) or ``remember_unconfirmed``
        (answered not confirmed in time) says more. A batch in one pass of C loops (numpy, dict
        calls): SYNC puts of SendRecords batches took ~1 us a message in a Python loop here."""
        pending = self.unconfirmed
        if self._late:
            self._settle_late()
        if len(r.size) <= SMALL:
            size, qoff, phys = r.size.tolist(), r.qoff.tolist(), r.phys.tolist()
            for k in range(len(size)):
                if size[k] <= 0 or phys[k] < 0:
                    continue
                key = key_at(keys, k if where is None else where[k])
                if any(key):
                    if len(pending) >= UNCONFIRMED_MAX:
                        pending.pop(next(iter(pending)))
                    pending[key] = (qoff[k], "", phys[k] + size[k], phys[k])
            return
        size, phys = np.asarray(r.size), np.asarray(r.phys)
        every = split_keys(keys)
        if where is not None:
            every = [every[i] for i in where]
        named = np.frombuffer(b"".join(every), np.uint64).reshape(-1, KEY_BYTES // 8).any(axis=1)   # a zero key: no id
        idx = np.flatnonzero((size > 0) & (phys >= 0) & named)
        if not len(idx):
            return
        ks = every if len(idx) == len(every) else [every[k] for k in idx.tolist()]
        p = phys[idx]
        pending.update(zip(ks, zip(np.asarray(r.qoff)[idx].tolist(), repeat(""), (p + size[idx]).tolist(),
                                   p.tolist())))
        while len(pending) > UNCONFIRMED_MAX:
            pending.pop(next(iter(pending)))

    def settled_gone(self, keys, r, where: list[int] | None) -> None:
        """A put remembered by ``remember_appended`` whose caller went while it waited, settled now
        (broker/puts.py: its fsync, its followers came, or their time ran out): each of its entries
        asked of the store as a resend would ask it (``_unconfirmed``): what the store confirms leaves
        the unconfirmed for the window, what it can never confirm (a failed fsync) is forgotten, what
        it may still confirm (a timeout, a follower lost) stays for its resend. Only this put's
        entries (their commit-log offsets) are touched."""
        pending = self.unconfirmed
        if not pending:
            return
        every = split_keys(keys)
        if where is not None:
            every = [every[i] for i in where]
        late = self._late
        for key, size, phys in zip(every, r.size.tolist(), r.phys.tolist()):
            e = pending.get(key)
            if e is not None and size > 0 and e[3] == phys and isinstance(self._unconfirmed(key), Unconfirmed):
                late.append(key)              # (not confirmed in time: asked again, _settle_late)
        while len(late) > UNCONFIRMED_MAX:
            late.popleft()

    def _settle_late(self, most: int = 4) -> None:
        """The entries of gone callers' puts that ended not confirmed in time, asked of the store again,
        oldest first, at most ``most`` settled (a waiting put's append calls it: no timer, no task): what
        it confirms now moves to the window, what it never will is forgotten; the first it still cannot
        confirm ends the round (those after it end later in the log). An entry gone meanwhile (its
        resend asked it, or it was evicted) is dropped from the round."""
        late, pending = self._late, self.unconfirmed
        while late and most > 0:
            key = late[0]
            if key in pending:
                if isinstance(self._unconfirmed(key), Unconfirmed):
                    return
                most -= 1
            late.popleft()

    def remember_unconfirmed(self, key: bytes, status: PutStatus, queue_offset: int, phys: int, end: int,
                             txn: str = "") -> None:
        """A put appended (its record at log offset ``phys``, ending at ``end``) but answered FLUSH_DISK_TIMEOUT /
        FLUSH_SLAVE_TIMEOUT (``status``): its resend is answered from here, never appended again."""
        if not any(key) or status not in APPENDED:
            return
        if len(self.unconfirmed) >= UNCONFIRMED_MAX:
            self.unconfirmed.pop(next(iter(self.unconfirmed)))
        self.unconfirmed[key] = (queue_offset, txn, end, phys)
