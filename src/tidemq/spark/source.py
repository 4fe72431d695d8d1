"""The ``tidemq`` data source for PySpark 4 (``pyspark.sql.datasource``): batch and stream reads.

    spark.read.format("tidemq").option("endpoints", "127.0.0.1:8081").option("topic", "T").load()
    spark.read.format("tidemq").option("path", "/var/lib/tidemq").option("topic", "T").load()
    spark.readStream.format("tidemq").option("endpoints", ...).option("topic", "T").load()

Options (Kafka connector style): topic / topics, startingOffsets, endingOffsets,
startingTimestamp, endingTimestamp, failOnDataLoss (default true), maxOffsetsPerTrigger
(streams), maxRecordsPerPartition (default 1,000,000), commitlogDirs (file mode, when
the commit log lives outside <path>/commitlog), timeoutSeconds (broker mode), archivePath
(tiered reads: tidemq.spark.tiered). Writing:
see tidemq.spark.sink. The DataSource Spark pickles is tidemq.spark.entry's, which calls
into this module where it runs (so it must stay importable without a SparkSession).
"""

from __future__ import annotations

import logging

from pyspark.sql.datasource import (CaseInsensitiveDict, DataSourceReader, DataSourceStreamReader,
                                    InputPartition)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from . import plan, tiered
from .backend import BATCH_ROWS, DataLossError, backend_for

log = logging.getLogger("tidemq.spark")

MAX_RECORDS_PER_PARTITION = 1_000_000


def _partition(r: plan.Range, archive: tiered.Archive | None) -> InputPartition:
    """Pyspark's own class, its value plain data: it unpickles on any worker (see tidemq.spark.entry).
    With tiering every range carries the archive as the driver found it (dest, runs): a live range
    whose head the cleaner deleted since planning reads that head from the archive."""
    where = (archive.dest, archive.runs, archive.gaps_file) if archive else None
    return InputPartition((r.topic, r.queue_id, r.start, r.end, where, r.archived))


def _tiered_batches(backend, archive: tiered.Archive, r: plan.Range):
    """A live range read with the archive behind it: offsets below the queue's minimum now (cleaned
    since planning) from the archive, the rest from the log."""
    if r.archived:
        cut = r.end
    else:
        cut = min(r.end, max(r.start, backend.queue_range(r.topic, r.queue_id)[0]))
    if cut > r.start:
        yield from tiered.read(archive, r.topic, r.queue_id, r.start, cut, BATCH_ROWS)
    if cut < r.end:
        yield from backend.read(r.topic, r.queue_id, cut, r.end, BATCH_ROWS)


def read_partition(options, part: InputPartition):
    """The partition's records as Arrow batches (runs on an executor)."""
    options = CaseInsensitiveDict(options)
    topic, qid, start, end, where, archived = part.value
    r = plan.Range(topic, qid, start, end, archived)
    fail = plan.flag(options, "failOnDataLoss", True)
    backend = None if archived else backend_for(options)
    if where is not None:
        archive = tiered.Archive(*where)
        batches = _tiered_batches(backend, archive, r)
        why = (f"in neither the store nor the archive at {archive.dest} (deleted before they were archived"
               + (f"? see {archive.gaps_file}" if archive.gaps_file else "?") + ")")
    else:
        batches = backend.read(r.topic, r.queue_id, r.start, r.end, BATCH_ROWS)
        why = "not in the store (cleaned away or unreadable)"
    skipped = 0
    try:
        for batch, lost in batches:
            if lost:
                msg = f"{lost} offsets of {r.topic} queue {r.queue_id} in [{r.start}, {r.end}) are {why}"
                if fail:
                    raise DataLossError(msg + ". Set failOnDataLoss=false to skip them.")
                skipped += lost
            if batch.num_rows:
                yield batch
    finally:
        if backend is not None:
            backend.close()
    if skipped:
        log.warning("tidemq: skipped %d offsets of %s queue %d in [%d, %d) (failOnDataLoss=false)",
                    skipped, r.topic, r.queue_id, r.start, r.end)


