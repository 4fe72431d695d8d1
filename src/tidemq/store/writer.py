"""The store's write path: refusal, validation, encoding, append, dispatch, flush wait.

``StoreWriter`` is built by ``MessageStore`` once its parts are loaded and its flush
service made, and writes through them; ``MessageStore.put`` / ``put_batch`` /
``put_encoded`` delegate here. Per batch:

1. one refusal check (``refusal()``): the store stopping or stopped, a follower's or a fenced
   leader's store (NOT_LEADER: ``role_refusal``), a leader's lease run out or too few followers in
   sync for SYNC replication (``replicas.refusal()``), a failed dispatch,
   space held by consumers' backlog (space_policy=refuse: cleaner.hold), a full disk (with the
   archive when that is what would free it);
2. outside the put lock, every message is validated and encoded into a
   ``commit_log.Prepared``: the common case (a known topic, a bytes body, tags only;
   put_encoded's pre-encoded entries) inline, with a cheap bounds test; anything else
   (and anything the bounds test doubts) through the validators below, which word every
   rule once and answer a ``PutResult`` with its ``PutReason``;
3. under the put lock: the refusal check again, the append (queue offsets assigned in
   log order, commit_log.append), the dispatch to the consume queues and the index;
4. with SYNC_FLUSH, one wait for the group commit; in a broker group (``replicas``), one wait
   for every follower of the in-sync set to have the batch (SYNC) and the lease check (both modes).

One lock and one flush wait per batch; the Python cost per message is the number to
drive down (bench/store_append.py).

``put_one``: the broker's one-message put (SendMessage's common request) where it waits for nothing
(ASYNC_FLUSH, no followers) and appends into the last segment: steps 1-3 in one compiled call
(put_one.py), with put_encoded for everything else (it declines having done nothing).
"""

from __future__ import annotations

import errno
import logging
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from ..config import StoreConfig
from ..record.crc import crc32
from ..io import Clock
from ..record import codec
from .archive import ArchiveGuard
from ..record.codec import PROP_TAGS, PROP_UNIQ_KEY, tags_hash
from .commit_log import AppendError, CommitLog, PreparedItems, SlicedItems
from .consume_queue import ConsumeQueueTable
from .disk import DiskMonitor
from .dispatch import Dispatcher, index_keys
from .flush import GroupCommitService
from .index_file import IndexService
from .put_lock import PutLock
from .put_one import put_one as _put_one
from .record_loop import SLICE_FIELDS, slice_properties_len
from .validate import (ENCODED_RESERVED, I32, I64, born_host_bytes, check_body, check_encoded, check_number, check_numbers,
                       check_properties_type, check_queue_id, check_record_size, check_sizes, check_slices, check_tags,
                       check_topic, encode_properties, refusal, slice_reserved)
from .segment_queue import SegmentQueue
from .topics import TopicState, TopicTable
from .types import Message, PutReason, PutResult, PutResults, PutStatus

log = logging.getLogger("tidemq.store")


@lru_cache(maxsize=4096)
def _tags_props(tags: str) -> bytes | None:
    """Properties of a message with tags only (None: the tags need the general path)."""
    if not isinstance(tags, str) or not codec.check_property_text(tags):
        return None
    pb = f"{PROP_TAGS}\x01{tags}\x02".encode("utf-8")
    return pb + codec.RECORD_CRC_TAIL if len(pb) <= codec.USER_PROPERTIES_MAX_BYTES else None


_NO_PROPS = codec.RECORD_CRC_TAIL


def tags_encoding(t: TopicState, tags: str | None, cache_max: int = 4096) -> tuple:
    """(properties bytes or None, tags hash, tail CRC) of a tags-only message, cached per topic
    (None properties: the tags need the general path); at most ``cache_max`` per topic."""
    pb = _tags_props(tags) if tags else _NO_PROPS
    enc = (pb, tags_hash(tags) if tags else 0, codec.tail_crc(t.name_bytes, pb) if pb is not None else 0)
    if len(t.tag_cache) < cache_max:
        t.tag_cache[tags] = enc
    return enc


def bind_queues(queues: ConsumeQueueTable, t: TopicState) -> None:
    """Give every queue of ``t`` its consume queue and next queue offset (new queues and at start)."""
    for qid in range(t.queue_count):
        if t.queues[qid] is None:
            cq = queues.get_or_create(t.name, qid)
            t.queues[qid] = cq
            t.next_offsets[qid] = cq.max_offset


