"""The hash index: find messages by key or unique key within a time range.

One index file (``index/{20-digit creation time ms}``), preallocated and mapped::

    header  40 bytes: begin_timestamp_ms i64 | end_timestamp_ms i64 |
                      begin_phy_offset i64 | end_phy_offset i64 |
                      hash_slot_count i32 | index_count i32
    slots   hash_slot_count x i32: number of the newest entry in the slot, 0 = empty
    entries index_entries x 20 bytes:
            key_hash i32 | phy_offset i64 | time_diff_s i32 | previous_entry i32

Entry 0 is never used (0 means "none" in slots and chains), as in RocketMQ.
The key indexed is ``topic#key``; its hash is ``zlib.crc32 & 0x7FFFFFFF`` (RocketMQ
uses Java's String.hashCode; a stable hash computed in C serves us better and
the index is derived data, rebuilt from the commit log whenever needed). A hit
is a candidate only: the caller reads the message and checks topic and key.

After a crash an index file may hold entries whose message was cut from the
log, or chains that end in an entry never written: chains are followed with a
bound (the entry count) and a previous-entry number that does not go back ends
the walk, so a torn file never loops or reads out of bounds.
"""

from __future__ import annotations

import math
import os
import struct
import threading

from ..accel import ACCEL
from ..record.crc import crc32
from ..io import FileIO, write_atomic
from ..layout import INDEX_MARKER, list_segments, parse_segment_name, segment_name

HEADER = struct.Struct(">qqqqii")
assert HEADER.size == 40
SLOT = struct.Struct(">i")
ENTRY = struct.Struct(">iqii")
assert ENTRY.size == 20


def key_hash(key: str) -> int:
    return crc32(key.encode("utf-8")) & 0x7FFFFFFF


# the compiled loops of put_many / put_hashed (tidemq._accel.index_put / index_put_hashed), or None:
# IndexFile._put_each / _put_hashed_each
index_put = ACCEL.index_put if ACCEL is not None else None
index_put_hashed = ACCEL.index_put_hashed if ACCEL is not None else None
# a run's slots written by pwrite(2) rather than through the mapping (tidemq._accel.index_put_slots), while
# few slots were written since the file's last fsync: each slot lands in a random page of the slots, and a
# page the fsync cleaned takes a write-protect fault (~2.7 us here) where a pwrite takes ~2.2 us; once most
# pages are dirty again a write through the mapping costs nothing and a pwrite ~1 us (bench/README.md, 32.2
# wave 9). SLOT_PWRITE_SHARE: slots written by pwrite after an fsync, per page of slots; SLOT_PWRITE_RUN_MAX:
# a longer run (a batch, a drain at a high rate: the pages it meets are dirty already) goes through the mapping.
index_put_slots = ACCEL.index_put_slots if ACCEL is not None else None
SLOT_PWRITE_SHARE = 0.5
SLOT_PWRITE_RUN_MAX = 128
PAGE = 4096
# an item of put_hashed: the key's hash (uint32) and the physical offset (int64), native byte order
# (record_loop.append_slices collects them)
HASHED_ITEM = struct.Struct("=Iq")
assert HASHED_ITEM.size == 12


def index_file_size(slots: int, entries: int) -> int:
    return HEADER.size + slots * SLOT.size + entries * ENTRY.size


INDEX_DISK_SHARE = 0.1      # an index file takes at most this share of its disk (two may exist at once)
INDEX_SLOTS_MIN, INDEX_ENTRIES_MIN = 1_000, 4_000


def fitted(slots: int, entries: int, capacity_bytes: int) -> tuple[int, int]:
    """(slots, entries) scaled down, in proportion, until one index file takes at most
    INDEX_DISK_SHARE of a disk of ``capacity_bytes`` (the defaults, ~420 MB a file, filled a 32 MiB
    disk at 25 % of its use: the hash slots are touched all over the file)."""
    room = int(capacity_bytes * INDEX_DISK_SHARE)
    size = index_file_size(slots, entries)
    if capacity_bytes <= 0 or size <= room:
        return slots, entries
    scale = max(0.0, (room - HEADER.size)) / (size - HEADER.size)
    return max(INDEX_SLOTS_MIN, int(slots * scale)), max(INDEX_ENTRIES_MIN, int(entries * scale))


