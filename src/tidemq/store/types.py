"""The store's public values: the message to put, statuses, results.

Expected outcomes are values (PutStatus / GetStatus), not exceptions.
"""

from __future__ import annotations

import enum
from array import array
from operator import itemgetter
from typing import Iterator, Mapping, Sequence

from ..record.codec import StoredMessage, offset_msg_id, PROP_UNIQ_KEY


class Message:
    """A message to put. ``keys`` is a list of strings (or one string); ``queue_id`` None picks round-robin."""

    __slots__ = ("topic", "body", "tags", "keys", "properties", "queue_id", "flag", "sys_flag",
                 "born_timestamp_ms", "born_host", "reconsume_times", "prepared_transaction_offset")

    def __init__(self, topic: str, body: bytes, tags: str | None = None, keys: Sequence[str] | str | None = None,
                 properties: Mapping[str, str] | None = None, queue_id: int | None = None, flag: int = 0,
                 sys_flag: int = 0, born_timestamp_ms: int | None = None, born_host: str | None = None,
                 reconsume_times: int = 0, prepared_transaction_offset: int = 0) -> None:
        self.topic = topic
        self.body = body
        self.tags = tags
        self.keys = [keys] if isinstance(keys, str) else (list(keys) if keys else [])
        self.properties = properties
        self.queue_id = queue_id
        self.flag = flag
        self.sys_flag = sys_flag
        self.born_timestamp_ms = born_timestamp_ms
        self.born_host = born_host
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset

    def __repr__(self) -> str:
        return f"Message(topic={self.topic!r}, body={len(self.body)} bytes, tags={self.tags!r}, keys={self.keys!r})"


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"              # appended, but not durable within sync_flush_timeout_ms
    FLUSH_DISK_FAILED = "FLUSH_DISK_FAILED"                # appended, but an fsync (or write) that covered it failed:
                                                           # not durable and never will be; store it again
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"        # store not running, disk full, write errors: see .error
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"                    # bad topic, body too large, bad queue id
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    TOPIC_NOT_FOUND = "TOPIC_NOT_FOUND"                    # auto_create_topics off
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"            # appended, not confirmed by enough followers in time
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"            # SYNC replication without enough followers in sync
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def ok(self) -> bool:
        return self is PutStatus.PUT_OK


class PutReason(enum.Enum):
    """Why a put is not PUT_OK: the typed outcome callers switch on (``PutResult.error`` is the
    same for humans). Each reason comes with one status (``status``)."""

    FLUSH_TIMEOUT = "FLUSH_TIMEOUT"                # appended, not durable within sync_flush_timeout_ms
    FLUSH_FAILED = "FLUSH_FAILED"                  # appended, but the commit-log fsync or write that covered it
                                                   # failed: taken out of the log, final (store/log_failure.py)
    NOT_RUNNING = "NOT_RUNNING"                    # store not started, stopped, killed or failed to start
    SHUTTING_DOWN = "SHUTTING_DOWN"                # store shutting down
    DISK_FULL = "DISK_FULL"                        # a directory at the warning ratio, or no room for a segment
    ARCHIVE_PENDING = "ARCHIVE_PENDING"            # disk full, and sealed segments wait for `tidemq archive`
    UNCONSUMED_BACKLOG = "UNCONSUMED_BACKLOG"      # space short, the oldest segment holds messages of a topic
                                                   # with space_policy=refuse that subscribed groups have not consumed
    DISPATCH_ERROR = "DISPATCH_ERROR"              # consume queue / index write failed (healed in the background)
    WRITE_ERROR = "WRITE_ERROR"                    # a commit-log segment could not be created or written (I/O error)
    TOPIC_CREATE_FAILED = "TOPIC_CREATE_FAILED"    # auto-creation could not save config/topics.json
    INVALID_TOPIC = "INVALID_TOPIC"                # not a topic name (codec.topic_problem)
    TOPIC_NOT_FOUND = "TOPIC_NOT_FOUND"            # unknown topic, auto_create_topics off
    BAD_BODY = "BAD_BODY"                          # body is not bytes
    BODY_TOO_LARGE = "BODY_TOO_LARGE"              # body over message_body_bytes_max
    PROPERTIES_TOO_LARGE = "PROPERTIES_TOO_LARGE"  # encoded properties over codec.USER_PROPERTIES_MAX_BYTES
    RECORD_TOO_LARGE = "RECORD_TOO_LARGE"          # the record does not fit in one segment
    BAD_QUEUE_ID = "BAD_QUEUE_ID"                  # queue_id not a queue of the topic
    BAD_PROPERTY = "BAD_PROPERTY"                  # tags, keys or a property name / value not allowed
    BAD_FIELD = "BAD_FIELD"                        # a numeric field out of its range, born_host not ipv4:port
    ENCODE_FAILED = "ENCODE_FAILED"                # the record could not be packed
    NOT_LEADER = "NOT_LEADER"                      # a follower (or a fenced leader): writes go to the leader
    REPLICAS_NOT_ENOUGH = "REPLICAS_NOT_ENOUGH"    # SYNC: fewer followers in sync than in_sync_replicas_min
                                                   # (refused before anything is written)
    REPLICATION_TIMEOUT = "REPLICATION_TIMEOUT"    # appended, not confirmed within replication_timeout_ms
                                                   # (SYNC), or the leader's lease ran out before the answer
    REPLICA_LOST = "REPLICA_LOST"                  # SYNC: appended, the in-sync set shrank below
                                                   # in_sync_replicas_min before it confirmed
    LEASE_EXPIRED = "LEASE_EXPIRED"                # a leader whose coordinator lease ran out (another
                                                   # member may lead): refused before anything is written

    @property
    def status(self) -> "PutStatus":
        return _REASON_STATUS[self]


