"""FaultyFileIO: an in-memory file system behind the FileIO seam, with seeded faults.

It keeps, for every file, what the page cache holds (``data``: what a reader or
a mapping sees) and what the disk holds (``durable``: what an fsync made
durable), and for every directory which entries a directory fsync (or, as on
ext4, an fsync of the file itself) made durable. From that it derives the two
kinds of crash:

* ``after_crash()`` (kill -9): the page cache survives; every write counts.
* ``after_power_loss(rng)``: for every file, each 4 KiB page that differs from
  the disk keeps the new bytes, the old bytes, or is torn at a random byte (so
  unsynced writes survive in any order, partly or not at all); file lengths revert
  at random; of the changes to the names (create, rename, unlink) not made durable
  yet, a random prefix survives, in order (a journaling file system: a rename is
  atomic, and one committed commits every change before it). An fsync of a file or
  a directory commits them all (ext4's journal is one for the file system).

Both return a *new* FaultyFileIO holding the surviving state; the old one is
dead (every operation raises SimulatedCrash), so the threads of the crashed
store stop at their next file operation and their mappings no longer reach
the new "disk".

A file unlinked (or replaced by a rename) while a handle on it is open keeps its bytes for that
handle and its mappings, and its space in ``disk_usage``, until the last handle closes (Linux).

Injected faults (all deterministic): ``crash_after(n)`` — the n-th following
operation raises SimulatedCrash and kills the instance; ``fail(op, errno,
path_contains, times)`` — the named operation raises OSError; ``capacity_bytes``
— allocations and writes past it raise ENOSPC.

A failed ``fsync`` (``fail("fsync", ...)``) does what Linux does after a failed writeback
(PostgreSQL's "fsyncgate"): every dirty page it covered is marked clean without reaching the
disk, and each is either dropped from the page cache (readers and mappings see the disk's
bytes again: the data reverts to what was durable) or kept with the new bytes, page by page,
chosen by the seeded ``rng`` (``drop_ratio`` of them dropped). Either way no later fsync writes
such a page unless it is written again (``_Node.stale``), so the next fsync's success proves
nothing about it; a power loss takes it back; a kill -9 keeps the page cache as it is (a
restarted process may read kept pages that are not on disk). ``sync_filesystem`` behaves alike.

A ``pwrite`` lands in the page cache (``data``) like a write through a mapping:
readers and mappings see it at once, a kill -9 keeps it, a power loss keeps it
only where an fsync made it durable (else any part of it, page by page). A
pwrite that a fault or a crash stops may be torn: ``crash_after(n, torn_bytes=k)``
and ``fail("pwrite", ..., written=k)`` land its first ``k`` bytes before the
crash or the error, as a write the kernel took in part.
"""

from __future__ import annotations

import errno
import os
import random
import threading
from dataclasses import dataclass, field

from ..io import DiskUsage, LockedError

PAGE = 4096


class SimulatedCrash(BaseException):
    """The simulated process died here (BaseException: nothing in the store may swallow it)."""


class _MappedBytes(bytearray):
    """A file's page-cache bytes; slices are bytes, as slices of an mmap are."""

    __slots__ = ()

    def __getitem__(self, i):
        r = bytearray.__getitem__(self, i)
        return bytes(r) if isinstance(i, slice) else r


