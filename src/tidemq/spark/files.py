"""Reading a store's files directly, read-only, no broker: what the Spark source's file mode uses.

Consume-queue units (numpy straight from the files) point at records in the commit-log
segments, which are mapped read-only in whichever commit-log directory holds them. Nothing
is written, nothing is locked: a broker may be running on the same store (what it has not
yet dispatched is simply not seen), and segments it deletes meanwhile read as a data-loss
gap. What a running broker's files hold is read as it is, including what that broker does
not serve yet because a fault can take it back (its readable end: not fsynced, past a failed
fsync's cut; docs/spark.md): a live store is read through the broker. A member of a SYNC group
keeps a lower bound of its high watermark on disk (config/served_end.json,
broker/replication/served_end.py): its queues end, here, at the last record below it, so
nothing a failover can take back is read.
"""

from __future__ import annotations

import bisect

import numpy as np

from ..io import FileIO, OsFileIO, read_whole
from .. import checked, layout
from ..record import codec
from ..store.consume_queue import UNIT_DTYPE, UNIT_SIZE

SCAN_BYTES_MAX = 256 << 20      # log bytes walked at most for one damaged unit (store/unit_repair.py's)


class StoreFilesError(RuntimeError):
    """A store directory that cannot be read as one (missing, unknown topic, bad files)."""


class IncompleteStoreError(StoreFilesError):
    """Segments of the store's commit log are not in the directories read (a commit-log directory left
    out of the option commitlogDirs, or moved): ``why`` "gap" (the segments found are not contiguous)
    or "checkpoint" (the store's checkpoint says the log is durable past the segments found)."""

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


def _remembered_dirs(root: str) -> tuple[str, ...]:
    """The commit-log directories the store last ran with (store/remembered.py), read-only ones too."""
    from ..store import remembered
    r = remembered.recall(root)
    return tuple(r.get("commitlog_dirs") or ()) + tuple(r.get("readonly_commitlog_dirs") or ())


