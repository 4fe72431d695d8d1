"""The FileIO and Clock seams.

Every file operation of the store goes through a :class:`FileIO`; every reading
of the time through a :class:`Clock`. Production code uses :class:`OsFileIO` and
:class:`SystemClock`; tests substitute a fault-injecting file layer
(``tidemq.testing.faulty_io.FaultyFileIO``) and a :class:`ManualClock`.

Handles are opaque: ``OsFileIO`` uses integer file descriptors, an in-memory
implementation may use objects. A *mapping* is anything that supports the
writable buffer protocol (``mmap.mmap`` for real files, ``bytearray`` for the
simulated ones); the store reads records through it, writes a batch of records with
:meth:`FileIO.pwrite` of the handle (the same page cache: the mapping sees them at once)
and a single record into it, and makes both durable with :meth:`FileIO.fsync` of the handle.

Errors are ``OSError`` with the real errno (ENOSPC, EIO, ENOENT, ...); the store
turns them into typed statuses.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import logging
import mmap
import os
import shutil
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class DiskUsage:
    total_bytes: int
    used_bytes: int
    free_bytes: int

    @property
    def used_ratio(self) -> float:
        return self.used_bytes / self.total_bytes if self.total_bytes else 1.0


log = logging.getLogger("tidemq.io")

_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_FALLOC_FL_ZERO_RANGE = 0x10
_libc = None

# madvise(2) advice that takes the write faults of a range now, without changing a byte
# (Linux 5.14+; older kernels answer EINVAL). Failures come back as an errno (EFAULT: a page
# could not be backed, e.g. a full tmpfs), never as SIGBUS.
MADV_POPULATE_WRITE = 23
PAGE_SIZE = mmap.PAGESIZE
_POPULATE_UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)


def _load_libc():
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _libc = libc
    return _libc


def _fallocate(fd: int, mode: int, offset: int, length: int) -> bool:
    """libc fallocate(2) with a mode (os.posix_fallocate has none). False if unsupported."""
    try:
        return _load_libc().fallocate(fd, mode, offset, length) == 0
    except (OSError, AttributeError):
        return False


class LockedError(RuntimeError):
    """The store root is held by another process."""


class FileIO(Protocol):
    """The file operations the store uses, and nothing else."""

    def makedirs(self, path: str) -> None: ...
    def listdir(self, path: str) -> list[str]: ...
    def exists(self, path: str) -> bool: ...
    def is_dir(self, path: str) -> bool: ...
    def file_size(self, path: str) -> int: ...
    def mtime_ms(self, path: str) -> int: ...
    def open(self, path: str, create: bool = False, readonly: bool = False) -> Any: ...
    def close(self, handle: Any) -> None: ...
    def allocate(self, handle: Any, size: int) -> None: ...
    def truncate(self, handle: Any, size: int) -> None: ...
    def zero_range(self, handle: Any, offset: int, length: int) -> None: ...
    def size_of(self, handle: Any) -> int: ...
    def pwrite(self, handle: Any, data: bytes | memoryview, offset: int) -> int: ...
    def pread(self, handle: Any, size: int, offset: int) -> bytes: ...
    def fsync(self, handle: Any) -> None: ...
    def map(self, handle: Any, size: int, readonly: bool = False) -> Any: ...
    def unmap(self, mapping: Any) -> None: ...
    def populate(self, mapping: Any, offset: int, length: int) -> int: ...
    def read_ahead(self, mapping: Any, offset: int, length: int) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def unlink(self, path: str) -> None: ...
    def rmtree(self, path: str) -> None: ...
    def fsync_dir(self, path: str) -> None: ...
    def sync_filesystem(self, path: str) -> None: ...
    def disk_usage(self, path: str) -> DiskUsage: ...
    def lock(self, path: str) -> Any:
        """Take an exclusive lock named by ``path`` (the store root's lock file) for this holder,
        or raise LockedError when another holder has it. Returns a handle for unlock()."""
        ...
    def unlock(self, handle: Any) -> None: ...


class OsFileIO:
    """The real file system."""

    # how populate() warms pages: "madvise" (MADV_POPULATE_WRITE), "willneed" (the kernel lacks
    # that advice), "none" (neither works). Per instance, set when it falls back.
    populate_mode = "madvise"

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def file_size(self, path: str) -> int:
        return os.stat(path).st_size

    def mtime_ms(self, path: str) -> int:
        return os.stat(path).st_mtime_ns // 1_000_000

    def open(self, path: str, create: bool = False, readonly: bool = False) -> int:
        flags = (os.O_RDONLY if readonly else os.O_RDWR) | (os.O_CREAT if create else 0)
        return os.open(path, flags, 0o644)

    def close(self, handle: int) -> None:
        os.close(handle)

    def allocate(self, handle: int, size: int) -> None:
        # posix_fallocate reserves real blocks: a later write into the mapping can
        # never hit ENOSPC (which would be a SIGBUS through mmap).
        os.posix_fallocate(handle, 0, size)

    def truncate(self, handle: int, size: int) -> None:
        os.ftruncate(handle, size)

    def zero_range(self, handle: int, offset: int, length: int) -> None:
        """Make [offset, offset+length) read as zeroes and stay allocated, without
        writing the bytes: FALLOC_FL_ZERO_RANGE, else punch a hole and allocate it
        again; writing zeroes is the last resort."""
        if length <= 0:
            return
        if _fallocate(handle, _FALLOC_FL_ZERO_RANGE | _FALLOC_FL_KEEP_SIZE, offset, length):
            return
        if _fallocate(handle, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length):
            os.posix_fallocate(handle, offset, length)
            return
        step = 1 << 20
        zeros = bytes(step)
        end = offset + length
        while offset < end:
            n = min(step, end - offset)
            os.pwrite(handle, zeros[:n], offset)
            offset += n

    def size_of(self, handle: int) -> int:
        return os.fstat(handle).st_size

    def pwrite(self, handle: int, data: bytes | memoryview, offset: int) -> int:
        n = os.pwrite(handle, data, offset)
        if n == len(data):        # (the common case: all of it in one call, no view nor loop)
            return n
        if n <= 0:
            raise OSError(5, "short write")
        view = memoryview(data)
        written = n
        while written < len(view):
            n = os.pwrite(handle, view[written:], offset + written)
            if n <= 0:
                raise OSError(5, "short write")
            written += n
        return written

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        return os.pread(handle, size, offset)

    def fsync(self, handle: int) -> None:
        # fdatasync releases the GIL (mmap.flush does not), so writers keep
        # appending while a group commit is on its way to the disk.
        os.fdatasync(handle)

    def map(self, handle: int, size: int, readonly: bool = False) -> mmap.mmap:
        prot = mmap.PROT_READ if readonly else mmap.PROT_READ | mmap.PROT_WRITE
        return mmap.mmap(handle, size, flags=mmap.MAP_SHARED, prot=prot)

    def unmap(self, mapping: mmap.mmap) -> None:
        mapping.close()

    def populate(self, mapping: mmap.mmap, offset: int, length: int) -> int:
        """Take the page faults of a first write to [offset, offset+length) of a writable mapping
        now, changing no byte, so a writer later finds the pages present and writable. Returns the
        bytes populated (0: this mapping or layer cannot, e.g. read-only). ``offset`` is page-aligned.

        madvise(MADV_POPULATE_WRITE) through ctypes, which releases the GIL (mmap.madvise holds
        it for the whole call: ~4 ms per MiB the writer could not run). Where the kernel lacks the
        advice (EINVAL, ENOSYS, EOPNOTSUPP, and a probe on an anonymous page fails too), MADV_WILLNEED
        instead: the page-cache pages are read in (zero-filled for a fallocated range) and the
        writer takes only the cheaper fault that maps them. Not a read of every page: on a tmpfs
        that is full, reading a page of a hole SIGBUSes; advice only ever answers an errno.
        Safe while a writer appends into the same range: nothing is written. Raises OSError when
        a page cannot be backed (EFAULT, ENOMEM): the caller skips the range, nothing crashes."""
        if offset % PAGE_SIZE:
            raise ValueError(f"populate offset {offset} is not page-aligned")
        length = min(length, len(mapping) - offset)
        if length <= 0 or self.populate_mode == "none":
            return 0
        try:
            # an export of the mapping: closing it meanwhile (a forced delete) waits for this call
            view = (ctypes.c_char * length).from_buffer(mapping, offset)
        except TypeError:
            return 0                         # a read-only mapping: nothing to warm
        try:
            address = ctypes.addressof(view)
            if self.populate_mode == "madvise":
                err = self._madvise(address, length, MADV_POPULATE_WRITE)
                if err == 0:
                    return length
                if err not in _POPULATE_UNSUPPORTED or self._populate_supported():
                    raise OSError(err, f"madvise(MADV_POPULATE_WRITE): {os.strerror(err)}")
                log.warning("madvise(MADV_POPULATE_WRITE) is not supported here (%s): segment pages are "
                            "warmed with MADV_WILLNEED instead", errno.errorcode.get(err, err))
                self.populate_mode = "willneed"
            err = self._madvise(address, length, mmap.MADV_WILLNEED)
            if err == 0:
                return length
            if err in _POPULATE_UNSUPPORTED:
                log.warning("madvise(MADV_WILLNEED) failed too (%s): segment pages are not warmed",
                            errno.errorcode.get(err, err))
                self.populate_mode = "none"
                return 0
            raise OSError(err, f"madvise(MADV_WILLNEED): {os.strerror(err)}")
        finally:
            del view

    def read_ahead(self, mapping: mmap.mmap, offset: int, length: int) -> None:
        """Ask the kernel to start reading [offset, offset+length) of a mapping in (MADV_WILLNEED:
        it returns at once; the pages come in while the caller reads the ones before). Advice only:
        an errno is ignored, nothing is read or written here."""
        start = offset - offset % PAGE_SIZE
        length = min(length + offset - start, len(mapping) - start)
        if length <= 0:
            return
        try:
            mapping.madvise(mmap.MADV_WILLNEED, start, length)
        except (OSError, ValueError, AttributeError):
            pass

    @staticmethod
    def _madvise(address: int, length: int, advice: int) -> int:
        """madvise(2) without the GIL; 0 or the errno."""
        try:
            libc = _load_libc()
        except (OSError, AttributeError):
            return errno.ENOSYS
        if libc.madvise(address, length, advice) == 0:
            return 0
        return ctypes.get_errno()

    def _populate_supported(self) -> bool:
        """Does MADV_POPULATE_WRITE work at all (on one anonymous page)?"""
        probe = mmap.mmap(-1, PAGE_SIZE)
        try:
            view = ctypes.c_char.from_buffer(probe)
            try:
                return self._madvise(ctypes.addressof(view), PAGE_SIZE, MADV_POPULATE_WRITE) == 0
            finally:
                del view
        finally:
            probe.close()

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def rmtree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=False)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def lock(self, path: str) -> int:
        """Take the store's exclusive lock (one process per store root)."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LockedError(f"{os.path.dirname(path) or '.'} is in use by another process (lock file {path})")
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        return fd

    def unlock(self, handle: int) -> None:
        fcntl.flock(handle, fcntl.LOCK_UN)
        os.close(handle)

    def sync_filesystem(self, path: str) -> None:
        """Write back everything cached for the file system holding ``path`` (syncfs(2)).
        After a kill -9 the page cache still holds the dead process's writes: recovery
        makes them durable before it trusts them."""
        fd = os.open(path, os.O_RDONLY)
        try:
            if _load_libc().syncfs(fd) != 0:
                os.sync()
        except (OSError, AttributeError):
            os.sync()
        finally:
            os.close(fd)

    def disk_usage(self, path: str) -> DiskUsage:
        # as df computes Use%: capacity is what can be filled (used + available to us),
        # so 100 % means the next write gets ENOSPC (reserved root blocks excluded)
        st = os.statvfs(path)
        free = st.f_bavail * st.f_frsize
        used = (st.f_blocks - st.f_bfree) * st.f_frsize
        return DiskUsage(used + free, used, free)


def read_whole(fio: FileIO, path: str) -> bytes:
    """Read a small file whole."""
    h = fio.open(path)
    try:
        return fio.pread(h, fio.size_of(h), 0)
    finally:
        fio.close(h)


class NotDurable(OSError):
    """write_atomic: the new file is in place (a read finds it now) but the fsync of its directory
    failed after the rename, so whether the new name survives a crash is not known: after one,
    the old version or the new one may be found. Not a "nothing changed" (the caller must not
    say so) and not an OK (it must not say that either)."""


def write_atomic(fio: FileIO, path: str, data: bytes) -> None:
    """Write, fsync, rename, fsync the directory: the file is old or new, never torn. OSError
    before the rename: the old file is untouched; NotDurable: the rename was made, its durability
    is not known."""
    tmp = path + ".tmp"
    h = fio.open(tmp, create=True)
    try:
        fio.truncate(h, 0)
        fio.pwrite(h, data, 0)
        fio.fsync(h)
    finally:
        fio.close(h)
    fio.rename(tmp, path)
    try:
        fio.fsync_dir(os.path.dirname(path) or ".")
    except NotDurable:
        raise
    except OSError as e:
        raise NotDurable(e.errno, f"written, but its directory could not be made durable ({e.strerror or e}): "
                                  f"after a crash the old or the new version may be found", path) from e


class Clock(Protocol):
    def now_ms(self) -> int: ...
    def monotonic_s(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_s(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class ManualClock:
    """A clock that moves only when a test says so; sleep() advances it."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms
        self._mono_s = 1000.0
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now_ms

    def monotonic_s(self) -> float:
        with self._lock:
            return self._mono_s

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now_ms += round(seconds * 1000)
            self._mono_s += seconds

    def step_wall(self, seconds: float) -> None:
        """The wall clock steps (NTP, a VM resumed; back when negative); the monotonic clock does not."""
        with self._lock:
            self._now_ms += round(seconds * 1000)

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        time.sleep(0)
