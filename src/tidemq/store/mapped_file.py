"""One fixed-size, preallocated, memory-mapped segment file.

Lifecycle (owned here): ACTIVE (being appended) -> SEALED (full, read-only) ->
DELETING (destroy() called, readers may still hold it) -> GONE (unmapped,
closed, unlinked). A reader calls ``hold()`` before it touches ``buf`` and
``release()`` after; the mapping is unmapped only when the last holder is gone,
or by ``destroy(force=True)`` after the forced-destroy interval, in which case
views still alive keep the pages mapped until they are garbage collected (Python
refuses to unmap a buffer that has live exports, so this never segfaults).

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
from .types import StoreError

log = logging.getLogger("tidemq.store")


class MappedFile:
    __slots__ = ("fio", "path", "directory", "start_offset", "size", "handle", "mapping", "buf",
                 "wrote_pos", "flushed_pos", "_refs", "_available", "_lock", "destroy_first_ms",
                 "first_store_timestamp_ms", "last_store_timestamp_ms")

    def __init__(self, fio: FileIO, path: str, start_offset: int, size: int, handle, mapping) -> None:
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
        self._available = True
        self._lock = threading.Lock()
        self.destroy_first_ms = 0
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
        return cls(fio, path, start_offset, size, handle, mapping)

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
        return cls(fio, path, start_offset, size, handle, mapping)

    @property
    def end_offset(self) -> int:
        return self.start_offset + self.size

    @property
    def is_full(self) -> bool:
        return self.wrote_pos >= self.size

    @property
    def available(self) -> bool:
        return self._available

    @property
    def refs(self) -> int:
        return self._refs

    def hold(self) -> bool:
        with self._lock:
            if not self._available:
                return False
            self._refs += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._refs -= 1
            gone = not self._available and self._refs <= 0
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

        Returns True when the file is gone. With readers still holding it, the
        first call only marks it; a call ``force_after_ms`` later deletes anyway.
        """
        with self._lock:
            if self._available:
                self._available = False
                self.destroy_first_ms = now_ms
            busy = self._refs > 0
        if busy and now_ms - self.destroy_first_ms < force_after_ms:
            return False
        if busy:
            log.warning("segment %s still held by %d reader(s) after %d ms: deleting it anyway",
                        self.path, self._refs, force_after_ms)
        self._cleanup()
        try:
            self.fio.unlink(self.path)
        except FileNotFoundError:
            pass
        return True

    def close(self) -> None:
        """Unmap and close without deleting (shutdown); a reader still holding the segment
        keeps it mapped until its release()."""
        with self._lock:
            self._available = False
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
