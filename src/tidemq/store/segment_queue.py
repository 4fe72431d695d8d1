"""The ordered commit-log segments, spread over one or more directories.

Segments are named by their first byte offset (20 digits) and all have the same
size, so the segment of an offset is found by arithmetic. On load, every
directory is listed; two directories holding the same name, or a gap between
consecutive segments, refuse the start with a clear error (data would be lost
or read twice otherwise).

Placement: a new segment goes to the writable directory with the most free
space (not round-robin), so disks of different sizes fill evenly. The segment
made ahead of need is created by a background thread in the directory that
*its own* placement decision picks, under its own name: it can never collide
with a segment created elsewhere under the same name.
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import threading
from typing import Callable, Sequence

from ..io import FileIO
from ..layout import list_segments, segment_name
from .mapped_file import MappedFile
from .segment_state import SegmentState
from .types import StoreError

log = logging.getLogger("tidemq.store")


class SegmentQueue:
    def __init__(self, fio: FileIO, dirs: Sequence[str], segment_size: int,
                 readonly_dirs: Sequence[str] = (), preallocate: bool = True,
                 placement: Callable[[], list[str]] | None = None,
                 on_dir_error: Callable[[str, OSError], None] | None = None,
                 on_dir_ok: Callable[[str], None] | None = None) -> None:
        if not dirs:
            raise StoreError("no commit-log directory configured")
        self.fio = fio
        self.dirs = list(dirs)
        self.readonly_dirs = list(readonly_dirs)
        self.segment_size = segment_size
        self.preallocate = preallocate
        self._placement = placement or (lambda: list(self.dirs))
        self._on_dir_error = on_dir_error or (lambda d, e: None)
        self._on_dir_ok = on_dir_ok or (lambda d: None)
        self.segments: list[MappedFile] = []
        self._starts: list[int] = []
        self._lock = threading.RLock()
        self._create_lock = threading.Lock()      # segment creation: the writer and the pre-allocator
        self._next: MappedFile | None = None            # made ahead of need
        self._alloc_cv = threading.Condition()
        self._alloc_want: int | None = None
        self._alloc_thread: threading.Thread | None = None
        self._stopping = False
        self.last_alloc_error: str | None = None
        # told of every change of where the log ends other than appends: on_cut(end) after a truncate
        # or clear (0), on_added(start) when a segment joins the log (the commit log's seals follow)
        self.on_cut: Callable[[int], None] = lambda end: None
        self.on_added: Callable[[int], None] = lambda start: None

    # Loading ------------------------------------------------------------------
    def load(self) -> None:
        found: dict[int, str] = {}
        for d in self.dirs:
            try:
                self.fio.makedirs(d)
            except OSError as e:
                self._on_dir_error(d, e)
        for d in self.dirs + self.readonly_dirs:
            if not self.fio.is_dir(d):
                continue
            for start, path in list_segments(self.fio, d):
                if start in found:
                    raise StoreError(f"segment {segment_name(start)} exists in two directories ({found[start]} and {path}); "
                                     f"remove the stale copy before starting")
                found[start] = path
        starts = sorted(found)
        for a, b in zip(starts, starts[1:]):
            if b - a != self.segment_size:
                raise StoreError(f"commit log has a hole: {segment_name(a)} is followed by {segment_name(b)} "
                                 f"(segment size {self.segment_size}); a directory may be missing")
        for s in starts:
            if s % self.segment_size:
                raise StoreError(f"segment {found[s]} does not start at a multiple of the segment size "
                                 f"{self.segment_size}: segment_size_bytes differs from the one the log was written with")
            path = found[s]
            size = self.fio.file_size(path)
            if size > self.segment_size:
                raise StoreError(f"segment {path} is {size} bytes, larger than segment_size_bytes={self.segment_size}")
            ro = {os.path.normpath(d) for d in self.readonly_dirs}
            mf = MappedFile.open(self.fio, path, s, self.segment_size,
                                 readonly=os.path.normpath(os.path.dirname(path)) in ro)
            mf.last_store_timestamp_ms = self.fio.mtime_ms(path)
            self.segments.append(mf)
            self._starts.append(s)

    # Lookup -------------------------------------------------------------------
    @property
    def first(self) -> MappedFile | None:
        return self.segments[0] if self.segments else None

    @property
    def last(self) -> MappedFile | None:
        return self.segments[-1] if self.segments else None

    @property
    def min_offset(self) -> int:
        """The log's first offset in service: the start of its first segment not DELETING (a head
        segment the cleaner took out of service waits in the list for its readers' release, its name
        already gone and no read able to hold it: what every view, the queues, the cleaner and a
        follower's start see as the log's beginning). The end of the log when every one is."""
        segs = self.segments
        try:
            head = segs[0]
        except IndexError:
            return 0
        if head.state is not SegmentState.DELETING:
            return head.start_offset                      # (nearly always: a read's path asks this)
        for mf in list(segs):
            if mf.state is not SegmentState.DELETING:
                return mf.start_offset
        return self.max_offset

    @property
    def max_offset(self) -> int:
        """End of the complete records (the next append goes here)."""
        segs = self.segments
        return segs[-1].start_offset + segs[-1].wrote_pos if segs else 0

    def find(self, offset: int) -> MappedFile | None:
        segs = self.segments
        if not segs:
            return None
        i = (offset - segs[0].start_offset) // self.segment_size
        if 0 <= i < len(segs):
            mf = segs[i]
            if mf.start_offset <= offset < mf.end_offset:
                return mf
        with self._lock:  # the list changed under us (head deleted): search it properly
            i = bisect.bisect_right(self._starts, offset) - 1
            if 0 <= i < len(self.segments) and offset < self.segments[i].end_offset:
                return self.segments[i]
        return None

    def __len__(self) -> int:
        return len(self.segments)

    def tail_segment(self, offset: int) -> MappedFile | None:
        """The active (last) segment or the pre-made next one, if either holds ``offset`` (the
        warmer's view of the log's end; no lock: a segment it gets may be deleted meanwhile,
        which hold() tells)."""
        segs = self.segments
        last = segs[-1] if segs else None
        if last is not None and last.start_offset <= offset < last.end_offset:
            return last
        nxt = self._next
        if nxt is not None and nxt.start_offset <= offset < nxt.end_offset:
            return nxt
        return None

    # Growth -------------------------------------------------------------------
    def pick_dir(self, exclude: set[str] = frozenset()) -> str:
        """The allowed directory (see DiskMonitor.placement_candidates) with the most free space."""
        best, best_free = None, -1
        for d in self._placement():
            if d in exclude:
                continue
            try:
                free = self.fio.disk_usage(d).free_bytes
            except OSError as e:
                self._on_dir_error(d, e)
                continue
            if free > best_free:
                best, best_free = d, free
        if best is None:
            raise OSError(errno.ENOSPC, "no commit-log directory can take a new segment")
        return best

    def _create(self, start_offset: int, headroom_segments: int = 1) -> MappedFile:
        """Create a segment in the best directory; a directory that fails is reported and the
        next one tried. The space is checked first: ENOSPC never happens halfway through a record."""
        tried: set[str] = set()
        last_error: OSError | None = None
        while True:
            try:
                directory = self.pick_dir(tried)
            except OSError:
                raise last_error or OSError(errno.ENOSPC, "no commit-log directory can take a new segment")
            tried.add(directory)
            try:
                free = self.fio.disk_usage(directory).free_bytes
                if free < headroom_segments * self.segment_size:
                    last_error = OSError(errno.ENOSPC, f"no room for a {self.segment_size}-byte segment in {directory} "
                                                       f"({free} bytes free)")
                    continue
                mf = MappedFile.create(self.fio, directory, start_offset, self.segment_size)
                self._on_dir_ok(directory)
                return mf
            except OSError as e:
                last_error = e
                if e.errno != errno.ENOSPC:
                    self._on_dir_error(directory, e)

    def new_segment(self, start_offset: int) -> MappedFile:
        """Append the segment starting at ``start_offset`` (uses the pre-made one when it matches)."""
        with self._create_lock:
            with self._lock:
                if self.segments and start_offset != self.segments[-1].end_offset:
                    raise StoreError(f"new segment at {start_offset} does not follow {self.segments[-1].path}")
            mf, self._next = self._next, None
            if mf is not None and (mf.start_offset != start_offset or mf.directory not in self._placement()):
                try:
                    mf.destroy(0, 0)      # never part of the log: safe to delete
                except OSError:
                    pass
                mf = None
            if mf is None:
                mf = self._create(start_offset)
            with self._lock:
                prev = self.segments[-1] if self.segments else None
                if prev is not None and prev.state in (SegmentState.WRITABLE, SegmentState.LOADED):
                    prev.set_state(SegmentState.SEALED)
                mf.set_state(SegmentState.WRITABLE)
                self.segments.append(mf)
                self._starts.append(start_offset)
        self.on_added(start_offset)
        self._request_premade(start_offset + self.segment_size)
        return mf

    def _request_premade(self, start_offset: int) -> None:
        if not self.preallocate:
            return
        with self._alloc_cv:
            if self._stopping:
                return
            self._alloc_want = start_offset
            if self._alloc_thread is None:
                self._alloc_thread = threading.Thread(target=self._alloc_loop, name="tidemq-segment-alloc",
                                                      daemon=True)
                self._alloc_thread.start()
            self._alloc_cv.notify_all()

    def _alloc_loop(self) -> None:
        while True:
            with self._alloc_cv:
                while not self._stopping and self._alloc_want is None:
                    self._alloc_cv.wait()
                if self._stopping:
                    return
                want, self._alloc_want = self._alloc_want, None
            with self._create_lock:
                # the writer may have made it already, or moved on
                last = self.segments[-1] if self.segments else None
                if (last is not None and last.end_offset != want) or \
                        (self._next is not None and self._next.start_offset == want):
                    continue
                try:
                    # only with room for two: when space is tight the writer creates it when needed
                    mf = self._create(want, headroom_segments=2)
                except (OSError, StoreError) as e:
                    self.last_alloc_error = str(e)
                    continue
                stale, self._next = self._next, mf
                if stale is not None:
                    stale.destroy(0, 0)

    def stop(self) -> None:
        with self._alloc_cv:
            self._stopping = True
            self._alloc_cv.notify_all()
            t = self._alloc_thread
        if t is not None:
            t.join(timeout=10)
        with self._create_lock:
            mf, self._next = self._next, None
        if mf is not None:
            mf.destroy(0, 0)  # an unused pre-made segment is not part of the log

    def settle(self) -> None:
        """After recovery: the last segment takes appends (WRITABLE) when it has room, every other
        loaded one is SEALED."""
        with self._lock:
            segs = self.segments
            for k, mf in enumerate(segs):
                if mf.state is SegmentState.LOADED:
                    last = k == len(segs) - 1
                    mf.set_state(SegmentState.WRITABLE if last and not mf.is_full else SegmentState.SEALED)

    # Shrinking ----------------------------------------------------------------
    def truncate(self, end_offset: int) -> int:
        """Make ``end_offset`` the end of the log: wipe after it, delete later segments.

        Returns the number of bytes cut (beyond end_offset, as written positions said).
        """
        cut = 0
        with self._lock:
            while self.segments and self.segments[-1].start_offset > end_offset:
                mf = self.segments.pop()
                self._starts.pop()
                cut += mf.wrote_pos
                mf.destroy(0, 0)
                # newest first, each removal durable before the next: a crash in between
                # never leaves a hole in the log
                self.fio.fsync_dir(mf.directory)
            if self.segments:
                mf = self.segments[-1]
                pos = end_offset - mf.start_offset
                if pos < mf.size:
                    if mf.state not in (SegmentState.WRITABLE, SegmentState.LOADED):
                        mf.set_state(SegmentState.WRITABLE)     # the log's end again (a FAILED one refuses)
                    cut += max(0, mf.wrote_pos - pos)
                    mf.zero_from(pos)
                mf.wrote_pos = mf.flushed_pos = pos
        self.on_cut(end_offset)
        return cut

    def clear(self) -> int:
        """Delete every segment, newest first (a follower whose whole log diverged from its
        leader's); the bytes they held."""
        cut = 0
        with self._lock:
            while self.segments:
                mf = self.segments.pop()
                self._starts.pop()
                cut += mf.wrote_pos
                mf.destroy(0, 0)
                self.fio.fsync_dir(mf.directory)
        self.on_cut(0)
        return cut

    def counts_by_dir(self) -> dict[str, tuple[int, int, int]]:
        """directory -> (segments, bytes, bytes allocated but not written yet) of the log: what the
        disk status shows, and what the forecast takes off a file system's usage so that
        preallocating a segment (the active one's tail, the pre-made next one) is not mistaken
        for the disk filling in a jump."""
        out: dict[str, list[int]] = {}
        for mf in list(self.segments):
            c = out.setdefault(mf.directory, [0, 0, 0])
            c[0] += 1
            c[1] += mf.size
            c[2] += max(0, mf.size - mf.wrote_pos)
        nxt = self._next
        if nxt is not None:
            out.setdefault(nxt.directory, [0, 0, 0])[2] += nxt.size
        return {d: (n, b, u) for d, (n, b, u) in out.items()}

    def remove_head(self, mf: MappedFile) -> None:
        with self._lock:
            if self.segments and self.segments[0] is mf:
                self.segments.pop(0)
                self._starts.pop(0)

    def close(self) -> None:
        self.stop()
        with self._lock:
            for mf in self.segments:
                mf.close()
            self.segments.clear()
            self._starts.clear()