_REASON_STATUS = {
    PutReason.FLUSH_TIMEOUT: PutStatus.FLUSH_DISK_TIMEOUT,
    PutReason.FLUSH_FAILED: PutStatus.FLUSH_DISK_FAILED,
    PutReason.WRITE_ERROR: PutStatus.CREATE_MAPPED_FILE_FAILED,
    PutReason.TOPIC_NOT_FOUND: PutStatus.TOPIC_NOT_FOUND,
    PutReason.PROPERTIES_TOO_LARGE: PutStatus.PROPERTIES_SIZE_EXCEEDED,
    PutReason.REPLICAS_NOT_ENOUGH: PutStatus.SLAVE_NOT_AVAILABLE,
    # appended, not confirmed: as a timeout, so that a resend is never stored twice (answered once confirmed)
    PutReason.REPLICA_LOST: PutStatus.FLUSH_SLAVE_TIMEOUT,
    PutReason.REPLICATION_TIMEOUT: PutStatus.FLUSH_SLAVE_TIMEOUT,
    **{r: PutStatus.SERVICE_NOT_AVAILABLE for r in (
        PutReason.NOT_RUNNING, PutReason.SHUTTING_DOWN, PutReason.DISK_FULL, PutReason.ARCHIVE_PENDING,
        PutReason.UNCONSUMED_BACKLOG, PutReason.DISPATCH_ERROR, PutReason.TOPIC_CREATE_FAILED,
        PutReason.NOT_LEADER, PutReason.LEASE_EXPIRED)},
    **{r: PutStatus.MESSAGE_ILLEGAL for r in (
        PutReason.INVALID_TOPIC, PutReason.BAD_BODY, PutReason.BODY_TOO_LARGE, PutReason.RECORD_TOO_LARGE,
        PutReason.BAD_QUEUE_ID, PutReason.BAD_PROPERTY, PutReason.BAD_FIELD, PutReason.ENCODE_FAILED)},
}
assert set(_REASON_STATUS) == set(PutReason)


_PR_FIELDS = ("status", "commitlog_offset", "queue_id", "queue_offset", "size", "store_timestamp_ms",
              "error", "uniq_key", "store_host_raw", "reason")


