"""Where the Spark source reads from: the broker (raw pulls) or a store's files (offline).

Both answer the same four questions (queues of a topic, a queue's offset range, the
offset at a time, the records of an offset range as Arrow batches), so planning and
reading above them do not care which one is used. Backends are made where they are
used (driver or executor) from the source's options; nothing here is pickled.
"""

from __future__ import annotations

import bisect
import logging
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..record import codec
from .decode import SCHEMA, decode, positions_of
from .entry import load_module
from .files import IncompleteStoreError, StoreFiles, StoreFilesError

log = logging.getLogger("tidemq.spark")

BATCH_ROWS = 65536
READ_PREFETCH = 1       # broker mode: pulls under way while a batch is decoded (each up to 16 MiB)
_EMPTY = pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in SCHEMA], schema=SCHEMA)  # (no pandas import)


class DataLossError(RuntimeError):
    """Offsets asked for are no longer in the store (cleaned away) and failOnDataLoss is on."""


class Backend:
    def queue_count(self, topic: str) -> int:
        raise NotImplementedError

    def queue_range(self, topic: str, qid: int) -> tuple[int, int]:
        raise NotImplementedError

    def offset_at(self, topic: str, qid: int, timestamp_ms: int) -> int:
        raise NotImplementedError

    def read(self, topic: str, qid: int, start: int, end: int, batch_rows: int) -> Iterator[tuple[pa.RecordBatch, int]]:
        """Batches of the records in [start, end), each with how many offsets of its stretch
        were missing (cleaned away, holes, unreadable records)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class FileBackend(Backend):
    def __init__(self, path: str, commitlog_dirs: tuple[str, ...] = ()) -> None:
        self.files = StoreFiles(path, commitlog_dirs)

    def queue_count(self, topic: str) -> int:
        return self.files.queue_count(topic)

    def queue_range(self, topic: str, qid: int) -> tuple[int, int]:
        return self.files.queue_range(topic, qid)

    def offset_at(self, topic: str, qid: int, timestamp_ms: int) -> int:
        """The first offset whose message was stored at or after timestamp_ms (binary search)."""
        lo, hi = self.files.queue_range(topic, qid)
        while lo < hi:
            mid = (lo + hi) // 2
            ts = self._store_ts(topic, qid, mid)
            if ts is None or ts < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _store_ts(self, topic: str, qid: int, offset: int) -> int | None:
        u = self.files.units(topic, qid, offset, offset + 1)
        if len(u) == 0 or u["size"][0] <= 0:
            return None
        seg = int(self.files.locate(u["offset"][:1])[0])
        if seg < 0:
            return None
        buf = self.files.segment(seg)
        p = int(u["offset"][0]) - self.files.segment_starts[seg] + codec.OFF_STORETIMESTAMP
        return int(buf[p:p + 8].view(">i8")[0])

    def read(self, topic, qid, start, end, batch_rows=BATCH_ROWS):
        files = self.files
        at = start
        first = files.first_unit(topic, qid)
        if first is not None and at < first:             # its head files were cleaned away meanwhile
            yield _EMPTY, min(first, end) - at
            at = first
        holes = files.missing_segments()
        dead_before = files.deleted_topics().get(topic, -1)
        prev_end = None          # where the last record read that stood for its unit ends (a record boundary)
        while at < end:
            units = files.units(topic, qid, at, min(end, at + batch_rows))
            if len(units) == 0:
                yield _EMPTY, end - at                   # the queue's files end before `end`
                return
            for lo, hi, why, what in holes:
                into = (units["size"] > 0) & (units["offset"] >= lo) & (units["offset"] < hi)
                if into.any():
                    q = at + int(np.flatnonzero(into)[0])
                    raise IncompleteStoreError(
                        f"tidemq: {topic} queue {qid} offset {q} points into commit-log segments that are not in "
                        f"{', '.join(files.commitlog_dirs)}: {what}. Give every commit-log directory of the store "
                        f"(option commitlogDirs)", why)
            # a unit past the last segment found with nothing saying one is missing: a damaged unit, found
            # again in the log or an offset lost (_rows, _find_again)
            qoffs = np.arange(at, at + len(units), dtype=np.int64)     # the queue offset each unit stands for
            at += len(units)
            offsets = units["offset"].astype(np.int64)
            sizes = units["size"].astype(np.int64)
            out, missing, last = self._rows(topic, qid, offsets, sizes, qoffs)
            if missing and self._find_again(topic, qid, offsets, sizes, qoffs, missing, out, prev_end, dead_before):
                out, missing, last = self._rows(topic, qid, offsets, sizes, qoffs)
            prev_end = last if last is not None else prev_end
            yield from out

    def _rows(self, topic, qid, offsets, sizes, qoffs):
        """The records a chunk of units stands for as (batch, offsets lost) pairs; the queue offsets of
        the units that did not stand for an intact record in the log and may be found again (not those
        cleaned away: before the log's first segment, or in one deleted since the listing); where the
        last record served ends (None: none)."""
        files = self.files
        seg = files.locate(offsets)
        log_min = files.segment_starts[0] if files.segment_starts else 0
        gone = (sizes > 0) & (offsets >= 0) & (offsets < log_min)             # cleaned away
        alive = (sizes > 0) & (seg >= 0)
        out: list = []
        lost = len(offsets) - int(alive.sum())
        suspects = set(qoffs[~alive & ~gone].tolist())
        a_off, a_size, a_seg, a_q = offsets[alive], sizes[alive], seg[alive], qoffs[alive]
        last = None
        cuts = np.flatnonzero(np.diff(a_seg)) + 1     # units follow the log: runs per segment
        runs = zip(np.r_[0, cuts], np.r_[cuts, len(a_seg)]) if len(a_seg) else ()
        for lo, hi in runs:
            i = int(a_seg[lo])
            try:
                buf = files.segment(i)
            except FileNotFoundError:                 # deleted since the listing: cleaned away
                lost += int(hi - lo)
                continue
            batch, bad = decode(buf, a_off[lo:hi] - files.segment_starts[i], a_size[lo:hi],
                                expect=(topic, qid, a_q[lo:hi]))
            if bad:
                served = set(batch.column("queue_offset").to_pylist())
                suspects.update(q for q in a_q[lo:hi].tolist() if q not in served)
            if batch.num_rows:
                k = int(np.searchsorted(a_q, batch.column("queue_offset")[-1].as_py()))
                last = int(a_off[k] + a_size[k])
            out.append((batch, lost + bad))
            lost = 0
        if lost or not out:
            out.append((_EMPTY, lost))
        return out, sorted(suspects), last

    def _find_again(self, topic, qid, offsets, sizes, qoffs, missing, out, prev_end, dead_before) -> bool:
        """Damaged units of a chunk whose records are intact in the log (StoreFiles.find_record, as the
        store's read path finds them: store/unit_repair.py) put right in ``offsets`` / ``sizes``: True
        when one was found (the chunk is read again)."""
        served = sorted(q for batch, _ in out for q in batch.column("queue_offset").to_pylist())
        base = int(qoffs[0])
        found = False
        for q in missing:
            k = bisect.bisect_left(served, q)
            start = int(offsets[served[k - 1] - base] + sizes[served[k - 1] - base]) if k else prev_end
            got = self.files.find_record(topic, qid, q, start if start is not None else 0, dead_before)
            if got is None:
                continue
            log.warning("tidemq: consume-queue unit %s/%d queue offset %d is damaged; its record is intact in the "
                        "commit log at %d: read from there (run `tidemq verify`)", topic, qid, q, got[0])
            offsets[q - base], sizes[q - base] = got
            bisect.insort(served, q)
            found = True
        return found

    def close(self) -> None:
        self.files.close()


def connection(options) -> dict:
    """How tidemq.client reaches the broker, from the source's or the sink's options: ``accessKey``
    and ``secretKey`` (both or neither: every call signed, as the broker's authentication wants),
    ``tls`` (true/false) and ``rootCertificates`` (a PEM file's path, readable where the tasks run:
    TLS against those roots; without it, the system's). Keyword arguments of Producer and
    PullConsumer; ValueError for a half-given pair or a bad flag. (The JVM reader gets them in each
    partition: planner.py, Connection.java.)"""
    from .plan import flag
    ak, sk = options.get("accessKey") or None, options.get("secretKey") or None
    if (ak is None) != (sk is None):
        raise ValueError("tidemq: give both options accessKey and secretKey, or neither")
    return {"access_key": ak, "secret_key": sk, "tls": flag(options, "tls", False),
            "root_certificates": options.get("rootCertificates") or None}


class BrokerError(RuntimeError):
    """A broker could not be read, in one line naming the option to change (``explain``);
    ``unreachable``: it did not answer (another member may)."""

    unreachable = False


class Refused(BrokerError):
    """The broker refuses the read as its options set it up: its certificate not trusted, TLS spoken
    on one side only, a certificate not for the endpoint's host, the keys, a permission. Every
    member answers alike, so it is raised at once, never retried for timeoutSeconds (as the JVM
    reader's PullClient.Refused); ``option``: the option(s) to change, as the line names them."""

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.option = option


def explain(error: BaseException, endpoint: str, options, permission: str = "sub") -> BrokerError | None:
    """What to change when a call to ``endpoint`` failed with ``error`` (a ClientError or a gRPC
    error), in the source's or the sink's options' words: the certificate not verified
    (rootCertificates), a TLS port reached in plaintext (tls), keys refused (accessKey, secretKey), a
    permission missing (``permission`` on the topic: sub to read, pub to write), nothing answering
    (endpoints, timeoutSeconds). None: not such an error."""
    import grpc
    from ..client import ClientError
    from ..protocol.stubs import Code
    if isinstance(error, ClientError):
        if error.code == Code.UNAUTHORIZED:
            return Refused(f"tidemq: UNAUTHORIZED: the broker at {endpoint} refused the keys ({error}): check "
                           f"the options accessKey and secretKey", "accessKey, secretKey")
        if error.code == Code.FORBIDDEN:
            topics = options.get("topics") or options.get("topic") or "TOPIC"
            doing = "reading" if permission == "sub" else "writing to"
            return Refused(f"tidemq: FORBIDDEN: {doing} {topics} needs the permission {permission} on the topic "
                           f"({error}): grant it (tidemq acl grant USER --topic {topics.split(',')[0]} --actions "
                           f"{permission}) or "
                           f"use the keys (options accessKey, secretKey) of a user who has it", "accessKey, secretKey")
        return None
    if not isinstance(error, grpc.RpcError):
        return None
    try:
        code, details = error.code(), (error.details() or "")
    except Exception:  # noqa: BLE001 - not a call's error
        return None
    if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return None
    conn = connection(options)
    tls = bool(conn["tls"] or conn["root_certificates"])
    low = details.lower()
    from ..client.settings import speaks_tls
    if code == grpc.StatusCode.UNAVAILABLE:
        # gRPC says a TLS failure only in its details; whether the port speaks TLS (a handshake that
        # checks nothing) tells a refusal (it answers) from a member that is not there (None)
        if tls and ("hostname verification" in low or "peer name" in low):
            return Refused(f"tidemq: the certificate of the broker at {endpoint} is not for that host ({details}): "
                           f"its subjectAltName must name it, or give an endpoint (option endpoints) it names",
                           "endpoints")
        if tls and ("certificate" in low or "handshake" in low or "ssl" in low):
            speaks = speaks_tls(endpoint)
            if speaks is False:
                return Refused(f"tidemq: the broker at {endpoint} does not speak TLS: drop the options tls and "
                               f"rootCertificates", "tls")
            if speaks:
                return Refused(f"tidemq: the certificate of the broker at {endpoint} could not be verified "
                               f"({details}): give the option rootCertificates, the PEM file of the CA that signed "
                               f"it (readable at the same path where the tasks run)"
                               + (f", not {conn['root_certificates']}" if conn["root_certificates"] else ""),
                               "rootCertificates")
        elif not tls and speaks_tls(endpoint):
            return Refused(f"tidemq: the broker at {endpoint} speaks TLS: set the option tls=true (and "
                           f"rootCertificates, the CA's PEM file)", "tls")
    gone = BrokerError(f"tidemq: no broker answered at {endpoint} ({code.name}: {details}): check the option "
                       f"endpoints (a member reachable from the driver and the executors) or raise timeoutSeconds")
    gone.unreachable = True
    return gone


def retried(e: BaseException, endpoint: str, options, permission: str = "sub") -> BaseException:
    """``e`` again if another try (the next member, or the same one later) may answer: it did not
    answer (``unreachable``) and it is not a refusal in disguise. Raised, in the options' words
    (``explain``), if not: a refusal (the certificate, TLS on one side only, the keys, a permission)
    at once, never retried for timeoutSeconds. The readers' and the sink's (``permission`` pub) one rule."""
    better = explain(e, endpoint, options, permission)
    if not unreachable(e):
        if better is None:
            raise e
        raise better from None
    if isinstance(better, Refused):
        raise better from None
    return e


def unreachable(e: BaseException) -> bool:
    """Whether a call failed because the member did not answer (killed, restarting, an election
    under way): another member may. A refusal (keys, permission, a bad request) is not."""
    import grpc
    from ..client import ClientError
    if isinstance(e, ClientError):
        return e.code >= 50000
    if isinstance(e, grpc.RpcError):
        try:
            return e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        except Exception:  # noqa: BLE001 - not a call's error
            return False
    return False


class BrokerBackend(Backend):
    """Through the broker: ``endpoints`` are members of the cluster (the option ``endpoints``,
    comma-separated); calls go to the first, and move to the next one when a member does not
    answer (``unreachable``), for up to ``timeout_s`` from the first such failure (backing off
    after each round of them). A read resumes at the offset it reached. A refusal (``Refused``: the
    certificate, TLS on one side only, the keys, a permission) is raised at once, never retried."""

    BACKOFF_S_MIN, BACKOFF_S_MAX = 0.1, 2.0

    def __init__(self, endpoint: str | list[str], timeout_s: float = 30.0, options=None, **client_options) -> None:
        """``client_options``: connection(options)'s keywords (signing, TLS); ``options``: the
        source's, for errors in its words (explain)."""
        self.endpoints = [endpoint] if isinstance(endpoint, str) else list(endpoint)
        self.timeout_s = timeout_s
        self.client_options = client_options
        self.options = options if options is not None else {}
        self.member = 0
        self.failovers = 0
        self.consumer = self._consumer()

    def _consumer(self):
        # grpc only where the broker is used; missing, it is the one-line error with the fix
        return load_module("tidemq.client").PullConsumer(self.endpoint, timeout_s=self.timeout_s,
                                                         **self.client_options)

    @property
    def endpoint(self) -> str:
        return self.endpoints[self.member]

    def _explained(self, e: BaseException) -> BaseException:
        better = explain(e, self.endpoint, self.options)
        return e if better is None else better

    def _next_member(self, e: BaseException, since: list, round_failures: list) -> None:
        """After ``e`` (unreachable) from the member now: the next one (raising once the budget is spent)."""
        import time
        now = time.monotonic()
        if not since:
            since.append(now)
        if now - since[0] > self.timeout_s:
            gone = BrokerError(f"tidemq: no member answered for {now - since[0]:.0f} s ({', '.join(self.endpoints)}): "
                               f"check the option endpoints (members reachable from the driver and the executors) "
                               f"or raise timeoutSeconds; last: {self._explained(e)}")
            gone.unreachable = True
            raise gone from None
        round_failures[0] += 1
        if round_failures[0] >= len(self.endpoints):
            round_failures[0] = 0
            time.sleep(min(self.BACKOFF_S_MAX, self.BACKOFF_S_MIN * 2 ** min(6, int(now - since[0]))))
        self.consumer.close()
        self.member = (self.member + 1) % len(self.endpoints)
        self.failovers += 1
        self.consumer = self._consumer()

    def _call(self, fn):
        since: list = []
        rounds = [0]
        while True:
            try:
                return fn(self.consumer)
            except Exception as e:                        # noqa: BLE001 - said in the options' words
                self._next_member(retried(e, self.endpoint, self.options), since, rounds)

    def queue_count(self, topic: str) -> int:
        return self._call(lambda c: c.queue_count(topic))

    def members(self, topic: str, qid: int) -> list[str]:
        """The endpoints of the group holding this queue, its leader's first (the JVM reader's failover).
        A route naming one member only (a follower's answer names just its leader, dead or not, while
        an election is under way) is followed by the ``endpoints`` given (a group's leader ports:
        each forwards to whoever leads)."""
        ms = self._call(lambda c: c.members(topic, qid))
        if len(ms) > 1:
            return ms
        return ms + [e for e in self.endpoints if e not in ms]

    def queue_range(self, topic: str, qid: int) -> tuple[int, int]:
        return self._call(lambda c: (c.query_offset(topic, qid, "BEGINNING"), c.query_offset(topic, qid, "END")))

    def offset_at(self, topic: str, qid: int, timestamp_ms: int) -> int:
        return self._call(lambda c: c.query_offset(topic, qid, "TIMESTAMP", timestamp_ms))

    def read(self, topic, qid, start, end, batch_rows=BATCH_ROWS):
        at = [start]
        since: list = []
        rounds = [0]
        while True:
            try:
                for batch, lost in self._read(topic, qid, at, end, batch_rows):
                    since.clear()
                    yield batch, lost
                return
            except DataLossError:
                raise
            except Exception as e:                        # noqa: BLE001
                self._next_member(retried(e, self.endpoint, self.options), since, rounds)   # and resume at at[0]

    def _read(self, topic, qid, at: list, end, batch_rows):
        """The batches from at[0] (moved on as they are handed out: a retry resumes there)."""
        # the next pull is under way while this one is decoded (and while Spark takes the batch)
        for r in self.consumer.iter_records(topic, qid, at[0], end, max_count=batch_rows, prefetch=READ_PREFETCH):
            if r.found:
                # the broker sends only records whose CRCs it checked, under a frame CRC the client
                # checked (r.checked): decode checks their layout, not their CRCs again
                sizes = np.frombuffer(r.sizes, np.int32)
                batch, bad = decode(np.frombuffer(r.data, np.uint8), positions_of(sizes), sizes, r.checked)
                out = (batch, r.next_offset - at[0] - len(sizes) + bad)
            else:                                         # holes, or cleaned away under us
                out = (_EMPTY, r.next_offset - at[0])
            at[0] = r.next_offset
            yield out
        if at[0] < end:
            n, at[0] = end - at[0], end
            yield _EMPTY, n                               # the queue ends before `end`

    def close(self) -> None:
        self.consumer.close()


def backend_for(options) -> Backend:
    endpoints = options.get("endpoints") or options.get("endpoint")
    path = options.get("path")
    if bool(endpoints) == bool(path):
        raise ValueError("tidemq: give exactly one of the options 'endpoints' (read through a broker) "
                         "and 'path' (read a store's files)")
    if path:
        dirs = tuple(d for d in (options.get("commitlogDirs") or "").replace(":", ",").split(",") if d)
        try:
            return FileBackend(path, dirs)
        except StoreFilesError as e:
            raise ValueError(f"tidemq: {e}") from e
    return BrokerBackend([e.strip() for e in endpoints.split(",") if e.strip()],
                         float(options.get("timeoutSeconds", 30)), options, **connection(options))
