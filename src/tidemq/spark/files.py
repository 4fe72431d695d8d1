"""Reading a store's files directly, read-only, no broker: what the Spark source's file mode uses.

Only what is durable on disk is read: consume-queue units (numpy straight from the
files) point at records in the commit-log segments, which are mapped read-only in
whichever commit-log directory holds them. Nothing is written, nothing is locked:
a broker may be running on the same store (what it has not yet dispatched is simply
not seen), and segments it deletes meanwhile read as a data-loss gap.
"""

from __future__ import annotations

import bisect
import json
import mmap
import os

import numpy as np

from ..store.consume_queue import UNIT_DTYPE, UNIT_SIZE
from ..store.mapped_file import parse_segment_name
from ..store.topics import TOPICS_FILE



class StoreFilesError(RuntimeError):
    """A store directory that cannot be read as one (missing, unknown topic, bad files)."""


def _listing(directory: str) -> list[tuple[int, str]]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        start = parse_segment_name(name)
        if start is not None:
            out.append((start, os.path.join(directory, name)))
    return sorted(out)


class StoreFiles:
    """One store root (plus its commit-log directories when they are elsewhere)."""

    def __init__(self, root: str, commitlog_dirs: tuple[str, ...] = ()) -> None:
        if not os.path.isdir(root):
            raise StoreFilesError(f"no store at {root!r}")
        self.root = root
        self.commitlog_dirs = tuple(commitlog_dirs) or (os.path.join(root, "commitlog"),)
        self._maps: dict[str, tuple[mmap.mmap, np.ndarray]] = {}
        self.refresh()

    def refresh(self) -> None:
        """Re-read the segment listing (a running broker adds and deletes segments)."""
        segs: list[tuple[int, str]] = []
        for d in self.commitlog_dirs:
            segs += _listing(d)
        segs.sort()
        self.segment_starts = [s for s, _ in segs]
        self.segment_paths = [p for _, p in segs]

    # Topics and queues ------------------------------------------------------------
    def topics(self) -> dict[str, int]:
        path = os.path.join(self.root, "config", TOPICS_FILE)
        try:
            with open(path, "rb") as f:
                doc = json.loads(f.read())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise StoreFilesError(f"{path} is unreadable: {e}") from e
        topics = {name: int(v["queue_count"]) for name, v in doc.get("topics", {}).items()}
        cq = os.path.join(self.root, "consumequeue")      # queues on disk count even if topics.json lags
        for name in (os.listdir(cq) if os.path.isdir(cq) else ()):
            qids = [int(q) for q in os.listdir(os.path.join(cq, name)) if q.isdigit()]
            if qids:
                topics[name] = max(topics.get(name, 0), max(qids) + 1)
        return topics

    def queue_count(self, topic: str) -> int:
        n = self.topics().get(topic)
        if n is None:
            raise StoreFilesError(f"unknown topic {topic!r} in the store at {self.root}")
        return n

    def _cq_files(self, topic: str, qid: int) -> list[tuple[int, str]]:
        return _listing(os.path.join(self.root, "consumequeue", topic, str(qid)))

    def queue_range(self, topic: str, qid: int) -> tuple[int, int]:
        """(min, max) queue offsets: min the first unit whose record is still in the log."""
        files = self._cq_files(topic, qid)
        if not files:
            return 0, 0
        last_start, last_path = files[-1]
        mx = (last_start + os.path.getsize(last_path)) // UNIT_SIZE
        mn = files[0][0] // UNIT_SIZE
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

    def first_unit(self, topic: str, qid: int) -> int | None:
        """The queue offset of the first unit its files still hold (None: no file)."""
        files = self._cq_files(topic, qid)
        return files[0][0] // UNIT_SIZE if files else None

    def log_end(self) -> int:
        """One past the last byte the listed segments can hold."""
        if not self.segment_paths:
            return 0
        try:
            return self.segment_starts[-1] + os.path.getsize(self.segment_paths[-1])
        except FileNotFoundError:
            return self.segment_starts[-1]

    def units(self, topic: str, qid: int, start: int, end: int) -> np.ndarray:
        """Consume-queue units [start, end) (fewer if the files end first)."""
        files = self._cq_files(topic, qid)
        starts = [s // UNIT_SIZE for s, _ in files]
        parts = []
        at = start
        i = bisect.bisect_right(starts, at) - 1
        while at < end and 0 <= i < len(files):
            f0 = starts[i]
            with open(files[i][1], "rb") as f:
                f.seek((at - f0) * UNIT_SIZE)
                raw = f.read((end - at) * UNIT_SIZE)
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
        path = self.segment_paths[i]
        got = self._maps.get(path)
        if got is None:
            with open(path, "rb") as f:
                m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            got = self._maps[path] = (m, np.frombuffer(m, np.uint8))
        return got[1]

    def locate(self, offsets: np.ndarray) -> np.ndarray:
        """Index of the segment holding each commit-log offset (-1: before the first one)."""
        return np.searchsorted(np.asarray(self.segment_starts, np.int64), offsets, side="right") - 1

    def close(self) -> None:
        maps, self._maps = self._maps, {}
        for m, arr in maps.values():
            del arr
            try:
                m.close()
            except BufferError:
                pass            # an Arrow array still points into it: unmapped when that goes
