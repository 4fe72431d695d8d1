"""Consume queues: per topic and queue, the commit-log position of every message.

Layout: ``consumequeue/{topic}/{queue_id}/{20-digit byte offset}``; each file
holds ``units_per_segment`` 20-byte units (RocketMQ: 300,000), big-endian::

    commitlog_offset i64 | size i32 | tags_hash_code i64

The unit at index *n* describes the message with queue offset *n*. Files are
not preallocated: they are appended with pwrite (a full disk answers ENOSPC,
never SIGBUS) and read with pread, through a bounded cache of open handles, so
ten thousand queues cost ten thousand small files and at most
``consume_queue_open_files_max`` descriptors. A unit of zeroes or a partial unit
at a file's end is a torn write: recovery cuts it.

``min_offset`` is the logical minimum: the first unit whose message is still in
the commit log (corrected after cleanup); ``max_offset`` is one past the last;
``tail_end`` the commit-log offset where the last unit's record ends (what a reader
limited to a log offset compares first: MessageStore.readable_end), set before
``max_offset`` moves, so a reader that sees a unit sees its end.
"""

from __future__ import annotations

import errno
import os
import struct
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from ..io import FileIO
from ..layout import list_segments, queue_dir, segment_name, topic_dir
from .types import StoreError

UNIT = struct.Struct(">qiq")
assert UNIT.size == 20
UNIT_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")])   # the same, for bulk reads
assert UNIT_DTYPE.itemsize == 20
UNIT_SIZE = 20
_OFF_SIZE = struct.Struct(">qi")              # a unit's first two fields


class HandleCache:
    """Open file handles, LRU-bounded; a handle in use is never closed under its user."""

    def __init__(self, fio: FileIO, max_open: int) -> None:
        self.fio = fio
        self.max_open = max_open
        self._open: OrderedDict[str, list] = OrderedDict()   # path -> [handle, users]
        self._lock = threading.Lock()
        self._closed = False
        self.pinned = 0            # uses kept by queues for their next writes (pin / unpin): at most half

    def acquire(self, path: str, create: bool = False) -> list:
        """[handle, users, ...]: pass it to release() when done (the read path's cheap form of use())."""
        with self._lock:
            if self._closed:
                raise OSError(errno.EBADF, "the store is closed", path)
            entry = self._open.get(path)
            if entry is None:
                entry = [self.fio.open(path, create=create), 0]
                self._open[path] = entry
                self._evict()
            else:
                self._open.move_to_end(path)
            entry[1] += 1
        return entry

    def release(self, entry: list) -> None:
        with self._lock:
            entry[1] -= 1
            close = entry[1] == 0 and len(entry) > 2      # forgotten while in use
        if close:
            self.fio.close(entry[0])

    def pin(self, path: str) -> list | None:
        """A use of ``path``'s handle kept until unpin() (a queue's last file, for its next writes),
        or None when half the handles are pinned already (the LRU bound stays the bound)."""
        if self.pinned >= self.max_open // 2:
            return None
        entry = self.acquire(path)
        self.pinned += 1
        return entry

    def unpin(self, entry: list) -> None:
        self.pinned -= 1
        self.release(entry)

    @contextmanager
    def use(self, path: str, create: bool = False) -> Iterator:
        entry = self.acquire(path, create)
        try:
            yield entry[0]
        finally:
            self.release(entry)

    def _evict(self) -> None:
        if len(self._open) <= self.max_open:
            return
        for p in list(self._open):
            if len(self._open) <= self.max_open:
                break
            e = self._open[p]
            if e[1] == 0:
                del self._open[p]
                self.fio.close(e[0])

    def forget(self, path: str) -> None:
        """Close the handle of a file about to be deleted (by its last user if it is in use)."""
        with self._lock:
            e = self._open.pop(path, None)
            if e is not None and e[1] > 0:
                e.append("forgotten")
                e = None
        if e is not None:
            self.fio.close(e[0])

    def close_all(self) -> None:
        """Close every handle; one in use is closed by its last user (never under a reader)."""
        with self._lock:
            self._closed = True
            items = list(self._open.values())
            self._open.clear()
            idle = []
            for e in items:
                if e[1] > 0:
                    e.append("forgotten")
                else:
                    idle.append(e[0])
        for h in idle:
            self.fio.close(h)