class StoreFiles:
    """One store root (plus its commit-log directories when they are elsewhere), read through
    the FileIO seam (``fio``: the real file system unless a test gives another) and laid out
    as tidemq/layout.py says."""

    def __init__(self, root: str, commitlog_dirs: tuple[str, ...] = (), fio: FileIO | None = None) -> None:
        self.fio: FileIO = fio or OsFileIO()
        if not self.fio.is_dir(root):
            raise StoreFilesError(f"no store at {root!r}")
        self.root = root
        self.commitlog_dirs = tuple(commitlog_dirs) or _remembered_dirs(root) or (layout.commitlog_dir(root),)
        self._maps: dict[str, tuple[object, np.ndarray]] = {}
        self.refresh()

    def refresh(self) -> None:
        """Re-read the segment listing (a running broker adds and deletes segments)."""
        segs: list[tuple[int, str]] = []
        for d in self.commitlog_dirs:
            segs += layout.list_segments(self.fio, d)
        segs.sort()
        self.segment_starts = [s for s, _ in segs]
        self.segment_paths = [p for _, p in segs]

    # Topics and queues ------------------------------------------------------------
    def topics(self) -> dict[str, int]:
        fio = self.fio
        path = layout.topics_path(self.root)
        try:
            doc = checked.decode(read_whole(fio, path)) if fio.exists(path) else {}
        except (OSError, ValueError) as e:
            raise StoreFilesError(f"{path} is unreadable: {e}") from e
        topics = {name: int(v["queue_count"]) for name, v in doc.get("topics", {}).items()}
        cq = layout.consumequeue_dir(self.root)      # queues on disk count even if topics.json lags
        for name in (fio.listdir(cq) if fio.is_dir(cq) else ()):
            tdir = layout.topic_dir(cq, name)
            qids = [int(q) for q in (fio.listdir(tdir) if fio.is_dir(tdir) else ()) if q.isdigit()]
            if qids:
                topics[name] = max(topics.get(name, 0), max(qids) + 1)
        return topics

    def queue_count(self, topic: str) -> int:
        n = self.topics().get(topic)
        if n is None:
            raise StoreFilesError(f"unknown topic {topic!r} in the store at {self.root}")
        return n

    def _cq_files(self, topic: str, qid: int) -> list[tuple[int, str]]:
        return layout.list_segments(self.fio, layout.queue_dir(layout.consumequeue_dir(self.root), topic, qid))

    def served_end(self) -> int | None:
        """A SYNC group member's served end (config/served_end.json: every record ending at or before
        it is below the group's high watermark); None: the store serves its whole log (no file). Its
        previous version when it is damaged (a lower bound too); StoreFilesError when neither is intact."""
        path = layout.served_end_path(self.root)
        problems = []
        for p in (path, path + ".bak"):
            if not self.fio.exists(p):
                continue
            try:
                doc = checked.decode(read_whole(self.fio, p))
                if isinstance(doc, dict) and type(doc.get("end")) is int and doc["end"] >= 0:
                    return doc["end"]
                problems.append(f"{p}: not a served end")
            except (OSError, ValueError) as e:
                problems.append(f"{p}: {e}")
        if problems:
            raise StoreFilesError(f"the store at {self.root} is a replicated member's whose served end is unreadable "
                                  f"({'; '.join(problems)}): read it through the broker")
        return None

    def queue_range(self, topic: str, qid: int) -> tuple[int, int]:
        """(min, max) queue offsets: min the first unit whose record is still in the log; max past the
        last unit, or (a SYNC group member's store) the first whose record ends past the served end."""
        files = self._cq_files(topic, qid)
        if not files:
            return 0, 0
        last_start, last_path = files[-1]
        mx = (last_start + self.fio.file_size(last_path)) // UNIT_SIZE
        mn = files[0][0] // UNIT_SIZE
        served = self.served_end()
        if served is not None:
            mx = self._served_units(topic, qid, mn, mx, served)
        log_min = self.segment_starts[0] if self.segment_starts else None
        while mn < mx:                        # skip units whose records were cleaned away
            units = self.units(topic, qid, mn, min(mx, mn + 4096))
            alive = np.flatnonzero((units["size"] > 0) & (log_min is not None) & (units["offset"] >= (log_min or 0)))
            if len(alive):
                return mn + int(alive[0]), mx
            if len(units) == 0:
                break
            mn += len(units)
        return mx, mx

    def _served_units(self, topic: str, qid: int, lo: int, hi: int, served: int) -> int:
        """Past the last queue offset in [lo, hi) whose unit stands for an intact record of the queue
        ending at or before ``served`` (``lo``: none). The units are walked back from ``hi`` (the tail
        past the served end is what the group has not confirmed yet: short): a queue's records lie in
        the log in its order, so every intact record before the one found ends before it. A hole or a
        damaged unit is never taken for it (the record it points at is checked: CRCs, topic, queue,
        queue offset), so none can move the end past a record that is not served."""
        at = hi
        while at > lo:
            start = max(lo, at - 4096)
            u = self.units(topic, qid, start, at)
            for k in range(len(u) - 1, -1, -1):
                off, size = int(u["offset"][k]), int(u["size"][k])
                if size > 0 and off + size <= served and self._stands_for(topic, qid, start + k, off, size):
                    return start + k + 1
            at = start
        return lo

    def _stands_for(self, topic: str, qid: int, q: int, offset: int, size: int) -> bool:
        """Is the record at commit-log ``offset`` (``size`` bytes) intact and (topic, qid, q)'s?"""
        i = int(self.locate(np.asarray([offset], np.int64))[0])
        if i < 0:
            return False
        try:
            self.segment(i)
        except FileNotFoundError:
            return False
        buf = self._maps[self.segment_paths[i]][0]
        pos = offset - self.segment_starts[i]
        if pos + size > len(buf) or codec.check_record(buf, pos, pos + size)[0] != codec.REC_OK:
            return False
        r_qid, r_qoff, _ts, r_topic, _props = codec.decode_meta(buf, pos)
        return r_qid == qid and r_qoff == q and r_topic == topic

    def first_unit(self, topic: str, qid: int) -> int | None:
        """The queue offset of the first unit its files still hold (None: no file)."""
        files = self._cq_files(topic, qid)
        return files[0][0] // UNIT_SIZE if files else None

    def log_end(self) -> int:
        """One past the last byte the listed segments can hold."""
        if not self.segment_paths:
            return 0
        try:
            return self.segment_starts[-1] + self.fio.file_size(self.segment_paths[-1])
        except FileNotFoundError:
            return self.segment_starts[-1]

    def missing_segments(self) -> list[tuple[int, int, str, str]]:
        """Stretches of the log the segments found show are not in the directories read, as (first
        offset, end, why, what): a gap between two segments found ("gap"), or past the last one when
        the store's checkpoint says the log is durable past it ("checkpoint"; its end unbounded). A unit
        pointing into one is an incomplete store (IncompleteStoreError); one pointing past the last
        segment with nothing saying it is missing is a damaged unit."""
        from ..store.checkpoint import read_state
        try:                                    # (read before the listing: a running broker rolls and
            cp = read_state(self.fio, layout.checkpoint_path(self.root))   # checkpoints meanwhile)
        except OSError:
            cp = None
        self.refresh()
        out = []
        for i in range(len(self.segment_paths) - 1):
            try:
                end = self.segment_starts[i] + self.fio.file_size(self.segment_paths[i])
            except FileNotFoundError:           # deleted since the listing (cleaned away): no evidence
                continue
            if end < self.segment_starts[i + 1]:
                out.append((end, self.segment_starts[i + 1], "gap",
                            f"no segment found holds commit-log offsets [{end}, {self.segment_starts[i + 1]})"))
        log_end = self.log_end()
        if cp is not None and cp.physic_offset > log_end:
            out.append((log_end, 1 << 62, "checkpoint", f"the store's checkpoint says the log is durable up to "
                                                        f"offset {cp.physic_offset}, the segments found end at {log_end}"))
        return out

    def units(self, topic: str, qid: int, start: int, end: int) -> np.ndarray:
        """Consume-queue units [start, end) (fewer if the files end first)."""
        files = self._cq_files(topic, qid)
        starts = [s // UNIT_SIZE for s, _ in files]
        parts = []
        at = start
        i = bisect.bisect_right(starts, at) - 1
        while at < end and 0 <= i < len(files):
            f0 = starts[i]
            h = self.fio.open(files[i][1], readonly=True)
            try:
                raw = self.fio.pread(h, (end - at) * UNIT_SIZE, (at - f0) * UNIT_SIZE)
            finally:
                self.fio.close(h)
            got = len(raw) // UNIT_SIZE
            if got == 0:
                break
            parts.append(np.frombuffer(raw[:got * UNIT_SIZE], UNIT_DTYPE))
            at += got
            if i + 1 < len(files) and at >= starts[i + 1]:
                i += 1
            elif i + 1 < len(files):
                break                        # a gap between files (cannot happen: files are contiguous)
            else:
                break
        if not parts:
            return np.zeros(0, UNIT_DTYPE)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    # Records ----------------------------------------------------------------------
    def segment(self, i: int) -> np.ndarray:
        """Segment ``i`` mapped read-only, as bytes (FileNotFoundError: deleted since the listing)."""
        path = self.segment_paths[i]
        got = self._maps.get(path)
        if got is None:
            fio = self.fio
            h = fio.open(path, readonly=True)
            try:
                m = fio.map(h, fio.size_of(h), readonly=True)
            finally:
                fio.close(h)          # the mapping keeps the file's pages
            got = self._maps[path] = (m, np.frombuffer(m, np.uint8))
        return got[1]

    def deleted_topics(self) -> dict[str, int]:
        """Deleted topics and where their records end in the log (topics.json's "deleted": a record of
        the name before that offset is of the topic deleted, not of the one made again)."""
        path = layout.topics_path(self.root)
        try:
            doc = checked.decode(read_whole(self.fio, path)) if self.fio.exists(path) else {}
            return {str(k): int(v) for k, v in doc.get("deleted", {}).items()}
        except (OSError, ValueError, TypeError, AttributeError):
            return {}

    def find_record(self, topic: str, qid: int, q: int, start: int, dead_before: int = -1) -> tuple[int, int] | None:
        """A damaged consume-queue unit's record found again in the log, as the store's read path
        finds it (store/unit_repair.py; the JVM reader's FileRangeReader.find the same): the segments
        walked from commit-log offset ``start`` (where the last record of the queue read before it
        ends: a record boundary; the log's first offset when there is none) for the intact record of
        (``topic``, ``qid``, queue offset ``q``). The walk stops at a record of the queue past ``q``
        (a queue's records lie in the log in queue-offset order), at the end of what was written, or
        after SCAN_BYTES_MAX; a record failing its CRCs is passed over by its size, one before
        ``dead_before`` is of a deleted topic of that name (deleted_topics). (commit-log offset, size),
        or None: not in the log (a hole, damaged too, or cleaned away)."""
        name = topic.encode()
        walked = 0
        i = int(self.locate(np.asarray([start], np.int64))[0])
        if i < 0:
            i, start = 0, self.segment_starts[0] if self.segment_starts else 0
        pos = start - self.segment_starts[i] if self.segment_starts else 0
        while i < len(self.segment_paths):
            try:
                self.segment(i)
            except FileNotFoundError:             # deleted since the listing
                i, pos = i + 1, 0
                continue
            buf = self._maps[self.segment_paths[i]][0]
            limit = len(buf)
            while pos + 8 <= limit:
                size, magic = codec.SIZE_MAGIC.unpack_from(buf, pos)
                if magic == codec.BLANK_MAGIC:
                    break                         # the segment's end: the next one
                if magic != codec.MAGIC or size < codec.FIXED_OVERHEAD or pos + size > limit:
                    return None                   # the end of what was written
                walked += size
                if walked > SCAN_BYTES_MAX:
                    return None
                if codec.check_record(buf, pos, pos + size)[0] == codec.REC_OK:
                    r_qid, r_qoff, _ts, r_topic, _props = codec.decode_meta(buf, pos)
                    if r_qid == qid and r_topic.encode() == name and self.segment_starts[i] + pos >= dead_before:
                        if r_qoff == q:
                            return self.segment_starts[i] + pos, size
                        if r_qoff > q:
                            return None
                pos += size
            i, pos = i + 1, 0
        return None

    def locate(self, offsets: np.ndarray) -> np.ndarray:
        """Index of the segment holding each commit-log offset (-1: before the first one)."""
        return np.searchsorted(np.asarray(self.segment_starts, np.int64), offsets, side="right") - 1

    def close(self) -> None:
        maps, self._maps = self._maps, {}
        for m, arr in maps.values():
            del arr
            try:
                self.fio.unmap(m)
            except BufferError:
                pass            # an Arrow array still points into it: unmapped when that goes
