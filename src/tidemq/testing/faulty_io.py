"""FaultyFileIO: an in-memory file system behind the FileIO seam, with seeded faults.

It keeps, for every file, what the page cache holds (``data``: what a reader or
a mapping sees) and what the disk holds (``durable``: what an fsync made
durable), and for every directory which entries a directory fsync (or, as on
ext4, an fsync of the file itself) made durable. From that it derives the two
kinds of crash:

* ``after_crash()`` (kill -9): the page cache survives; every write counts.
* ``after_power_loss(rng)``: for every file, each 4 KiB page that differs from
  the disk keeps the new bytes, the old bytes, or is torn at a random byte (so
  unsynced writes survive in any order, partly or not at all); file lengths and
  directory entries not yet made durable revert at random.

Both return a *new* FaultyFileIO holding the surviving state; the old one is
dead (every operation raises SimulatedCrash), so the threads of the crashed
store stop at their next file operation and their mappings no longer reach
the new "disk".

Injected faults (all deterministic): ``crash_after(n)`` — the n-th following
operation raises SimulatedCrash and kills the instance; ``fail(op, errno,
path_contains, times)`` — the named operation raises OSError; ``capacity_bytes``
— allocations and writes past it raise ENOSPC.

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
    __slots__ = ("data", "durable", "synced_once")

    def __init__(self, data: bytearray | None = None, durable: bytes = b"") -> None:
        self.data = _MappedBytes(data) if data is not None else _MappedBytes()
        self.durable = durable
        self.synced_once = False


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
    log: list = field(default_factory=list)


def _norm(path: str) -> str:
    return os.path.normpath(path)


class FaultyFileIO:
    def __init__(self, capacity_bytes: int = 1 << 40) -> None:
        self.files: dict[str, _Node] = {}          # current namespace
        self.durable_files: dict[str, _Node] = {}  # namespace as the disk knows it
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
        return sum(len(n.data) for n in self.files.values())

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
            return _Handle(p, n, self._gen)

    def close(self, handle: _Handle) -> None:
        with self._lock:
            self._op("close", handle.path)

    def rename(self, src: str, dst: str) -> None:
        with self._lock:
            self._op("rename", src)
            s, d = _norm(src), _norm(dst)
            n = self.files.pop(s, None)
            if n is None:
                raise FileNotFoundError(errno.ENOENT, "No such file", src)
            self.files[d] = n

    def unlink(self, path: str) -> None:
        with self._lock:
            self._op("unlink", path)
            if self.files.pop(_norm(path), None) is None:
                raise FileNotFoundError(errno.ENOENT, "No such file", path)

    def rmtree(self, path: str) -> None:
        with self._lock:
            self._op("rmtree", path)
            p = _norm(path)
            for f in [f for f in self.files if f == p or f.startswith(p + os.sep)]:
                del self.files[f]
            for d in [d for d in self.dirs if d == p or d.startswith(p + os.sep)]:
                self.dirs.discard(d)

    def fsync_dir(self, path: str) -> None:
        with self._lock:
            self._op("fsync_dir", path)
            p = _norm(path)
            for f in [f for f in self.durable_files if os.path.dirname(f) == p]:
                if self.files.get(f) is not self.durable_files[f]:
                    del self.durable_files[f]
            for f, n in self.files.items():
                if os.path.dirname(f) == p:
                    self.durable_files[f] = n

    def sync_filesystem(self, path: str) -> None:
        with self._lock:
            self._op("sync_filesystem", path)
            for p, n in self.files.items():
                n.durable = bytes(n.data)
            self.durable_files = dict(self.files)

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
            self.stats.bytes_written += len(b)
            return len(b)

    def pread(self, handle: _Handle, size: int, offset: int) -> bytes:
        with self._lock:
            n = self._live(handle, "pread")
            return bytes(n.data[offset:offset + size])

    def fsync(self, handle: _Handle) -> None:
        with self._lock:
            n = self._live(handle, "fsync")
            n.durable = bytes(n.data)
            n.synced_once = True
            self.durable_files[handle.path] = n      # ext4: fsync makes the new entry durable too
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
        """kill -9: the page cache survives. The old instance is dead."""
        with self._lock:
            self._dead = True
            new = FaultyFileIO(self.capacity_bytes)
            new.dirs = set(self.dirs)
            copies: dict[int, _Node] = {}
            for p, n in self.files.items():
                c = copies.setdefault(id(n), _Node(bytearray(n.data), n.durable))
                new.files[p] = c
            for p, n in self.durable_files.items():
                new.durable_files[p] = copies.get(id(n)) or _Node(bytearray(n.durable), n.durable)
            return new

    def after_power_loss(self, rng: random.Random) -> "FaultyFileIO":
        """Power loss: what was not made durable survives in any part, or not at all."""
        with self._lock:
            self._dead = True
            new = FaultyFileIO(self.capacity_bytes)
            new.dirs = set(self.dirs)
            names = set(self.files) | set(self.durable_files)
            for p in sorted(names):
                cur, dur = self.files.get(p), self.durable_files.get(p)
                if cur is dur:
                    node = cur
                elif rng.random() < 0.5:      # the directory change did not reach the disk
                    node = dur
                else:
                    node = cur
                if node is None:
                    continue
                content = self._survivor(node, rng)
                new.files[p] = new.durable_files[p] = _Node(bytearray(content), content)
            return new

    @staticmethod
    def _survivor(node: _Node, rng: random.Random) -> bytes:
        new, old = bytes(node.data), node.durable
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
            self.dirs = {d for d in self.dirs if not (d == p or d.startswith(p + os.sep))}