class ConsumeQueue:
    def __init__(self, fio: FileIO, root: str, topic: str, queue_id: int, units_per_segment: int,
                 handles: HandleCache) -> None:
        self.fio = fio
        self.topic = topic
        self.queue_id = queue_id
        self.dir = queue_dir(root, topic, queue_id)
        self.units_per_segment = units_per_segment
        self.seg_bytes = units_per_segment * UNIT_SIZE
        self.handles = handles
        self.files: list[int] = []          # start unit of each file, ascending
        self.max_offset = 0
        self.min_offset = 0
        self.tail_end = 0                   # where the last unit's record ends in the log (0: none)
        self._dirty: set[int] = set()       # start units of files written since the last flush
        self._lock = threading.Lock()
        self._dir_made = False
        self._paths: dict[int, str] = {}
        self._tail: tuple[int, list] | None = None     # (start unit, handle entry) of the last file written

    # Loading / recovery ----------------------------------------------------------
    def load(self) -> None:
        if not self.fio.is_dir(self.dir):
            return
        self._dir_made = True
        starts = []
        for b, path in list_segments(self.fio, self.dir):
            if b % self.seg_bytes:
                raise StoreError(f"consume-queue file {path} does not start at a multiple "
                                 f"of {self.seg_bytes} bytes: consume_queue_units_per_segment differs from the one "
                                 f"the store was written with")
            starts.append(b // UNIT_SIZE)
        self.files = starts
        if starts:
            last = starts[-1]
            size = self.fio.file_size(self._path(last))
            if size > self.seg_bytes:
                raise StoreError(f"consume-queue file {self._path(last)} holds {size} bytes, more than "
                                 f"consume_queue_units_per_segment allows ({self.seg_bytes})")
            self.max_offset = last + size // UNIT_SIZE
            self.min_offset = starts[0]
            try:
                self.tail_end = self._end_of_unit(self.max_offset - 1)
            except OSError:
                self.tail_end = 0        # (at start everything the queue points at is durable: recovery)

    def _path(self, start_unit: int) -> str:
        p = self._paths.get(start_unit)
        if p is None:
            if len(self._paths) > 64:
                self._paths.clear()
            p = self._paths[start_unit] = os.path.join(self.dir, segment_name(start_unit * UNIT_SIZE))
        return p

    def file_start(self, offset: int) -> int:
        """The queue offset of the first unit of the file that holds ``offset``."""
        return offset - offset % self.units_per_segment

    # Write ----------------------------------------------------------------------
    def append(self, queue_offset: int, data: bytes | bytearray | memoryview) -> None:
        """Append units for queue offsets queue_offset.. (must continue max_offset exactly)."""
        if queue_offset != self.max_offset:
            raise ValueError(f"{self.topic}/{self.queue_id}: append at {queue_offset}, max is {self.max_offset}")
        self._write(queue_offset, data)
        if len(data) >= UNIT_SIZE:
            off, size = _OFF_SIZE.unpack_from(data, len(data) - UNIT_SIZE)
            if off + size > self.tail_end:
                self.tail_end = off + size      # before max_offset: a reader seeing the unit sees its end
        self.max_offset = queue_offset + len(data) // UNIT_SIZE

    def _end_of_unit(self, qoff: int) -> int:
        """Where the record of unit ``qoff`` ends in the log (0: none, or unreadable)."""
        if qoff < 0:
            return 0
        raw = self.read(qoff, 1)
        if len(raw) < UNIT_SIZE:
            return 0
        off, size = _OFF_SIZE.unpack_from(raw, 0)
        return off + size if size > 0 else 0

    def _write(self, queue_offset: int, data) -> None:
        """Write units at ``queue_offset``: into the file the last write went to through the handle
        it keeps (``_tail``: the writer's common case, a pwrite and little else), else _write_files."""
        tail = self._tail
        if tail is not None:
            start, entry = tail
            n = len(data) // UNIT_SIZE
            if len(entry) == 2 and start <= queue_offset and queue_offset + n <= start + self.units_per_segment:
                self.fio.pwrite(entry[0], data, (queue_offset - start) * UNIT_SIZE)
                # marked after the write: a flush that took the set already fsyncs after this pwrite
                if start not in self._dirty:
                    with self._lock:
                        self._dirty.add(start)
                return
        self._write_files(queue_offset, data)

    def _keep_tail(self, start: int) -> None:
        """Keep a use of file ``start``'s handle for the next writes (the last file written; -1:
        none); the one kept before is given back. A handle forgotten meanwhile (its file deleted,
        the store closing) is not written through: the next write goes the long way."""
        old, self._tail = self._tail, None
        if old is not None:
            self.handles.unpin(old[1])
        if start >= 0:
            entry = self.handles.pin(self._path(start))
            if entry is not None:
                self._tail = (start, entry)

    def _write_files(self, queue_offset: int, data) -> None:
        view = memoryview(data)
        off = queue_offset
        while view:
            start = self.file_start(off)
            room = (start + self.units_per_segment - off) * UNIT_SIZE
            chunk = view[:room]
            if not self._dir_made:
                self.fio.makedirs(self.dir)
                self._dir_made = True
            new = not self.files or start > self.files[-1]
            entry = self.handles.acquire(self._path(start), create=new)     # (use() without its generator)
            try:
                self.fio.pwrite(entry[0], chunk, (off - start) * UNIT_SIZE)
            finally:
                self.handles.release(entry)
            if new:
                if not self.files:
                    self.fio.fsync_dir(os.path.dirname(self.dir))
                self.fio.fsync_dir(self.dir)
                self.files.append(start)
            with self._lock:            # the flush swaps the set under this lock
                self._dirty.add(start)
            off += len(chunk) // UNIT_SIZE
            view = view[room:]
            if start == self.files[-1] and (self._tail is None or self._tail[0] != start or len(self._tail[1]) != 2):
                self._keep_tail(start)

    def reset_to(self, offset: int) -> None:
        """Forget every unit: the queue starts (empty) at ``offset``. Used by rebuilds."""
        for start in reversed(self.files):
            self._remove_file(start)
            self.fio.fsync_dir(self.dir)
        self.files = []
        self.tail_end = 0
        self.min_offset = self.max_offset = offset

    def write_units(self, queue_offset: int, data) -> None:
        """Write units over ones the queue holds already (below max_offset), as they are or fixed."""
        if queue_offset < self.min_offset or queue_offset + len(data) // UNIT_SIZE > self.max_offset:
            raise ValueError(f"{self.topic}/{self.queue_id}: units at {queue_offset} are not in "
                             f"[{self.min_offset}, {self.max_offset})")
        self._write(queue_offset, data)

    def put_unit_checked(self, queue_offset: int, commitlog_offset: int, size: int, tags_hash: int) -> str:
        """Recovery's idempotent put: 'skip' if the same unit is there, 'fixed' if it was
        different (a torn unit rewritten), 'appended', or 'gap' when units are missing before it."""
        unit = UNIT.pack(commitlog_offset, size, tags_hash)
        if queue_offset == self.max_offset:
            self.append(queue_offset, unit)
            return "appended"
        if queue_offset > self.max_offset:
            return "gap"
        if queue_offset < self.min_offset:
            return "skip"
        existing = self.read(queue_offset, 1)
        if existing == unit:
            return "skip"
        self._write(queue_offset, unit)
        return "fixed"

    def truncate(self, max_offset: int) -> None:
        """Drop units at and after max_offset (their messages are gone from the commit log). The
        queue ends there for readers and writers at once; then the files are cut (an OSError from
        that leaves the queue cut in memory, the files perhaps not: recovery checks them)."""
        if max_offset >= self.max_offset:
            return
        max_offset = max(max_offset, 0)
        try:
            self.tail_end = self._end_of_unit(max_offset - 1) if max_offset > self.min_offset else 0
        except OSError:
            pass                         # (kept as it was: an end past the new one only makes readers wait)
        old = self.files
        self.files = [start for start in old if start < max_offset]
        self.max_offset = max_offset
        self.min_offset = min(self.min_offset, max_offset)
        for start in reversed(old):
            if start >= max_offset:      # newest first, each removal durable: no stale file comes back
                path = self._path(start)
                self.handles.forget(path)
                with self._lock:
                    self._dirty.discard(start)
                try:
                    self.fio.unlink(path)
                except FileNotFoundError:
                    pass
                self.fio.fsync_dir(self.dir)
        for start in self.files:
            if max_offset < start + self.units_per_segment:
                with self.handles.use(self._path(start)) as h:
                    self.fio.truncate(h, (max_offset - start) * UNIT_SIZE)
                    self.fio.fsync(h)

    def flush(self) -> None:
        with self._lock:
            dirty, self._dirty = self._dirty, set()
        pending = sorted(dirty)
        for k, start in enumerate(pending):
            try:
                with self.handles.use(self._path(start)) as h:
                    self.fio.fsync(h)
            except FileNotFoundError:
                continue
            except BaseException:
                with self._lock:        # this file and every one not reached stay dirty
                    self._dirty.update(pending[k:])
                raise

    @property
    def dirty(self) -> bool:
        return bool(self._dirty)

    # Read -----------------------------------------------------------------------
    def read(self, offset: int, count: int) -> bytes:
        """Up to ``count`` units from ``offset``, across files; b'' if unreadable."""
        end = min(offset + count, self.max_offset)
        parts = []
        while offset < end:
            start = self.file_start(offset)
            stop = min(end, start + self.units_per_segment)
            try:
                entry = self.handles.acquire(self._path(start))
            except OSError:           # deleted by cleanup, or the store is closing: nothing readable
                break
            try:
                raw = self.fio.pread(entry[0], (stop - offset) * UNIT_SIZE, (offset - start) * UNIT_SIZE)
            finally:
                self.handles.release(entry)
            parts.append(raw)
            if len(raw) < (stop - offset) * UNIT_SIZE:
                break
            offset = stop
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)

    def message_bytes(self, units_max: int) -> tuple[int, bool]:
        """(bytes of the records the queue holds, exact): the sum of its units' sizes when it holds
        at most ``units_max`` units, else its last ``units_max`` units' mean size times its count
        (a bounded read however long the queue: an estimate, ``exact`` False)."""
        lo, hi = self.min_offset, self.max_offset
        n = hi - lo
        if n <= 0:
            return 0, True
        start = max(lo, hi - max(1, units_max))
        raw = self.read(start, hi - start)
        read = len(raw) // UNIT_SIZE
        if read == 0:
            return 0, False
        total = int(np.frombuffer(raw, UNIT_DTYPE, read)["size"].sum(dtype=np.int64))
        if read == n:
            return total, True
        return round(total / read * n), False

    def last_unit(self) -> tuple[int, int, int] | None:
        if self.max_offset <= self.min_offset:
            return None
        raw = self.read(self.max_offset - 1, 1)
        return UNIT.unpack(raw) if len(raw) == UNIT_SIZE else None

    def file_starts(self) -> list[int]:
        return list(self.files)

    def delete_file(self, start: int) -> None:
        """Delete the head file starting at unit ``start`` (cleanup). The minimum moves first,
        so a reader never finds the file gone below the minimum it was told."""
        self.min_offset = max(self.min_offset, start + self.units_per_segment)
        self._remove_file(start)
        if self.files and self.files[0] == start:
            self.files.pop(0)

    def _remove_file(self, start: int) -> None:
        """Close (or leave to its last reader), unlink, forget dirtiness: one queue file gone."""
        path = self._path(start)
        self.handles.forget(path)
        try:
            self.fio.unlink(path)
        except FileNotFoundError:
            pass
        with self._lock:
            self._dirty.discard(start)

    def release_tail(self) -> None:
        """Give back the handle kept for the next writes (the queue is closing)."""
        self._keep_tail(-1)

    def close(self) -> None:
        self.release_tail()
        for start in self.files:
            self.handles.forget(self._path(start))