class _Node:
    __slots__ = ("data", "durable", "synced_once", "stale", "opens")

    def __init__(self, data: bytearray | None = None, durable: bytes = b"") -> None:
        self.data = _MappedBytes(data) if data is not None else _MappedBytes()
        self.durable = durable
        self.synced_once = False
        # page index -> its bytes when a failed fsync marked it clean without writing it: not
        # durable, and written back by no fsync unless its bytes change (it is written again)
        self.stale: dict[int, bytes] = {}
        self.opens = 0                   # handles open on it: an unlinked file keeps its space until 0

    def dirty_view(self) -> bytes:
        """``data`` with every stale page as the disk has it: what a writeback would write."""
        data = bytes(self.data)
        if not self.stale:
            return data
        out = bytearray(data)
        for page, content in self.stale.items():
            a = page * PAGE
            seg = data[a:a + PAGE]
            if seg == content:                      # not written since: the disk keeps its bytes
                out[a:a + len(seg)] = self.durable[a:a + len(seg)].ljust(len(seg), b"\0")
        return bytes(out)

    def write_back(self) -> None:
        """A successful fsync: every dirty page reaches the disk, stale ones do not."""
        if self.stale:
            data = bytes(self.data)
            for page, content in list(self.stale.items()):
                if data[page * PAGE:(page + 1) * PAGE] != content:
                    del self.stale[page]            # written again: dirty, written back now
            self.durable = self.dirty_view()
        else:
            self.durable = bytes(self.data)

    def written(self, offset: int, length: int) -> None:
        """Bytes written by pwrite, zero_range or truncate: their pages are dirty again (a write of
        the same bytes too, as on Linux; a write through the mapping is seen by its bytes only)."""
        if self.stale and length > 0:
            for page in range(offset // PAGE, (offset + length - 1) // PAGE + 1):
                self.stale.pop(page, None)

    def writeback_failed(self, rng: random.Random, drop_ratio: float) -> int:
        """A failed fsync: every dirty page is marked clean, dropped (``drop_ratio``) or kept. Returns
        the pages dropped."""
        data, old = self.data, self.durable
        dropped = 0
        for a in range(0, len(data), PAGE):
            seg = data[a:a + PAGE]
            disk = old[a:a + len(seg)].ljust(len(seg), b"\0")
            page = a // PAGE
            if seg == disk or self.stale.get(page) == seg:
                continue
            if rng.random() < drop_ratio:
                data[a:a + len(seg)] = disk         # the kernel dropped it: the disk's bytes again
                self.stale.pop(page, None)
                dropped += 1
            else:
                self.stale[page] = seg
        return dropped


class _Handle:
    __slots__ = ("path", "node", "gen")

    def __init__(self, path: str, node: _Node, gen: int) -> None:
        self.path = path
        self.node = node
        self.gen = gen


class _LockHandle:
    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path


@dataclass
class _Fault:
    op: str
    err: int
    path_contains: str
    times: int
    written: int = 0          # a pwrite: bytes that land before the error


@dataclass
class FaultStats:
    ops: int = 0
    fsyncs: int = 0
    bytes_written: int = 0
    faults_raised: int = 0
    pages_dropped: int = 0          # by failed fsyncs
    log: list = field(default_factory=list)


def _norm(path: str) -> str:
    return os.path.normpath(path)


class FaultyFileIO:
    def __init__(self, capacity_bytes: int = 1 << 40, seed: int = 0) -> None:
        self.files: dict[str, _Node] = {}          # current namespace
        self.durable_files: dict[str, _Node] = {}  # namespace as the disk knows it
        self.names_pending: list[tuple] = []       # changes of names since the journal's last commit, in order
        self.dirs: set[str] = {"/"}
        self.capacity_bytes = capacity_bytes
        self.stats = FaultStats()
        self._crash_at: int | None = None
        self._crash_torn = 0            # a pwrite the crash stops: its first bytes that land
        self._landed = 0                # set by _op when it stops an operation: bytes of it that land
        self._faults: list[_Fault] = []
        self._dead = False
        self._lock = threading.RLock()
        self._gen = 0
        self.locks: dict[str, _LockHandle] = {}    # path -> the handle holding it (lock / unlock)
        self.rng = random.Random(seed)             # which pages a failed fsync drops
        self.drop_ratio = 0.5
        # files unlinked (or replaced by a rename) while open: their space stays used until the last
        # handle on them closes, as on Linux (a crash closes them all: the new instance has none)
        self.orphans: dict[int, _Node] = {}

    # Fault control ----------------------------------------------------------------
    def crash_after(self, n_ops: int, torn_bytes: int = 0) -> None:
        """The n-th operation from now (1 = the next) raises SimulatedCrash; when it is a pwrite,
        its first ``torn_bytes`` land in the page cache first (a torn write)."""
        self._crash_at = self.stats.ops + n_ops
        self._crash_torn = torn_bytes

    def fail(self, op: str, err: int = errno.EIO, path_contains: str = "", times: int = 1,
             written: int = 0) -> None:
        """The next ``times`` calls of ``op`` on a path containing ``path_contains`` raise
        OSError(err); a pwrite's first ``written`` bytes land before the error."""
        self._faults.append(_Fault(op, err, path_contains, times, written))

    def clear_faults(self) -> None:
        self._faults.clear()
        self._crash_at = None

    @property
    def dead(self) -> bool:
        return self._dead

    def kill(self) -> None:
        self._dead = True

    def _op(self, name: str, path: str = "") -> None:
        if self._dead:
            raise SimulatedCrash(f"file system of a crashed process ({name})")
        self.stats.ops += 1
        if self._crash_at is not None and self.stats.ops >= self._crash_at:
            self._dead = True
            self._landed = self._crash_torn
            raise SimulatedCrash(f"crash injected at operation {self.stats.ops} ({name} {path})")
        for f in self._faults:
            if f.times > 0 and f.op == name and f.path_contains in path:
                f.times -= 1
                self.stats.faults_raised += 1
                self._landed = f.written
                raise OSError(f.err, f"{os.strerror(f.err)} (injected on {name})", path)

    def _used(self) -> int:
        return sum(len(n.data) for n in self.files.values()) + sum(len(n.data) for n in self.orphans.values())

    def _unlinked(self, n: _Node | None) -> None:
        if n is not None and n.opens > 0:
            self.orphans[id(n)] = n

    def _need(self, extra: int) -> None:
        if extra > 0 and self._used() + extra > self.capacity_bytes:
            raise OSError(errno.ENOSPC, "No space left on device (simulated)")

    # Namespace --------------------------------------------------------------------
    def makedirs(self, path: str) -> None:
        with self._lock:
            self._op("makedirs", path)
            p = _norm(path)
            while p not in self.dirs:
                self.dirs.add(p)
                p = os.path.dirname(p)

    def listdir(self, path: str) -> list[str]:
        with self._lock:
            self._op("listdir", path)
            p = _norm(path)
            if p not in self.dirs:
                raise FileNotFoundError(errno.ENOENT, "No such directory", path)
            out = {os.path.basename(f) for f in self.files if os.path.dirname(f) == p}
            out |= {os.path.basename(d) for d in self.dirs if d != p and os.path.dirname(d) == p}
            return sorted(out)

    def exists(self, path: str) -> bool:
        with self._lock:
            self._op("exists", path)
            p = _norm(path)
            return p in self.files or p in self.dirs

    def is_dir(self, path: str) -> bool:
        with self._lock:
            self._op("is_dir", path)
            return _norm(path) in self.dirs

    def file_size(self, path: str) -> int:
        with self._lock:
            self._op("file_size", path)
            n = self.files.get(_norm(path))
            if n is None:
                raise FileNotFoundError(errno.ENOENT, "No such file", path)
            return len(n.data)

    def mtime_ms(self, path: str) -> int:
        with self._lock:
            self._op("mtime_ms", path)
            if _norm(path) not in self.files:
                raise FileNotFoundError(errno.ENOENT, "No such file", path)
            return self.mtime_now_ms

    mtime_now_ms = 0   # tests set the time loaded segments seem to have been written

    def open(self, path: str, create: bool = False, readonly: bool = False) -> _Handle:
        with self._lock:
            self._op("open", path)
            p = _norm(path)
            if os.path.dirname(p) not in self.dirs:
                raise FileNotFoundError(errno.ENOENT, "No such directory", path)
            n = self.files.get(p)
            if n is None:
                if not create:
                    raise FileNotFoundError(errno.ENOENT, "No such file", path)
                n = self.files[p] = _Node()
                self.names_pending.append(("link", p, n))
            n.opens += 1
            return _Handle(p, n, self._gen)

    def close(self, handle: _Handle) -> None:
        with self._lock:
            self._op("close", handle.path)
            n = handle.node
            n.opens = max(0, n.opens - 1)
            if n.opens == 0:
                self.orphans.pop(id(n), None)

    def rename(self, src: str, dst: str) -> None:
        with self._lock:
            self._op("rename", src)
            s, d = _norm(src), _norm(dst)
            n = self.files.pop(s, None)
            if n is None:
                raise FileNotFoundError(errno.ENOENT, "No such file", src)
            self._unlinked(self.files.get(d))
            self.files[d] = n
            self.names_pending.append(("rename", s, d))

    def unlink(self, path: str) -> None:
        with self._lock:
            self._op("unlink", path)
            p = _norm(path)
            n = self.files.pop(p, None)
            if n is None:
                raise FileNotFoundError(errno.ENOENT, "No such file", path)
            self._unlinked(n)
            self.names_pending.append(("unlink", p, None))

    def rmtree(self, path: str) -> None:
        with self._lock:
            self._op("rmtree", path)
            p = _norm(path)
            for f in [f for f in self.files if f == p or f.startswith(p + os.sep)]:
                self._unlinked(self.files.pop(f))
                self.names_pending.append(("unlink", f, None))
            for d in [d for d in self.dirs if d == p or d.startswith(p + os.sep)]:
                self.dirs.discard(d)

    @staticmethod
    def _apply_names(ns: dict, changes) -> None:
        for op, a, b in changes:
            if op == "link":
                ns[a] = b
            elif op == "rename":
                if a in ns:
                    ns[b] = ns.pop(a)
                else:
                    ns.pop(b, None)
            else:
                ns.pop(a, None)

    def _commit_names(self) -> None:
        """The journal commits: every change of names so far is durable."""
        self._apply_names(self.durable_files, self.names_pending)
        self.names_pending = []

    def fsync_dir(self, path: str) -> None:
        with self._lock:
            self._op("fsync_dir", path)
            self._commit_names()

    def sync_filesystem(self, path: str) -> None:
        with self._lock:
            self._op("sync_filesystem", path)
            for p, n in self.files.items():
                n.write_back()
            self._commit_names()

    def disk_usage(self, path: str) -> DiskUsage:
        with self._lock:
            self._op("disk_usage", path)
            used = self._used()
            return DiskUsage(self.capacity_bytes, used, max(0, self.capacity_bytes - used))

    # Contents ---------------------------------------------------------------------
    def _live(self, h: _Handle, name: str) -> _Node:
        self._op(name, h.path)
        if h.gen != self._gen:
            raise SimulatedCrash("handle of a crashed process")
        return h.node

    def allocate(self, handle: _Handle, size: int) -> None:
        with self._lock:
            n = self._live(handle, "allocate")
            if len(n.data) < size:
                self._need(size - len(n.data))
                n.data.extend(bytes(size - len(n.data)))

    def truncate(self, handle: _Handle, size: int) -> None:
        with self._lock:
            n = self._live(handle, "truncate")
            n.written(size, max(len(n.data), size) - size + PAGE)
            if len(n.data) > size:
                del n.data[size:]
            else:
                self._need(size - len(n.data))
                n.data.extend(bytes(size - len(n.data)))

    def zero_range(self, handle: _Handle, offset: int, length: int) -> None:
        with self._lock:
            n = self._live(handle, "zero_range")
            end = min(len(n.data), offset + length)
            if end > offset:
                n.data[offset:end] = bytes(end - offset)
                n.written(offset, end - offset)

    def size_of(self, handle: _Handle) -> int:
        with self._lock:
            return len(self._live(handle, "size_of").data)

    def pwrite(self, handle: _Handle, data, offset: int) -> int:
        with self._lock:
            self._landed = 0
            try:
                n = self._live(handle, "pwrite")
            except BaseException:
                if self._landed > 0 and handle.gen == self._gen:     # torn: its first bytes landed
                    node = handle.node
                    end = min(len(node.data), offset + min(self._landed, len(data)))
                    if end > offset:
                        node.data[offset:end] = bytes(memoryview(data)[:end - offset])
                        self.stats.bytes_written += end - offset
                raise
            b = bytes(data)
            end = offset + len(b)
            if end > len(n.data):
                self._need(end - len(n.data))
                n.data.extend(bytes(end - len(n.data)))
            n.data[offset:end] = b
            n.written(offset, len(b))
            self.stats.bytes_written += len(b)
            return len(b)

    def pread(self, handle: _Handle, size: int, offset: int) -> bytes:
        with self._lock:
            n = self._live(handle, "pread")
            return bytes(n.data[offset:offset + size])

    def fsync(self, handle: _Handle) -> None:
        with self._lock:
            try:
                n = self._live(handle, "fsync")
            except OSError:
                if handle.gen == self._gen:           # an injected failure: the writeback failed
                    self.stats.pages_dropped += handle.node.writeback_failed(self.rng, self.drop_ratio)
                raise
            n.write_back()
            n.synced_once = True
            self._commit_names()                     # ext4: the fsync commits the journal (the new entry too)
            self.stats.fsyncs += 1

    def map(self, handle: _Handle, size: int, readonly: bool = False):
        with self._lock:
            n = self._live(handle, "map")
            if len(n.data) < size:
                raise OSError(errno.EINVAL, "mapping past the end of the file", handle.path)
            return n.data

    def unmap(self, mapping) -> None:
        pass

    def populate(self, mapping, offset: int, length: int) -> int:
        """Nothing to warm in memory (and not an operation: a warming thread must not move
        the operation count that crash_after() and the seeded simulation depend on)."""
        return 0

    def read_ahead(self, mapping, offset: int, length: int) -> None:
        """Nothing to read in (and not an operation, as populate)."""

    def lock(self, path: str) -> "_LockHandle":
        """An exclusive lock held in memory, like OsFileIO's flock: a second lock of the same path
        on this file system (a second store on the same root) raises LockedError until unlock().
        A crash releases every lock (after_crash / after_power_loss start with none held), as the
        kernel drops a dead process's flocks. No lock file is written (the namespace and the
        operation count stay what they were before locks were kept)."""
        with self._lock:
            self._op("lock", path)
            p = _norm(path)
            if p in self.locks:
                raise LockedError(f"{os.path.dirname(path) or '.'} is in use by another process (lock file {path})")
            h = _LockHandle(p)
            self.locks[p] = h
            return h

    def unlock(self, handle: "_LockHandle") -> None:
        with self._lock:
            if self.locks.get(handle.path) is handle:
                del self.locks[handle.path]

    # Crashes ----------------------------------------------------------------------
    def after_crash(self) -> "FaultyFileIO":
        """kill -9: the page cache survives (and the changes of names the journal has not committed
        yet: the kernel still has them). The old instance is dead."""
        with self._lock:
            self._dead = True
            new = FaultyFileIO(self.capacity_bytes)
            new.rng, new.drop_ratio = self.rng, self.drop_ratio
            new.dirs = set(self.dirs)
            copies: dict[int, _Node] = {}

            def copy(n: _Node) -> _Node:
                c = copies.get(id(n))
                if c is None:
                    c = copies[id(n)] = _Node(bytearray(n.data), n.durable)
                    c.stale = dict(n.stale)         # the page cache survives: clean pages not on disk too
                return c

            for p, n in self.files.items():
                new.files[p] = copy(n)
            for p, n in self.durable_files.items():
                new.durable_files[p] = copy(n)
            new.names_pending = [(op, a, copy(b) if isinstance(b, _Node) else b) for op, a, b in self.names_pending]
            return new

    def after_power_loss(self, rng: random.Random) -> "FaultyFileIO":
        """Power loss: what was not made durable survives in any part, or not at all; of the changes
        of names not committed, a prefix (in order)."""
        with self._lock:
            self._dead = True
            new = FaultyFileIO(self.capacity_bytes)
            new.rng, new.drop_ratio = self.rng, self.drop_ratio
            new.dirs = set(self.dirs)
            ns = dict(self.durable_files)
            self._apply_names(ns, self.names_pending[:rng.randint(0, len(self.names_pending))])
            made: dict[int, _Node] = {}
            for p in sorted(ns):
                node = ns[p]
                m = made.get(id(node))
                if m is None:
                    content = self._survivor(node, rng)
                    m = made[id(node)] = _Node(bytearray(content), content)
                new.files[p] = new.durable_files[p] = m
            return new

    @staticmethod
    def _survivor(node: _Node, rng: random.Random) -> bytes:
        new, old = node.dirty_view(), node.durable        # a stale page is lost: the disk has its old bytes
        if new == old:
            return new
        length = len(new) if len(new) == len(old) else rng.choice((len(new), len(old)))
        out = bytearray(old[:length].ljust(length, b"\0"))
        for page in range(0, length, PAGE):
            a = new[page:page + PAGE]
            b = bytes(out[page:page + PAGE])
            if a[:len(b)] == b:
                continue
            r = rng.random()
            if r < 0.4:
                out[page:page + len(b)] = a[:len(b)]
            elif r < 0.6:
                cut = rng.randrange(len(b) + 1)
                out[page:page + cut] = a[:cut]
        return bytes(out)

    # Test helpers -----------------------------------------------------------------
    def remove_tree(self, path: str) -> None:
        """Delete a directory tree durably (a test losing ``consumequeue/``)."""
        with self._lock:
            p = _norm(path)
            for f in [f for f in self.files if f.startswith(p + os.sep)]:
                del self.files[f]
            for f in [f for f in self.durable_files if f.startswith(p + os.sep)]:
                del self.durable_files[f]
            self.names_pending = [c for c in self.names_pending
                                  if not any(isinstance(x, str) and x.startswith(p + os.sep) for x in c[1:])]
            self.dirs = {d for d in self.dirs if not (d == p or d.startswith(p + os.sep))}