class IndexFile:
    def __init__(self, fio: FileIO, path: str, slots: int, entries: int, handle, mapping, created: bool) -> None:
        self.fio = fio
        self.path = path
        self.slots = slots
        self.entries = entries
        self.handle = handle
        self.mapping = mapping
        self.buf = memoryview(mapping)
        self.entries_at = HEADER.size + slots * SLOT.size
        # a real file's descriptor (OsFileIO: an int) and the compiled loop: a short run's slots by pwrite
        # while slot_writes (slots written since the last fsync, either way) < pwrite_budget
        self.fd = handle if type(handle) is int and index_put_slots is not None else None
        self.slot_writes = 0
        self.pwrite_budget = math.ceil(-(-slots * SLOT.size // PAGE) * SLOT_PWRITE_SHARE)
        if created:
            self.begin_ts = self.end_ts = 0
            self.begin_phy = self.end_phy = 0
            self.count = 1
            self._write_header()
        else:
            (self.begin_ts, self.end_ts, self.begin_phy, self.end_phy, s, self.count) = HEADER.unpack_from(self.buf, 0)
            if s != slots or not (1 <= self.count <= entries):
                raise ValueError(f"index file {path}: header says {s} slots / {self.count} entries")
        self.dirty = created
        self._refs = 0
        self._closing = False        # close() / destroy() called: done at the last release
        self._unlink = False
        self._ref_lock = threading.Lock()

    def hold(self) -> bool:
        with self._ref_lock:
            if self._closing:
                return False
            self._refs += 1
            return True

    def release(self) -> None:
        with self._ref_lock:
            self._refs -= 1
            last = self._closing and self._refs == 0
        if last:
            self._finish()

    @classmethod
    def create(cls, fio: FileIO, directory: str, name_ms: int, slots: int, entries: int) -> "IndexFile":
        path = os.path.join(directory, segment_name(name_ms))
        size = index_file_size(slots, entries)
        h = fio.open(path, create=True)
        try:
            fio.allocate(h, size)
            m = fio.map(h, size)
        except BaseException:
            fio.close(h)
            try:
                fio.unlink(path)
            except OSError:
                pass
            raise
        return cls(fio, path, slots, entries, h, m, created=True)

    @classmethod
    def open(cls, fio: FileIO, path: str, slots: int, entries: int) -> "IndexFile":
        size = index_file_size(slots, entries)
        h = fio.open(path)
        try:
            if fio.size_of(h) != size:
                raise ValueError(f"index file {path} is {fio.size_of(h)} bytes, expected {size}")
            m = fio.map(h, size)
        except BaseException:
            fio.close(h)
            raise
        return cls(fio, path, slots, entries, h, m, created=False)

    @property
    def full(self) -> bool:
        return self.count >= self.entries

    def _write_header(self) -> None:
        HEADER.pack_into(self.buf, 0, self.begin_ts, self.end_ts, self.begin_phy, self.end_phy, self.slots, self.count)

    def put(self, key: str, phy_offset: int, store_ts_ms: int) -> bool:
        if self.count >= self.entries:
            return False
        h = key_hash(key)
        slot_pos = HEADER.size + (h % self.slots) * SLOT.size
        (prev,) = SLOT.unpack_from(self.buf, slot_pos)
        if prev < 0 or prev >= self.count:
            prev = 0
        if self.begin_ts == 0:
            self.begin_ts = store_ts_ms
            self.begin_phy = phy_offset
        diff_s = max(0, (store_ts_ms - self.begin_ts) // 1000)
        n = self.count
        ENTRY.pack_into(self.buf, self.entries_at + n * ENTRY.size, h, phy_offset, diff_s, prev)
        # the count first, then the slot: a lookup that sees the slot already accepts the entry
        self.count = n + 1
        self.end_ts = store_ts_ms
        self.end_phy = phy_offset
        self._write_header()
        SLOT.pack_into(self.buf, slot_pos, n)
        self.dirty = True
        return True

    def put_many(self, items, start: int, store_ts_ms: int) -> int:
        """``put`` of items[start:] ((key, phy_offset) pairs) while there is room; returns how many
        were put. One header write for all (the loop: index_put, compiled when tidemq.accel has it)."""
        return self._put_run(items, len(items), start, store_ts_ms, items[start][1] if start < len(items) else 0,
                             index_put, self._put_each)

    def put_hashed(self, items, start: int, store_ts_ms: int) -> int:
        """put_many of items already hashed: ``items`` holds HASHED_ITEM items (the key's hash,
        the physical offset), as record_loop.append_slices collects them."""
        n = len(items) // HASHED_ITEM.size
        first = HASHED_ITEM.unpack_from(items, start * HASHED_ITEM.size)[1] if start < n else 0
        return self._put_run(items, n, start, store_ts_ms, first, index_put_hashed, self._put_hashed_each)

    def _put_run(self, items, n_items: int, start: int, store_ts_ms: int, first_phy: int, compiled, loop) -> int:
        n = self.count
        end = min(n_items, start + self.entries - n)
        if end <= start:
            return 0
        if self.begin_ts == 0:
            self.begin_ts = store_ts_ms
            self.begin_phy = first_phy
        diff_s = max(0, (store_ts_ms - self.begin_ts) // 1000)
        if compiled is index_put_hashed and self.fd is not None and self.slot_writes < self.pwrite_budget \
                and end - start <= SLOT_PWRITE_RUN_MAX:
            count, last, err = index_put_slots(self.buf, self.fd, self.slots, self.entries_at, n, items, start, end,
                                               diff_s)
            if count == n:
                raise OSError(err, f"index slot write failed: {os.strerror(err)}", self.path)
            # (a pwrite that failed after some: those are in, the caller's next call meets it first)
            end = start + count - n
            self.count, self.end_phy = count, last
        elif compiled is not None:      # compiled: holds the GIL throughout, no lookup sees it half done
            self.count, self.end_phy = compiled(self.buf, self.slots, self.entries_at, n, items, start, end, diff_s)
        else:
            self.end_phy = loop(items, start, end, diff_s)
        self.end_ts = store_ts_ms
        self._write_header()
        self.dirty = True
        self.slot_writes += end - start      # (either way: how many pages the runs since the fsync dirtied)
        return end - start

    def _put_each(self, items, start: int, end: int, diff_s: int) -> int:
        """put_many's loop in Python (twin of tidemq._accel.index_put: the same entries): per item
        its entry, the count, then its slot; returns the last offset."""
        return self._put_entries(((crc32(k.encode("utf-8")) & 0x7FFFFFFF, phy) for k, phy in items[start:end]),
                                 diff_s)

    def _put_hashed_each(self, items, start: int, end: int, diff_s: int) -> int:
        """put_hashed's loop in Python (twin of tidemq._accel.index_put_hashed)."""
        size = HASHED_ITEM.size
        return self._put_entries(((h & 0x7FFFFFFF, phy) for h, phy in
                                  HASHED_ITEM.iter_unpack(bytes(items[start * size:end * size]))), diff_s)

    def _put_entries(self, hashed, diff_s: int) -> int:
        buf = self.buf
        slots = self.slots
        at = self.entries_at
        slot0 = HEADER.size
        slot_unpack, slot_pack, entry_pack = SLOT.unpack_from, SLOT.pack_into, ENTRY.pack_into
        n = self.count
        phy = 0
        for h, phy in hashed:
            slot_pos = slot0 + (h % slots) * 4
            (prev,) = slot_unpack(buf, slot_pos)
            if prev < 0 or prev >= n:
                prev = 0
            entry_pack(buf, at + n * 20, h, phy, diff_s, prev)
            n += 1
            self.count = n
            slot_pack(buf, slot_pos, n - 1)
        return phy

    def lookup(self, key: str, max_count: int, begin_ms: int, end_ms: int) -> list[int]:
        """Physical offsets of candidate entries, newest first."""
        out: list[int] = []
        if self.count <= 1 or self.end_ts < begin_ms or self.begin_ts > end_ms:
            return out
        h = key_hash(key)
        (n,) = SLOT.unpack_from(self.buf, HEADER.size + (h % self.slots) * SLOT.size)
        steps = 0
        while 0 < n < self.count and len(out) < max_count and steps < self.count:
            eh, phy, diff_s, prev = ENTRY.unpack_from(self.buf, self.entries_at + n * ENTRY.size)
            ts = self.begin_ts + diff_s * 1000
            if eh == h and begin_ms - 999 <= ts <= end_ms:
                out.append(phy)
            if prev >= n:
                break
            n = prev
            steps += 1
        return out

    def flush(self) -> None:
        if self.dirty:
            self.dirty = False          # cleared first: a put during the fsync marks it again
            self.slot_writes = 0        # (the fsync cleans the pages: slots by pwrite again)
            try:
                self.fio.fsync(self.handle)
            except BaseException:
                self.dirty = True
                raise

    def close(self, unlink: bool = False) -> None:
        """Unmap and close (and delete, with unlink) now, or at the last reader's release."""
        with self._ref_lock:
            if self._closing:
                return
            self._closing = True
            self._unlink = unlink
            busy = self._refs > 0
        if not busy:
            self._finish()

    def _finish(self) -> None:
        self.fd = None               # (and the buffer released first: index_put_slots never meets a closed fd)
        self.buf.release()
        try:
            self.fio.unmap(self.mapping)
        except BufferError:
            pass
        self.fio.close(self.handle)
        if self._unlink:
            try:
                self.fio.unlink(self.path)
            except FileNotFoundError:
                pass

    def destroy(self) -> None:
        self.close(unlink=True)


class IndexService:
    """The index files in creation order; the last one takes new entries."""

    def __init__(self, fio: FileIO, directory: str, slots: int, entries: int, clock) -> None:
        self.fio = fio
        self.dir = directory
        self.slots = slots
        self.entries = entries
        self.clock = clock
        self.files: list[IndexFile] = []
        self._lock = threading.Lock()

    def load(self) -> list[str]:
        """Open the index files; returns the names of unreadable ones (deleted: rebuilt from the log)."""
        self.fio.makedirs(self.dir)
        self.was_lost = not self.fio.exists(os.path.join(self.dir, INDEX_MARKER))
        bad = []
        for _start, path in list_segments(self.fio, self.dir):
            try:
                self.files.append(IndexFile.open(self.fio, path, self.slots, self.entries))
            except (ValueError, OSError):
                bad.append(path)
                try:
                    self.fio.unlink(path)
                except OSError:
                    pass
        return bad

    def mark_present(self) -> None:
        """The marker that says this directory holds the index (its absence at start: rebuild)."""
        path = os.path.join(self.dir, INDEX_MARKER)
        if not self.fio.exists(path):
            write_atomic(self.fio, path, b"tidemq index\n")

    @property
    def end_phy_offset(self) -> int:
        return self.files[-1].end_phy if self.files else -1

    def _writable_file(self) -> IndexFile:
        """The last file, or a new one when it is full (an OSError comes before anything is put)."""
        f = self.files[-1] if self.files else None
        if f is None or f.full:
            last_name = parse_segment_name(os.path.basename(f.path)) if f is not None else None
            name_ms = max(self.clock.now_ms(), -1 if last_name is None else last_name + 1)
            f = IndexFile.create(self.fio, self.dir, name_ms, self.slots, self.entries)
            with self._lock:
                self.files.append(f)
        return f

    def put(self, key: str, phy_offset: int, store_ts_ms: int) -> None:
        self._writable_file().put(key, phy_offset, store_ts_ms)

    def put_many(self, items, start: int, store_ts_ms: int) -> int:
        """Put items[start:] ((key, phy_offset) pairs) into the last file while it has room (a
        new file first when it is full: an OSError then comes before anything is put); returns
        how many were put (>= 1). Callers loop until every item is in."""
        return self._writable_file().put_many(items, start, store_ts_ms)

    def put_hashed(self, items, start: int, store_ts_ms: int) -> int:
        """put_many of hashed items (IndexFile.put_hashed)."""
        return self._writable_file().put_hashed(items, start, store_ts_ms)

    def lookup(self, key: str, max_count: int, begin_ms: int, end_ms: int) -> list[int]:
        """Candidates, newest first. The files are held while they are read: cleanup or close
        never unmaps one under a lookup (it is unmapped by the lookup's release)."""
        with self._lock:
            files = [f for f in reversed(self.files) if f.hold()]
        out: list[int] = []
        seen: set[int] = set()
        try:
            for f in files:
                for phy in f.lookup(key, max_count, begin_ms, end_ms):
                    if phy not in seen:
                        seen.add(phy)
                        out.append(phy)
                if len(out) >= max_count:
                    break
        finally:
            for f in files:
                f.release()
        return out[:max_count]

    def truncate_after(self, phy_offset: int) -> None:
        """Remove index files whose first entry is at or past phy_offset (recovery cut the log there).
        Entries past the cut in the remaining last file are harmless: a hit is always verified."""
        with self._lock:
            while self.files and self.files[-1].count > 1 and self.files[-1].begin_phy >= phy_offset:
                self.files.pop().destroy()

    def delete_before(self, phy_offset: int) -> int:
        """Delete index files whose every entry lies before phy_offset (cleanup); never the last."""
        n = 0
        with self._lock:
            while len(self.files) > 1 and self.files[0].end_phy < phy_offset:
                self.files.pop(0).destroy()
                n += 1
        return n

    def flush(self) -> None:
        with self._lock:
            files = list(self.files)
        for f in files:
            f.flush()

    def close(self) -> None:
        with self._lock:
            for f in self.files:
                f.close()
            self.files.clear()
