"""One fixed-size, preallocated, memory-mapped segment file.

Its state (created, loaded, writable, sealed, failed, deleting, deleted, closed) and the legal
moves between them are segment_state.py's; this class makes the moves where they happen
(``create`` / ``open``, ``destroy``, ``close``, ``set_state``). A reader calls ``hold()`` before
it touches ``buf`` and ``release()`` after; hold() fails once the segment is out of service
(deleting, deleted, closed). The mapping is unmapped only when the last holder is gone, or by
``destroy(force=True)`` after the forced-destroy interval, in which case views still alive keep
the pages mapped until they are garbage collected (Python refuses to unmap a buffer that has
live exports, so this never segfaults).

``mapping`` is the mmap itself: its slices are bytes (a quarter of the cost of
copying a memoryview slice), so the hot paths slice it; ``buf`` is a memoryview
of it for struct.pack_into and zero-copy views.

Positions: ``wrote_pos`` is the end of complete records (readers never read past
it); ``flushed_pos`` is the end of what an fsync has made durable.
"""

from __future__ import annotations

import logging
import os
import threading

from ..io import FileIO
from ..layout import parse_segment_name, segment_name  # noqa: F401 - parse_segment_name: for older importers
from . import segment_state
from .segment_state import SegmentState
from .types import StoreError

log = logging.getLogger("tidemq.store")