def restore_topics(topics: TopicTable, queues: ConsumeQueueTable) -> None:
    """The topic table as the consume queues on disk have it (at start, and after a follower's cut):
    the queues of a topic deleted just before a crash are deleted, a topic or queue found only as
    consume queues is added (topics.json lost or behind), and every topic's queues are bound."""
    changed = False
    for topic in {cq.topic for cq in queues.all()}:
        if topic in topics.deleted and topics.get(topic) is None:
            end = topics.deleted[topic]
            if any((u := cq.last_unit()) is not None and u[0] >= end for cq in queues.all() if cq.topic == topic):
                # a unit after the deletion: the topic was made again after the version of topics.json
                # read (its previous version, the file being damaged): kept, added back below
                log.warning("topic %r: consume queues made after its deletion found: kept", topic)
                continue
            # deleted, then a crash before its queues were: finish the deletion
            log.warning("consume queues of deleted topic %r found: deleted", topic)
            queues.drop_topic(topic)
    for cq in queues.all():
        t = topics.get(cq.topic)
        if t is None or cq.queue_id >= t.queue_count:
            if not codec.valid_topic(cq.topic):
                continue
            topics.create(cq.topic, max(cq.queue_id + 1, t.queue_count if t else 1), save=False)
            changed = True
    if changed:
        topics.save()
    for t in topics.topics.values():
        bind_queues(queues, t)