class PutResult(tuple):
    """The outcome of one put. A tuple underneath (a batch makes one per message, so it
    must be cheap): status, commitlog_offset, queue_id, queue_offset, size,
    store_timestamp_ms, error, uniq_key, store_host_raw, reason. ``reason`` (a PutReason)
    says why a put is not PUT_OK, ``error`` the same for humans; both None when it is."""

    __slots__ = ()

    def __new__(cls, status: PutStatus, commitlog_offset: int = -1, queue_id: int = -1, queue_offset: int = -1,
                size: int = 0, store_timestamp_ms: int = 0, error: str | None = None,
                uniq_key: str | None = None, store_host: bytes = b"", reason: PutReason | None = None):
        return tuple.__new__(cls, (status, commitlog_offset, queue_id, queue_offset, size, store_timestamp_ms,
                                   error, uniq_key, store_host, reason))

    @classmethod
    def refused(cls, reason: PutReason, error: str) -> "PutResult":
        """A put that was not done (or not made durable in time): its reason's status, the text."""
        return tuple.__new__(cls, (reason.status, -1, -1, -1, 0, 0, error, None, b"", reason))

    status = property(itemgetter(0))
    commitlog_offset = property(itemgetter(1))
    queue_id = property(itemgetter(2))
    queue_offset = property(itemgetter(3))
    size = property(itemgetter(4))
    store_timestamp_ms = property(itemgetter(5))
    error = property(itemgetter(6))
    uniq_key = property(itemgetter(7))
    store_host_raw = property(itemgetter(8))
    reason = property(itemgetter(9))

    @property
    def ok(self) -> bool:
        return self[0] is PutStatus.PUT_OK

    @property
    def offset_msg_id(self) -> str | None:
        if self[1] < 0:
            return None
        return offset_msg_id(self[8], self[1])

    @property
    def msg_id(self) -> str | None:
        """UNIQ_KEY when the producer gave one, else the offset message id (computed on demand)."""
        return self[7] or self.offset_msg_id

    def __repr__(self) -> str:
        extra = f", reason={self.reason.name}, error={self.error!r}" if self.reason or self.error else ""
        return (f"PutResult({self.status.name}, commitlog_offset={self.commitlog_offset}, queue_id={self.queue_id}, "
                f"queue_offset={self.queue_offset}{extra})")


_new = tuple.__new__
_ZERO_I64 = array("q", (0,))       # PutResults' arrays: n zeros each
_ZERO_I32 = array("i", (0,))