class ConsumeQueueTable:
    """Every consume queue of the store, opened lazily, loaded from disk at start."""

    def __init__(self, fio: FileIO, root: str, units_per_segment: int, open_files_max: int) -> None:
        self.fio = fio
        self.root = root
        self.units_per_segment = units_per_segment
        self.handles = HandleCache(fio, open_files_max)
        self.queues: dict[str, dict[int, ConsumeQueue]] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        self.fio.makedirs(self.root)
        for topic in self.fio.listdir(self.root):
            tdir = topic_dir(self.root, topic)
            if not self.fio.is_dir(tdir):
                continue
            for q in self.fio.listdir(tdir):
                if q.isdigit():
                    self.get_or_create(topic, int(q)).load()

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        t = self.queues.get(topic)
        return t.get(queue_id) if t is not None else None

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        t = self.queues.get(topic)
        if t is None:
            with self._lock:
                t = self.queues.setdefault(topic, {})
        cq = t.get(queue_id)
        if cq is None:
            with self._lock:
                cq = t.get(queue_id)
                if cq is None:
                    cq = ConsumeQueue(self.fio, self.root, topic, queue_id, self.units_per_segment, self.handles)
                    t[queue_id] = cq
        return cq

    def drop_topic(self, topic: str) -> int:
        """Close and delete every consume queue of a topic (its directory included); units removed."""
        with self._lock:
            queues = self.queues.pop(topic, {})
        units = 0
        for cq in queues.values():
            units += max(0, cq.max_offset - cq.min_offset)
            cq.close()
        tdir = topic_dir(self.root, topic)
        if self.fio.is_dir(tdir):
            self.fio.rmtree(tdir)
            self.fio.fsync_dir(self.root)
        return units

    def all(self) -> list[ConsumeQueue]:
        with self._lock:
            return [cq for t in self.queues.values() for cq in t.values()]

    def flush(self) -> None:
        for cq in self.all():
            if cq.dirty:
                cq.flush()

    def close(self) -> None:
        for cq in self.all():
            cq.release_tail()
        self.handles.close_all()