class StoreWriter:
    def __init__(self, config: StoreConfig, topics: TopicTable, queues: ConsumeQueueTable, commit_log: CommitLog,
                 segments: SegmentQueue, dispatcher: Dispatcher, disk: DiskMonitor, index: IndexService | None,
                 clock: Clock, put_lock: PutLock, group_commit: GroupCommitService | None = None,
                 archive: ArchiveGuard | None = None, check_disk: Callable[[], None] | None = None,
                 cleaner=None) -> None:
        """``put_lock``: the store's (topic creation and the queue flush's dispatch healing take it
        too); ``group_commit``: the SYNC_FLUSH service (None: ASYNC_FLUSH, no wait);
        ``check_disk``: measures the disks at once after a segment could not be made;
        ``cleaner``: the CommitLogCleaner whose ``hold`` (space_policy=refuse) refuses puts."""
        self.config = config
        self.topics = topics
        self.queues = queues
        self.commit_log = commit_log
        self.segments = segments
        self.dispatcher = dispatcher
        self.disk = disk
        self.index = index
        self.clock = clock
        self.put_lock = put_lock
        self.group_commit = group_commit
        self.archive = archive
        self.check_disk = check_disk or disk.refresh
        self.cleaner = cleaner
        self.store_host = codec.encode_host(config.store_host)
        self.max_body = config.message_body_bytes_max
        self._one_born: tuple[str | None, bytes] = (None, b"")   # put_one: the last born host string, its bytes
        # set by the store when it stops (reason, text): every put is refused with it
        self.stopped: tuple[PutReason, str] | None = None
        # set while this store follows a leader (or a leader is fenced): (NOT_LEADER, text naming the leader)
        self.role_refusal: tuple[PutReason, str] | None = None
        # a leader of a broker group (the broker's replication.acks.ReplicaAcks, or None): ``refusal()``
        # before a put, (PutReason, text) or None: the leader's lease ran out (LEASE_EXPIRED), too few
        # followers in sync (SYNC: REPLICAS_NOT_ENOUGH); ``wait(end, timeout_s)`` before the answer: None
        # once the put may be acknowledged, else the PutReason (REPLICATION_TIMEOUT, REPLICA_LOST,
        # LEASE_EXPIRED)
        self.replicas = None
        # why the last segment could not be made (cleared by the next successful append)
        self.segment_error: str | None = None

    # Refusal --------------------------------------------------------------------------
    def refusal(self) -> tuple[PutReason, str] | None:
        """Why puts are refused right now, as (reason, text for humans), or None: the one check
        every put makes, before validation and again under the put lock."""
        stopped = self.stopped or self.role_refusal
        if stopped is not None:
            return stopped
        rep = self.replicas
        if rep is not None:
            why = rep.refusal()          # a leader's: its lease, its in-sync set (SYNC)
            if why is not None:
                return why
        error = self.dispatcher.error
        if error is not None:
            return PutReason.DISPATCH_ERROR, error
        hold = self.cleaner.hold if self.cleaner is not None else None
        if hold is not None:
            return PutReason.UNCONSUMED_BACKLOG, hold.text
        full = self.disk.refusal
        if full is None:
            return None
        if self.disk.refusal_failed:        # no directory left but failed ones (log_failure.py): no room to make
            return PutReason.WRITE_ERROR, full
        if self.archive is not None:
            n = self.archive.unarchived_count(self.segments.segments)
            if n:
                return PutReason.ARCHIVE_PENDING, (
                    f"{full}; {n} sealed segment(s) wait for the archive (archive_before_delete, "
                    f"on_unarchived_full=refuse): run `tidemq archive`")
        return PutReason.DISK_FULL, full

    # Puts ----------------------------------------------------------------------------
    def put_batch(self, msgs: Sequence[Message], defer_dispatch: bool = False, wait: bool = True) -> PutResults:
        """Put many messages with one lock, one append pass and one flush wait.
        Returns one PutResult per message, in order (a PutResults). ``defer_dispatch``, ``wait``: see
        MessageStore.put_batch."""
        n = len(msgs)
        why = self.refusal()
        if why is not None:
            return PutResults.all_refused(n, PutResult.refused(*why))
        now = self.clock.now_ms()
        results = PutResults(n, now, self.store_host)
        prepared: list = []
        add = prepared.append
        topics = self.topics.topics
        host = self.store_host
        room = self.commit_log.max_record_size - codec.FIXED_OVERHEAD
        max_body = self.max_body
        for i, m in enumerate(msgs):
            # the common case inline (tags only, bytes body, known topic); the rest in prepare()
            t = topics.get(m.topic)
            body = m.body
            tags = m.tags
            qid = m.queue_id
            if (t is None or type(body) is not bytes or m.keys or m.properties or m.born_host
                    or (tags is not None and type(tags) is not str)
                    or (qid is not None and (type(qid) is not int or not 0 <= qid < t.queue_count))
                    or m.flag or m.sys_flag or m.reconsume_times or m.prepared_transaction_offset
                    or (m.born_timestamp_ms is not None and type(m.born_timestamp_ms) is not int)):
                p = self.prepare(m, i, now)
                if type(p) is tuple:
                    add(p)
                else:
                    results.refuse(i, p)
                continue
            enc = t.tag_cache.get(tags)
            if enc is None:
                enc = tags_encoding(t, tags, self.config.topic_tag_cache_max)
            pb, th, tcrc = enc
            bl = len(body)
            if pb is None or bl > max_body or bl + len(t.name_bytes) + len(pb) > room:
                p = self.prepare(m, i, now)     # the validators say what is wrong (if anything)
                if type(p) is tuple:
                    add(p)
                else:
                    results.refuse(i, p)
                continue
            # a Prepared, in its field order, as a plain tuple (see commit_log.Prepared: why)
            add((i, body, t, pb, qid, m.born_timestamp_ms or now, host, m.flag, m.sys_flag, m.reconsume_times,
                 m.prepared_transaction_offset, crc32(body) & 0x7FFFFFFF, th, None, None, tcrc))
        if not prepared:
            return results
        return self.append(prepared, results, now, defer_dispatch, wait)

    def put_encoded(self, topic: str, entries: Sequence[tuple], born_ms: int | None = None,
                    born_host: str | None = None, sys_flag: int = 0, defer_dispatch: bool = False,
                    wait: bool = True) -> PutResults:
        """Put messages of one topic whose properties are already encoded: the broker's compiled
        SendMessage lane, which builds them straight from the request's bytes, with no Message
        object and no property dict per message. One PutResult per entry, in order, with the same
        statuses and reasons as put_batch.

        Each entry is ``(body, properties)``: ``body`` bytes; ``properties`` the record's properties
        as codec.encode_properties writes them (UNIQ_KEY, TAGS, KEYS and the rest), without the
        record CRC tail. Checked here like every put (validate.py: check_encoded): the topic
        (created when auto_create_topics), the properties' bytes, from which the tags hash, the id
        and the keys are read, body type and size, properties size, record size. Queues are picked
        round-robin.

        ``born_ms``, ``born_host`` ("ipv4:port"), ``sys_flag``: every entry's (default: the store
        time, this store's host, 0), checked as put_batch checks a Message's (BAD_FIELD).
        ``defer_dispatch``, ``wait``: see MessageStore.put_batch."""
        n = len(entries)
        t = self.topics.topics.get(topic)
        if t is None:
            t, results = self._topic_batch(topic, n)
            if t is None:
                return results
        else:                                   # (_topic_batch's common case, inline)
            why = self.refusal()
            if why is not None:
                return PutResults.all_refused(n, PutResult.refused(*why))
            results = PutResults(n, self.clock.now_ms(), self.store_host)
        now = results.now
        host = self.store_host
        if born_host or born_ms or sys_flag:
            host = self._born(born_ms, born_host, sys_flag)
            if type(host) is not bytes:
                return PutResults.all_refused(n, host)
        born = born_ms or now
        max_body = self.max_body
        max_props = codec.USER_PROPERTIES_MAX_BYTES
        max_record = self.commit_log.max_record_size
        tl = len(t.name_bytes)
        room = max_record - codec.FIXED_OVERHEAD - codec.RECORD_CRC_TAIL_LEN - tl
        tail = codec.RECORD_CRC_TAIL
        mark = codec.RECORD_CRC_MARK
        tail_prefix = t.tail_prefix_crc
        index = self.index is not None
        name = t.name
        prepared: list = []
        add = prepared.append
        for i, (body, props) in enumerate(entries):
            pl = len(props)
            if type(body) is not bytes or type(props) is not bytes or len(body) > max_body or pl > max_props \
                    or len(body) + pl > room:
                bad = (check_body(body, max_body) or check_properties_type(props)
                       or check_sizes(body, max_body, tl, pl, max_record))     # the bounds test doubts it: ask
                if bad is not None:
                    results.refuse(i, bad)
                    continue
            why, reserved, th, uniq, keys = check_encoded(props, ENCODED_RESERVED)
            if why:
                results.refuse(i, refusal(why, reserved))
                continue
            pre = tail_prefix.get(pl)
            if pre is None:
                pre = codec.tail_prefix_crc(t.name_bytes, pl + codec.RECORD_CRC_TAIL_LEN)
                if len(tail_prefix) < 1024:
                    tail_prefix[pl] = pre
            ik = None
            if index and (keys or uniq):
                ik = index_keys(name, keys.split(codec.KEY_SEP) if keys else (), uniq)
            # a Prepared, in its field order, as a plain tuple (see commit_log.Prepared: why)
            add((i, body, t, props + tail, None, born, host, 0, sys_flag, 0, 0, crc32(body) & 0x7FFFFFFF, th, ik,
                 uniq, crc32(mark, crc32(props, pre))))
        if not prepared:
            return results
        return self.append(prepared, results, now, defer_dispatch, wait)

    def put_one(self, topic: str, entry: tuple, born_ms: int | None = None, born_host: str | None = None,
                sys_flag: int = 0) -> tuple[int, int] | None:
        """``put_encoded(topic, (entry,), born_ms, born_host, sys_flag, defer_dispatch=True)``'s common case
        in one compiled call (put_one.py): (queue offset, physical offset) of the message stored, or
        None, having done nothing, wherever put_encoded would do anything else than append it into
        the log's last segment and answer it PUT_OK with nothing to wait for: a refusal (of the store,
        of a check), a roll, a failing log, an offline directory, SYNC_FLUSH or followers (what a put
        waits for, or asks them: never taken here). The caller then calls put_encoded."""
        t = self.topics.topics.get(topic)
        if t is None or self.group_commit is not None or self.replicas is not None:
            return None
        if not born_host:
            host = self.store_host
        elif born_host == self._one_born[0]:       # the last born host taken (a client sends one host)
            host = self._one_born[1]
        else:
            host = born_host_bytes(born_host)
            if type(host) is not bytes:
                return None
            if type(born_host) is str:
                self._one_born = (born_host, host)
        cl = self.commit_log
        lock = self.put_lock
        with lock.appending:
            segs = self.segments.segments
            if not segs or cl.frozen or self.refusal() is not None:
                return None
            mf = segs[-1]
            if cl._dir_offline(mf.directory):
                return None
            # (a full segment, ``mf.is_full``: _put_one declines it, as every record that does not fit)
            got = _put_one(t, entry[0], entry[1], mf, born_ms, host, sys_flag, self.clock.now_ms(), self.store_host,
                           self.index is not None, ENCODED_RESERVED, self.max_body, cl.max_record_size)
            if got is None:
                return None
            dispatch, qoff = got
            pending = lock.pending
            if len(pending) < lock.deferred_max:
                pending.append(dispatch)       # lock.defer's common case, without its frame
            else:
                lock.defer(dispatch)
            self.segment_error = None
            w = cl.warmer
            if w is not None and dispatch[4] >= w.wake_offset:
                w.wake()
        return qoff, dispatch[3]

    def _born(self, born_ms: int | None, born_host: str | None, sys_flag: int) -> bytes | PutResult:
        """The born host of a batch whose messages share ``born_ms``, ``born_host`` ("ipv4:port") and
        ``sys_flag`` (put_encoded, put_slices): its bytes (this store's without one), or the refusal of
        the three (BAD_FIELD)."""
        bad = ((check_number("born_timestamp_ms", born_ms, I64) if born_ms is not None else None)
               or check_number("sys_flag", sys_flag, I32))
        if bad is not None:
            return bad
        return born_host_bytes(born_host) if born_host else self.store_host

    def _topic_batch(self, topic: str, n: int) -> tuple[TopicState | None, PutResults]:
        """The start of a put of ``n`` messages of one topic: (the topic, its empty results), or
        (None, every message refused: the store's refusal, or the topic's)."""
        why = self.refusal()
        if why is not None:
            return None, PutResults.all_refused(n, PutResult.refused(*why))
        t = self.topics.topics.get(topic)
        if t is None:
            bad = check_topic(topic, self.config.auto_create_topics)
            if bad is None:
                t, bad = self.create_topic_for_put(topic)
            if bad is not None:
                return None, PutResults.all_refused(n, bad)
        return t, PutResults(n, self.clock.now_ms(), self.store_host)

    def put_slices(self, topic: str, data, fields, extra: bytes = b"", skip=None, born=None,
                   wait: bool = True) -> PutResults:
        """Put messages of one topic given as slices of one buffer (the broker's SendRecords path:
        its frame): message i's id (its UNIQ_KEY), tags, keys, user properties and body are
        ``data[fields[i, j]:fields[i, j] + fields[i, 5 + j]]`` for j = 0 .. 4 (``fields``: n x 10
        uint32, record_loop.SLICE_FIELDS); its record's properties are its user properties,
        UNIQ_KEY, ``extra`` (encoded properties the caller adds to every message), TAGS and KEYS
        when it has them. ``skip``: a bool array of the messages not put (their results stay for
        the caller), or None. Queues are picked round-robin. Checked here like every put
        (validate.py: check_slices, in one compiled pass that also computes the tags hashes): the
        texts (UTF-8 without the separators, keys separated by single spaces, no property name
        the store writes itself or ``extra`` has), then the same sizes, statuses and reasons as
        put_encoded, with no Python work per message: the results are PutResults' arrays
        (``uniq`` is not filled). ``born``: (born ms, born host "ipv4:port", sys flag) of every
        message, checked and taken as put_encoded takes them (None: the store time, this store's
        host, 0)."""
        F = np.frombuffer(fields, np.uint32).reshape(-1, SLICE_FIELDS)
        n = len(F)
        t, results = self._topic_batch(topic, n)
        if t is None:
            return results
        born_ms, born_host, sys_flag = born if born is not None else (None, None, 0)
        host = self.store_host
        if born_host or born_ms or sys_flag:
            host = self._born(born_ms, born_host, sys_flag)
            if type(host) is not bytes:
                return PutResults.all_refused(n, host)
        reserved = slice_reserved(extra)
        if type(reserved) is not tuple:
            return PutResults.all_refused(n, reserved)
        if skip is not None:
            skip = np.ascontiguousarray(skip, np.bool_)
        why, ths, names = check_slices(data, F, skip, reserved)
        refused = np.frombuffer(why, np.uint8) != 0
        for i in np.flatnonzero(refused).tolist():
            results.refuse(i, refusal(why[i], names.get(i)))
        now = results.now
        tl = len(t.name_bytes)
        lens = F[:, 5:].astype(np.int64)
        tags, keys = lens[:, 1], lens[:, 2]
        props = slice_properties_len(lens[:, 0], tags, keys, lens[:, 3], len(extra), tail=0)   # without the tail
        body = lens[:, 4]
        doubtful = ((body > self.max_body) | (props > codec.USER_PROPERTIES_MAX_BYTES)
                    | (codec.FIXED_OVERHEAD + body + tl + props + codec.RECORD_CRC_TAIL_LEN
                       > self.commit_log.max_record_size)) & ~refused
        if skip is not None:
            doubtful &= ~skip
            take = ~(doubtful | skip | refused)
        else:
            take = ~(doubtful | refused)
        for i in np.flatnonzero(doubtful).tolist():
            a = int(F[i, 4])
            bad = check_sizes(bytes(data[a:a + int(body[i])]), self.max_body, tl, int(props[i]),
                              self.commit_log.max_record_size)
            results.refuse(i, bad or PutResult.refused(PutReason.ENCODE_FAILED, "message could not be encoded"))
        order = np.flatnonzero(take).astype(np.int64)
        if not len(order):
            return results
        prefix = crc32(f"{t.name}#".encode()) if self.index is not None else -1
        items = SlicedItems(t, data, F, order, np.frombuffer(ths, np.int64), extra, now, self.store_host, results, {},
                            bytearray(), prefix, born_ms or now, host, sys_flag)
        return self.append_items(items, results, wait=wait)

    def prepare(self, m: Message, i: int, now: int) -> tuple | PutResult:
        """Validate and encode one message (the general case): the message as a Prepared
        (a plain tuple in Prepared's field order), or the PutResult that refuses it. An
        unknown topic is created (when allowed) only once the message is valid."""
        t = self.topics.topics.get(m.topic)
        if t is None:
            bad = check_topic(m.topic, self.config.auto_create_topics)
            if bad is not None:
                return bad
            t = TopicState(m.topic, self.config.topic_queues_default)    # provisional, for the checks
        body = m.body
        if type(body) is not bytes and isinstance(body, (bytes, bytearray, memoryview)):
            body = bytes(body)
        born = m.born_timestamp_ms
        plain = (not (m.flag or m.sys_flag or m.reconsume_times or m.prepared_transaction_offset)
                 and (born is None or type(born) is int and 0 <= born < 1 << 62))      # else: check_numbers says
        bad = (check_body(body, self.max_body) or (None if plain else check_numbers(m))
               or check_queue_id(m.queue_id, t) or check_tags(m.tags))
        if bad is not None:
            return bad
        tags, props, uniq = m.tags, m.properties, None
        pb = encode_properties(m)
        if type(pb) is not bytes:
            return pb
        if props:
            uniq = props.get(PROP_UNIQ_KEY)
        bad = check_record_size(len(body), len(t.name_bytes), len(pb), self.commit_log.max_record_size)
        if bad is not None:
            return bad
        born_host = self.store_host
        if m.born_host:
            born_host = born_host_bytes(m.born_host)
            if type(born_host) is not bytes:
                return born_host
        if self.topics.topics.get(t.name) is not t:
            t, bad = self.create_topic_for_put(m.topic)
            if bad is not None:
                return bad
        ik = None
        if self.index is not None and (m.keys or uniq):
            ik = index_keys(t.name, m.keys, uniq)
        # index, body, topic, properties, queue_id, born_timestamp_ms, born_host, flag, sys_flag,
        # reconsume_times, prepared_transaction_offset, body_crc, tags_hash, index_keys, uniq_key, tail_crc
        return (i, body, t, pb, m.queue_id, m.born_timestamp_ms or now, born_host, m.flag, m.sys_flag,
                m.reconsume_times, m.prepared_transaction_offset, crc32(body) & 0x7FFFFFFF,
                tags_hash(tags) if tags else 0, ik, uniq, codec.tail_crc(t.name_bytes, pb))

    def append(self, prepared: list[tuple], results: PutResults, now: int, defer_dispatch: bool = False,
               wait: bool = True) -> PutResults:
        """The common second half of the puts: append the prepared messages under the put lock,
        dispatch them, wait for the flush (SYNC_FLUSH), complete ``results``."""
        return self.append_items(PreparedItems(prepared, now, self.store_host, results, {}, []), results,
                                 defer_dispatch, wait)

    def append_items(self, items: PreparedItems | SlicedItems, results: PutResults,
                     defer_dispatch: bool = False, wait: bool = True) -> PutResults:
        """``append`` of a batch as the record loops take it (commit_log.PreparedItems, SlicedItems).
        ``defer_dispatch``: the dispatch waits in the put lock (put_lock.PutLock) for its next taker.
        ``wait`` False: what the acknowledgement waits for (the group commit's fsync, SYNC replication)
        is not waited for here: ``results.pending_end`` says up to where, and ``settle`` completes the
        results once the caller has seen it durable (MessageStore.when_durable, settle_put)."""
        failure: AppendError | None = None
        appended = 0
        now = items.now_ms
        with self.put_lock.appending:          # (what waits to be dispatched goes on waiting: put_lock.py)
            why = self.refusal()
            if why is not None:
                refused = PutResult.refused(*why)
                for k in range(items.n):
                    results.refuse(items.index(k), refused)
                return results
            last = self.segments.last
            try:
                appended = self.commit_log.append_items(items)
            except AppendError as e:
                failure = e
                appended = e.appended
            if failure is not None and failure.log_failed:
                appended_failed, appended = appended, 0      # after the log's durable end: nothing dispatched
            elif appended:
                first, final = items.index(0), items.index(appended - 1)
                entry = (items.units, items.index_items, now, results.phys[first], self.segments.max_offset)
                if defer_dispatch:
                    self.put_lock.defer(entry)
                else:
                    self.put_lock.run(entry)             # after what waits: log order
                end = results.phys[final] + results.size[final]
            if failure is None:
                self.segment_error = None
                if self.segments.last is not last:
                    # a new segment took its space (segments are preallocated: the usage moves only
                    # here and at deletion): measure now, so a directory that reached the warning
                    # ratio refuses the next put instead of filling up before the next disk check
                    self.disk.refresh()
        if failure is not None and failure.log_failed:
            return self._log_failed(failure, items, appended_failed, results)
        rep = self.replicas
        if appended and rep is not None:
            rep.appended(end)                  # the followers' senders wake up
        if appended and (self.group_commit is not None or rep is not None):
            if wait:
                why = self.group_commit.wait_durable(end, self.config.sync_flush_timeout_ms / 1000) \
                    if self.group_commit is not None else None
                self.settle(results, end, why, rep.timeout_s if rep is not None else 0.0)
            elif self.group_commit is not None or rep.sync:
                results.pending_end = end       # the caller awaits the fsync / the followers, then settle_put
            else:               # nothing to wait for: the followers (their lease) asked without waiting
                self.settle(results, end, None, 0.0)
        if failure is not None and not isinstance(failure.cause, OSError):
            text = f"message could not be encoded: {failure.cause!r}"
            log.error("%s", text)
            refused = PutResult.refused(PutReason.ENCODE_FAILED, text)
            for k in range(appended, items.n):
                results.refuse(items.index(k), refused)
            failure = None
        if failure is not None:
            self._segment_failed(failure, [items.index(k) for k in range(appended, items.n)], results)
        return results

    def settle(self, results: PutResults, end: int, why: PutReason | None, replication_timeout_s: float,
               replicas=None) -> None:
        """The outcome of appended records ending at ``end``, the group commit having answered ``why``
        (None: durable; FLUSH_FAILED; FLUSH_TIMEOUT): then SYNC replication's wait, at most
        ``replication_timeout_s``, for a put on disk; ``replicas``: the followers' acks the put was
        appended under (a put settled later keeps them across a change of role), else the current."""
        results.pending_end = -1
        if why is PutReason.FLUSH_FAILED:
            results.status, results.reason = PutStatus.FLUSH_DISK_FAILED, PutReason.FLUSH_FAILED
            results.error = self._flush_failed_text(end)
        elif why is not None:
            results.status, results.reason = PutStatus.FLUSH_DISK_TIMEOUT, PutReason.FLUSH_TIMEOUT
            results.error = f"appended, but not on disk within sync_flush_timeout_ms={self.config.sync_flush_timeout_ms}"
        rep = replicas if replicas is not None else self.replicas
        if rep is not None and results.status is PutStatus.PUT_OK:
            reason = rep.wait(end, replication_timeout_s)
            if reason is not None:
                results.status, results.reason, results.error = reason.status, reason, rep.describe(reason)

    def _flush_failed_text(self, end: int) -> str:
        f = self.commit_log.failed_for(end)
        where = f" in {f.directory} ({f.error}; durable up to offset {f.durable_end})" if f is not None else ""
        return f"appended, but the commit log failed{where}: not durable and never will be; store it again"

    def _log_failed(self, failure: AppendError, items, appended: int, results: PutResults) -> PutResults:
        """The log failed under this batch (a write error, or a failure found before it): its
        ``appended`` first messages are after the log's durable end, FLUSH_FAILED; the rest were not
        written (WRITE_ERROR). A write error of this batch's makes the cut (log_failure.py) here."""
        if failure.segment is not None:
            self.commit_log.fail(failure.segment, failure.cause)        # takes the put lock
        if appended:
            results.status, results.reason = PutStatus.FLUSH_DISK_FAILED, PutReason.FLUSH_FAILED
            results.error = self._flush_failed_text(results.phys[items.index(appended - 1)]
                                                    + results.size[items.index(appended - 1)])
        self._segment_failed(failure, [items.index(k) for k in range(appended, items.n)], results)
        return results

    def _segment_failed(self, failure: AppendError, left: list[int], results: PutResults) -> None:
        """No segment could be made for ``left``, or it could not be written (``failure.writing``:
        nothing of ``left`` is in the log): no room is a refusal like DISK_FULL (clients retry
        elsewhere); other errors say so (WRITE_ERROR)."""
        full = getattr(failure.cause, "errno", None) == errno.ENOSPC
        what = "write the commit log" if failure.writing else "create a commit-log segment"
        text = f"{'disk full: ' if full else ''}cannot {what}: {failure.cause}"
        self.segment_error = text
        log.error("%s", text)
        try:
            self.check_disk()          # the flags follow at once, not at the next check
        except OSError:
            pass
        if full and self.disk.refusal:
            text = self.disk.refusal   # names the directories and how full they are
        refused = PutResult.refused(PutReason.DISK_FULL if full else PutReason.WRITE_ERROR, text)
        for i in left:
            results.refuse(i, refused)

    # Topics --------------------------------------------------------------------------
    def create_topic(self, name: str, queue_count: int, space_policy=None, write_ids=None,
                     message_kind=None) -> TopicState:
        """Create a topic, grow its queue count or set its space policy (ValueError: not a topic
        name, no queue, too many, not a policy); ``write_ids``: the queues puts without a queue id
        go to (None: as they were), set together (no put can fall between)."""
        if queue_count > self.config.topic_queues_max:
            raise ValueError(f"{queue_count} queues: a topic has at most topic_queues_max="
                             f"{self.config.topic_queues_max}")
        with self.put_lock:
            t = self.topics.create(name, queue_count, space_policy=space_policy, message_kind=message_kind)
            bind_queues(self.queues, t)
            if write_ids is not None:
                t.write_ids = write_ids
        return t

    def delete_topic(self, name: str, log_end: int | None = None) -> dict | None:
        """Delete a topic: forgotten (saved first), its consume queues deleted; its records stay
        in the log until cleanup, dead. None if there is no such topic. ``log_end``: where its
        records end (a follower takes its leader's; default: this log's end)."""
        with self.put_lock:           # every record put so far is dispatched: the end is exact
            log_end = self.segments.max_offset if log_end is None else log_end
            t = self.topics.delete(name, log_end)
            if t is None:
                return None
            messages = self.queues.drop_topic(name)
        return {"topic": name, "queues": t.queue_count, "messages": messages, "log_end": log_end}

    def create_topic_for_put(self, topic: str) -> tuple[TopicState | None, PutResult | None]:
        """Auto-creation: (the topic, None), or (None, the PutResult saying why it could not be saved)."""
        try:
            with self.put_lock:      # created only if still unknown: never grows a topic made meanwhile
                if self.topics.get(topic) is None:
                    bind_queues(self.queues, self.topics.create(topic, self.config.topic_queues_default))
        except OSError as e:
            return None, PutResult.refused(PutReason.TOPIC_CREATE_FAILED, f"cannot save topic {topic!r}: {e}")
        return self.topics.get(topic), None