class PutResults(Sequence):
    """The outcomes of a batch put, one per message in order: a Sequence of PutResult, built on
    demand from arrays filled by the append (store/record_loop.py), not one object per message
    (a batch of 1024 made 1024 tuples and woke the cyclic GC). Bulk readers (the broker's
    SendRecords) read the arrays: ``phys`` / ``qoff`` (int64), ``size`` / ``qid`` (int32), indexed
    by message; ``refused`` maps the index of every message not appended to its PutResult.

    A message is appended when its ``size`` is > 0; the appended ones share ``status``, ``error``
    and ``reason`` (PUT_OK; FLUSH_DISK_TIMEOUT when the flush wait timed out; FLUSH_DISK_FAILED when
    the commit log failed under them (log_failure.py: taken out of the log); FLUSH_SLAVE_TIMEOUT or
    SLAVE_NOT_AVAILABLE when SYNC replication's wait did not see enough followers confirm them).
    ``pending_end`` >= 0: a put made with ``wait=False`` whose outcome is not settled yet: ``status``
    says PUT_OK only once MessageStore.settle_put has run (the caller must not answer before)."""

    __slots__ = ("phys", "size", "qid", "qoff", "uniq", "refused", "status", "error", "reason", "now", "host",
                 "pending_end")

    def __init__(self, n: int, now_ms: int = 0, store_host: bytes = b"") -> None:
        self.phys = _ZERO_I64 * n         # (a repetition: ~4x cheaper than array(t, bytes(k)), any n)
        self.size = _ZERO_I32 * n
        self.qid = _ZERO_I32 * n
        self.qoff = _ZERO_I64 * n
        self.uniq: list = [None] * n
        self.refused: dict[int, PutResult] = {}
        self.status = PutStatus.PUT_OK
        self.error: str | None = None
        self.reason: PutReason | None = None
        self.now = now_ms
        self.host = store_host
        # a put made with wait=False: the commit-log offset its acknowledgement still waits for (the
        # group commit's fsync; MessageStore.when_durable / settle_put), -1 when nothing is pending
        self.pending_end = -1

    @classmethod
    def all_refused(cls, n: int, result: "PutResult") -> "PutResults":
        r = cls(n)
        r.refused = dict.fromkeys(range(n), result)
        return r

    def refuse(self, i: int, result: "PutResult") -> None:
        self.refused[i] = result

    def __len__(self) -> int:
        return len(self.uniq)

    def _one(self, i: int) -> "PutResult":
        r = self.refused.get(i)
        if r is not None:
            return r
        return _new(PutResult, (self.status, self.phys[i], self.qid[i], self.qoff[i], self.size[i], self.now,
                                self.error, self.uniq[i], self.host, self.reason))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._one(k) for k in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("PutResults index out of range")
        return self._one(i)

    def __iter__(self) -> Iterator["PutResult"]:
        one = self._one
        return (one(i) for i in range(len(self)))

    def __eq__(self, other) -> bool:
        if isinstance(other, (list, tuple, PutResults)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None

    def __add__(self, other) -> list:
        return list(self) + list(other)

    def __radd__(self, other) -> list:
        return list(other) + list(self)

    def all_ok(self) -> bool:
        """Was every message appended and made durable as asked (PUT_OK)?"""
        return not self.refused and self.status is PutStatus.PUT_OK and len(self) > 0 and min(self.size) > 0

    def __repr__(self) -> str:
        return f"PutResults({list(self)!r})"


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"        # messages there, none matched the tag filter
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"    # the commit log under them was deleted
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"          # no consume-queue unit readable at the offset
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"  # offset > max offset
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"      # offset == max offset: nothing new yet
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"            # offset < min offset (cleaned away)
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"  # unknown topic or queue
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"      # queue exists, never had a message
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # the store is not running: retry the same offset
    MESSAGE_DAMAGED = "MESSAGE_DAMAGED"              # only records failing their CRC there: skipped, go on
                                                     # at next_offset (counted in stats()["records_damaged"])


class GetResult:
    __slots__ = ("status", "next_offset", "min_offset", "max_offset", "messages", "from_disk", "records", "frame",
                 "walking")

    def __init__(self, status: GetStatus, next_offset: int, min_offset: int, max_offset: int,
                 messages: list[StoredMessage] | None = None, from_disk: bool = False) -> None:
        self.status = status
        self.next_offset = next_offset
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.messages = messages if messages is not None else []
        self.from_disk = from_disk
        self.records = None        # get_raw: (sizes, bytes of the records back to back)
        self.frame = None          # get_raw: (the bytes object records are views of, its room's size, whether
                                   # its header was written into the room)
        self.walking = None        # OFFSET_OVERFLOW_ONE while a damaged unit's walk of the log runs aside
                                   # (unit_repair.py): the walks kept before it (notify_readable(cb, walking)
                                   # calls cb once the next is kept)

    def __repr__(self) -> str:
        return (f"GetResult({self.status.name}, next={self.next_offset}, min={self.min_offset}, "
                f"max={self.max_offset}, messages={len(self.messages)})")


class StoreError(Exception):
    """A store that cannot start or continue: the message says why and what to do."""


class StoreNotRunning(StoreError):
    """A call that needs a running store (one with no status to answer with) made before
    start() or after shutdown() / kill() / a failed start. Calls that answer with a status
    (put*, get, get_raw) answer SERVICE_NOT_AVAILABLE instead."""

    def __init__(self, state: "StoreState", call: str) -> None:
        super().__init__(f"store is {state.value}: {call}() needs a running store")
        self.state = state
        self.call = call


class StoreState(enum.StrEnum):
    """A store's lifecycle: NEW -> STARTING -> RUNNING -> STOPPING -> STOPPED; STARTING ->
    FAILED when start() fails; KILLED by kill() (a test's simulated crash). Only a NEW store
    starts; only a RUNNING one serves (see MessageStore)."""

    NEW = "new"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    KILLED = "killed"
    FAILED = "failed"


__all__ = ["Message", "PutStatus", "PutReason", "PutResult", "PutResults", "GetStatus", "GetResult", "StoredMessage", "StoreError",
           "StoreNotRunning", "StoreState", "PROP_UNIQ_KEY"]