class Planner:
    """Option parsing shared by the batch and stream readers (runs on the driver)."""

    def __init__(self, options) -> None:
        self.options = CaseInsensitiveDict(options)      # Spark lower-cases option names
        self.topics = plan.topics_of(self.options)
        self.fail_on_data_loss = plan.flag(self.options, "failOnDataLoss", True)
        self.max_per_partition = plan.int_option(self.options, "maxRecordsPerPartition", MAX_RECORDS_PER_PARTITION)
        if self.max_per_partition < 1:
            raise ValueError("tidemq: maxRecordsPerPartition must be at least 1")
        self.archive = tiered.archive_of(self.options)

    def offsets(self, spec_name: str, ts_name: str, default: int, past_end_is_error: bool = False) -> plan.Offsets:
        backend = backend_for(self.options)
        try:
            return plan.resolve(backend, self.topics, self.options.get(spec_name),
                                plan.int_option(self.options, ts_name, None), default,
                                spec_name if past_end_is_error else None, self.archive is not None)
        finally:
            backend.close()

    def latest(self) -> plan.Offsets:
        backend = backend_for(self.options)
        try:
            return plan.resolve(backend, self.topics, "latest", None, plan.LATEST)
        finally:
            backend.close()

    def ranges(self, start: plan.Offsets, end: plan.Offsets) -> tuple[list[plan.Range], tiered.Archive | None]:
        """The ranges between two offset sets, and the archive they are read with (None: no tiering)."""
        backend = backend_for(self.options)
        try:
            archive = tiered.archive_of(self.options) if self.archive else None   # runs archived since
            rs = plan.ranges(backend, start, end, self.fail_on_data_loss, self.max_per_partition,
                             archive is not None)
        finally:
            backend.close()
        return rs, archive

    def partitions(self, start: plan.Offsets, end: plan.Offsets) -> list[InputPartition]:
        rs, archive = self.ranges(start, end)
        return [_partition(r, archive) for r in rs]

    def batch_bounds(self) -> tuple[plan.Offsets, plan.Offsets]:
        """A batch read's start and end offsets (startingOffsets / endingOffsets or the timestamps)."""
        # as Spark's Kafka source: a batch cannot start at "latest" nor end at "earliest"
        if (self.options.get("startingOffsets") or "").strip() == "latest":
            raise ValueError("tidemq: startingOffsets='latest' is for streams; a batch read starts at "
                             "'earliest', a JSON of offsets or startingTimestamp")
        if (self.options.get("endingOffsets") or "").strip() == "earliest":
            raise ValueError("tidemq: endingOffsets='earliest' reads nothing; use 'latest', a JSON of "
                             "offsets or endingTimestamp")
        start = self.offsets("startingOffsets", "startingTimestamp", plan.EARLIEST)
        end = self.offsets("endingOffsets", "endingTimestamp", plan.LATEST, past_end_is_error=True)
        return start, end

    def stream_latest(self, start: dict, max_rows: int | None, target: plan.Offsets | None) -> plan.Offsets:
        """A micro-batch's end: the queues' ends, capped at the availableNow ``target``, at most
        ``max_rows`` offsets past ``start`` (maxOffsetsPerTrigger), never behind ``start``."""
        latest = self.latest()
        if target is not None:
            latest = plan.cap(latest, target)
        if max_rows:
            latest = plan.limit_rows(start, latest, max_rows)
        # never behind start (a queue's max cannot shrink, but a JSON start may point past it)
        return {t: {q: max(e, start.get(t, {}).get(q, 0)) for q, e in qs.items()} for t, qs in latest.items()}


def _refuse_jvm(options) -> None:
    """The Python reader holds the name ``tidemq`` only where the JVM one is not loaded: asked for
    the JVM one (``reader=jvm``), it says so instead of reading."""
    if (options.get("reader") or "").strip().lower() == "jvm":
        raise ValueError("tidemq: reader=jvm, but the JVM reader is not loaded in this session (see "
                         "tidemq.spark.register's log line: a JDK's javac is needed on the driver); leave "
                         "reader out to read with the Python reader")


class TidemqReader(DataSourceReader):
    def __init__(self, options) -> None:
        p = Planner(options)
        self.options = p.options
        self._planner = p

    def partitions(self):
        p = self._planner
        _refuse_jvm(p.options)
        parts = p.partitions(*p.batch_bounds())
        return parts or [_partition(plan.Range(p.topics[0], 0, 0, 0), None)]

    def read(self, partition):
        yield from read_partition(self.options, partition)


class TidemqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options) -> None:
        p = Planner(options)
        self.options = p.options
        self._planner = p
        self._target: plan.Offsets | None = None
        self._max_rows = plan.int_option(p.options, "maxOffsetsPerTrigger", None)

    def initialOffset(self) -> dict:
        _refuse_jvm(self.options)
        return self._planner.offsets("startingOffsets", "startingTimestamp", plan.LATEST)

    def _latest(self) -> plan.Offsets:
        return self._planner.latest()

    def getDefaultReadLimit(self):
        return ReadMaxRows(self._max_rows) if self._max_rows else ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        return self._planner.stream_latest(start, limit.max_rows if isinstance(limit, ReadMaxRows) else None,
                                           self._target)

    def reportLatestOffset(self):
        return self._latest()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def partitions(self, start: dict, end: dict):
        return self._planner.partitions(start, end)

    def read(self, partition):
        yield from read_partition(self.options, partition)

    def commit(self, end: dict) -> None:
        pass                      # the stream's progress is Spark's checkpoint; nothing to release here