class MappedFile:
    __slots__ = ("fio", "path", "directory", "start_offset", "size", "handle", "mapping", "buf",
                 "wrote_pos", "flushed_pos", "_refs", "available", "state", "_lock", "destroy_first_ms",
                 "first_store_timestamp_ms", "last_store_timestamp_ms", "unlinked")

    def __init__(self, fio: FileIO, path: str, start_offset: int, size: int, handle, mapping,
                 state: SegmentState = SegmentState.CREATED) -> None:
        self.fio = fio
        self.path = path
        self.directory = os.path.dirname(path)
        self.start_offset = start_offset
        self.size = size
        self.handle = handle
        self.mapping = mapping
        self.buf = memoryview(mapping)
        self.wrote_pos = 0
        self.flushed_pos = 0
        self._refs = 0
        self.state = state                  # moved by segment_state.move only
        self.available = state in segment_state.HOLDABLE     # hold() succeeds (kept by move())
        self._lock = threading.Lock()
        self.destroy_first_ms = 0
        self.unlinked = False               # its name is gone (DELETING: its holders read on)
        self.first_store_timestamp_ms = 0
        self.last_store_timestamp_ms = 0

    @classmethod
    def create(cls, fio: FileIO, directory: str, start_offset: int, size: int) -> "MappedFile":
        """Create, preallocate (real blocks: no ENOSPC later) and map a new segment."""
        path = os.path.join(directory, segment_name(start_offset))
        if fio.exists(path):
            raise FileExistsError(path)
        handle = fio.open(path, create=True)
        try:
            fio.allocate(handle, size)
            fio.fsync_dir(directory)    # the name is durable before any record in it can be acknowledged
            mapping = fio.map(handle, size)
        except BaseException:
            fio.close(handle)
            try:
                fio.unlink(path)
            except OSError:
                pass
            raise
        return cls(fio, path, start_offset, size, handle, mapping, SegmentState.CREATED)

    @classmethod
    def open(cls, fio: FileIO, path: str, start_offset: int, size: int, readonly: bool = False) -> "MappedFile":
        """Map an existing segment; a short file (a crash while allocating) is extended.
        ``readonly``: opened and mapped read-only (a read-only directory or mount)."""
        handle = fio.open(path, readonly=readonly)
        try:
            if fio.size_of(handle) < size:
                if readonly:
                    raise StoreError(f"segment {path} in a read-only directory is shorter than "
                                     f"segment_size_bytes={size}")
                fio.allocate(handle, size)
            mapping = fio.map(handle, size, readonly=readonly)
        except BaseException:
            fio.close(handle)
            raise
        return cls(fio, path, start_offset, size, handle, mapping, SegmentState.LOADED)

    @property
    def end_offset(self) -> int:
        return self.start_offset + self.size

    @property
    def is_full(self) -> bool:
        return self.wrote_pos >= self.size

    @property
    def refs(self) -> int:
        return self._refs

    def set_state(self, to: SegmentState) -> SegmentState:
        """Move to ``to`` (segment_state.move: IllegalTransition unless the table allows it); the
        state left."""
        with self._lock:
            return segment_state.move(self, to)

    def hold(self) -> bool:
        with self._lock:
            if not self.available:
                return False
            self._refs += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._refs -= 1
            gone = not self.available and self._refs <= 0
        if gone:
            self._cleanup()

    def flush(self) -> int:
        """fsync everything written so far; returns the new flushed position."""
        pos = self.wrote_pos
        if pos > self.flushed_pos:
            self.fio.fsync(self.handle)
            self.flushed_pos = pos
        return self.flushed_pos

    def zero_from(self, pos: int) -> None:
        """Wipe [pos, size) so a torn or stale tail can never be read back as records."""
        if pos < self.size:
            self.fio.zero_range(self.handle, pos, self.size - pos)
            self.fio.fsync(self.handle)

    def destroy(self, now_ms: int, force_after_ms: int) -> bool:
        """Take the segment out of service and delete it once no reader holds it.

        Returns True when the file is gone. With readers still holding it, the first call takes it
        out of service (DELETING) and removes its name at once, the directory fsynced: the holders read
        on through the mapping, the space goes at their release, and no stop of the process (shutdown,
        kill -9, power loss) can bring it back at the next start under queues already past it. The
        unmapping waits for the last release, or for a call ``force_after_ms`` later.
        An OSError of the unlink leaves it DELETING with its name: the next call tries again.
        """
        with self._lock:
            if self.state is SegmentState.DELETED:
                return True
            if self.state is not SegmentState.DELETING:
                segment_state.move(self, SegmentState.DELETING)
                self.destroy_first_ms = now_ms
            busy = self._refs > 0
        if busy and now_ms - self.destroy_first_ms < force_after_ms:
            if not self.unlinked:
                self._unlink()
                try:
                    self.fio.fsync_dir(self.directory)
                except OSError:
                    pass      # (as the cleaner's own fsync after a deletion: the name is gone for this run)
            return False
        if busy:
            log.warning("segment %s still held by %d reader(s) after %d ms: deleting it anyway",
                        self.path, self._refs, force_after_ms)
        self._cleanup()
        if not self.unlinked:
            self._unlink()
        with self._lock:
            segment_state.move(self, SegmentState.DELETED)
        return True

    def _unlink(self) -> None:
        try:
            self.fio.unlink(self.path)
        except FileNotFoundError:
            pass
        self.unlinked = True

    def close(self) -> None:
        """Unmap and close without deleting (shutdown); a reader still holding the segment
        keeps it mapped until its release(). Twice, or after deletion, does nothing."""
        with self._lock:
            if self.state in (SegmentState.CLOSED, SegmentState.DELETED):
                return
            segment_state.move(self, SegmentState.CLOSED)
            busy = self._refs > 0
        if not busy:
            self._cleanup()

    def _cleanup(self) -> None:
        with self._lock:
            if self.mapping is None:
                return
            mapping, self.mapping = self.mapping, None
            handle, self.handle = self.handle, None
        try:
            self.buf.release()
        except Exception:  # noqa: BLE001 - a live slice keeps the buffer; it goes with the slice
            pass
        try:
            self.fio.unmap(mapping)
        except BufferError:
            pass  # views handed out still exist: the pages go when they are collected
        self.fio.close(handle)

    def __repr__(self) -> str:
        return f"MappedFile({self.path}, wrote={self.wrote_pos}, flushed={self.flushed_pos})"
