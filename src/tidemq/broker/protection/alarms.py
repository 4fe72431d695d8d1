"""Resource alarms, after RabbitMQ's memory and disk alarms.

    memory  the broker's own resident memory passes the high watermark
            (memory_high_watermark_ratio of RAM, or memory_high_watermark_bytes)
    disk    free space falls under disk_free_limit_bytes (default: two commit-log segments)
            where writes need it: in *every* commit-log directory that can take a new segment
            (one with room is enough: new segments go there), or under the store's other
            directories (root, consume queues, index) on a file system of their own

While an alarm is raised, sends are held and then refused (``flow.SendGate``);
receives, pulls and acks go on, so consumers can drain the backlog. An alarm
clears by itself at the first check that finds the reading back on the safe
side of its limit (no hysteresis, like RabbitMQ).

Resident memory is read from ``/proc/self/statm`` as *resident minus shared*
pages: the memory the broker allocated itself. The shared part is file-backed
pages, mostly the mapped commit-log segments; they are page cache the kernel
reclaims, and counting them would raise the alarm on every broker whose log
grows past the watermark. RAM is the smaller of the physical memory and the
cgroup's limit (v2 ``memory.max``, v1 ``memory.limit_in_bytes``).

Check interval (RabbitMQ's rabbit_disk_monitor): the time the distance between
reading and limit would take to close at FAST_RATE_BYTES_PER_S, doubled, kept
within [interval_min_s, interval_max_s] (defaults 0.1 s and 10 s). Far from
its limits the broker checks every 10 s; near one, every 100 ms.

An alarm that holds writes must be one that something will clear. Consuming frees nothing in
this store (the log is kept by time, as RocketMQ's), so for each directory the limit is capped at
the free space the directory has at its clean-forcibly ratio (85 %): the alarm can only hold writes
once segments are deleted for space, which frees it; a small disk with a large limit would
otherwise be held for good at 50 % (``DiskReading.cap_bytes``).

Readings come from callables and time from a ``Clock``: tests give fakes.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Callable, Mapping

from ...io import Clock

log = logging.getLogger("tidemq.broker")

FAST_RATE_BYTES_PER_S = 250 * 1024 * 1024   # RabbitMQ's ?FAST_RATE: how fast a disk (or memory) can fill
MIB = 1024 * 1024


def human(n: float) -> str:
    """Bytes for a person: 1.5 GiB, 80.0 MiB, 512 B."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def read_rss_bytes(statm: str = "/proc/self/statm") -> int:
    """Resident minus shared (file-backed) pages of this process, in bytes."""
    with open(statm) as f:
        fields = f.read().split()
    return (int(fields[1]) - int(fields[2])) * os.sysconf("SC_PAGE_SIZE")


def total_memory_bytes(cgroup_root: str = "/sys/fs/cgroup") -> int:
    """Physical RAM, or the cgroup's memory limit when that is smaller."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    for name in ("memory.max", "memory/memory.limit_in_bytes"):
        try:
            with open(os.path.join(cgroup_root, name)) as f:
                v = f.read().strip()
        except OSError:
            continue
        if v.isdigit() and 0 < int(v) < total:
            total = int(v)
    return total


@dataclass
class DiskReading:
    """Free bytes of one directory; ``cap_bytes`` caps the limit it is judged against (None: the
    configured limit); readings of one ``group`` ("commitlog") alarm only when all of them do."""
    where: str
    free_bytes: int
    cap_bytes: int | None = None
    group: str | None = None


@dataclass
class AlarmState:
    resource: str                 # "memory" | "disk"
    raised: bool = False
    reading_bytes: int = 0        # memory: resident bytes; disk: the smallest free bytes
    limit_bytes: int = 0
    where: str = ""               # disk: the directory with the least free space
    message: str = ""
    raised_count: int = 0

    def as_dict(self) -> dict:
        return {"resource": self.resource, "raised": self.raised, "reading_bytes": self.reading_bytes,
                "limit_bytes": self.limit_bytes, "where": self.where, "message": self.message,
                "raised_count": self.raised_count}


class ResourceAlarms:
    """The memory and disk alarms of one broker; ``check()`` measures once and says when to check next."""

    def __init__(self, memory_limit_bytes: int, disk_free_limit_bytes: int, read_memory: Callable[[], int],
                 read_free: Callable[[], Mapping[str, int]], clock: Clock, interval_min_s: float = 0.1,
                 interval_max_s: float = 10.0, memory_limit_doc: str = "") -> None:
        self.memory_limit_bytes = memory_limit_bytes
        self.memory_limit_doc = memory_limit_doc
        self.disk_free_limit_bytes = disk_free_limit_bytes
        self.read_memory = read_memory
        self.read_free = read_free
        self.clock = clock
        self.interval_min_s = interval_min_s
        self.interval_max_s = max(interval_min_s, interval_max_s)
        self.memory = AlarmState("memory")
        self.disk = AlarmState("disk")
        self.next_check_s = clock.monotonic_s()
        self.checks = 0
        self.refusal: str | None = None   # what a refused send is told; None while no alarm is raised
        self._lock = threading.Lock()     # the periodic check and an admin's change may run at once

    def set_limits(self, memory_limit_bytes: int | None = None, disk_free_limit_bytes: int | None = None,
                   memory_limit_doc: str = "") -> None:
        """Change the limits at run time (RabbitMQ's set_vm_memory_high_watermark / set_disk_free_limit);
        the next check is due at once."""
        if memory_limit_bytes is not None:
            self.memory_limit_bytes = memory_limit_bytes
            self.memory_limit_doc = memory_limit_doc
        if disk_free_limit_bytes is not None:
            self.disk_free_limit_bytes = disk_free_limit_bytes
        self.next_check_s = self.clock.monotonic_s()

    def due(self) -> bool:
        return self.clock.monotonic_s() >= self.next_check_s

    def check(self) -> float:
        """Measure memory and disk, raise or clear the alarms; returns seconds until the next check."""
        with self._lock:
            return self._check()

    def _check(self) -> float:
        self.checks += 1
        distances: list[float] = []
        try:
            rss = self.read_memory()
        except (OSError, ValueError, IndexError) as e:
            log.warning("memory alarm: cannot read resident memory: %s", e)
        else:
            limit = self.memory_limit_bytes
            doc = f" ({self.memory_limit_doc})" if self.memory_limit_doc else ""
            self._update(self.memory, rss > limit, rss, limit, "",
                         f"memory alarm: broker resident memory {human(rss)} > high watermark {human(limit)}{doc}")
            distances.append(abs(rss - limit))
        judged = self._judge(self._free())
        if judged:
            over, where, least, limit = judged
            self._update(self.disk, over, least, limit, where,
                         f"disk alarm: free {human(least)} < disk_free_limit_bytes {human(limit)}"
                         f"{'' if limit == self.disk_free_limit_bytes else ' (capped at the clean-forcibly ratio)'}"
                         f" under {where}")
            distances.append(abs(least - limit))
        raised = [a.message for a in (self.memory, self.disk) if a.raised]
        self.refusal = "; ".join(raised) + "; sends resume when it clears" if raised else None
        interval = self.interval_max_s
        if distances:
            ideal = 2 * min(distances) / FAST_RATE_BYTES_PER_S
            interval = max(self.interval_min_s, min(self.interval_max_s, ideal))
        self.next_check_s = self.clock.monotonic_s() + interval
        return interval

    def _free(self) -> list[DiskReading]:
        try:
            got = self.read_free()
        except OSError as e:
            log.warning("disk alarm: cannot measure free space: %s", e)
            return []
        if isinstance(got, Mapping):              # {where: free bytes}: each judged alone
            return [DiskReading(w, f) for w, f in got.items()]
        return list(got)

    def _judge(self, readings: list[DiskReading]) -> tuple[bool, str, int, int] | None:
        """(raised, where, free, limit) of the reading that decides: the worst of those judged
        alone, or of a group its best member (a group is over only when every member is)."""
        if not readings:
            return None
        base = self.disk_free_limit_bytes

        def limit(r: DiskReading) -> int:
            return base if r.cap_bytes is None else max(0, min(base, r.cap_bytes))

        deciders: list[DiskReading] = []
        groups: dict[str, list[DiskReading]] = {}
        for r in readings:
            if r.group:
                groups.setdefault(r.group, []).append(r)
            else:
                deciders.append(r)
        for members in groups.values():
            deciders.append(max(members, key=lambda r: r.free_bytes - limit(r)))
        worst = min(deciders, key=lambda r: r.free_bytes - limit(r))
        return worst.free_bytes < limit(worst), worst.where, worst.free_bytes, limit(worst)

    @staticmethod
    def _update(a: AlarmState, over: bool, reading: int, limit: int, where: str, message: str) -> None:
        a.reading_bytes, a.limit_bytes, a.where = reading, limit, where
        if over:
            a.message = message
            if not a.raised:
                a.raised = True
                a.raised_count += 1
                log.warning("%s: sends are held, then refused; receives and acks go on", message)
        elif a.raised:
            a.raised = False
            log.warning("%s alarm cleared: %s %s, limit %s", a.resource,
                        "resident" if a.resource == "memory" else "free", human(reading), human(limit))
            a.message = ""

    def status(self) -> dict:
        return {"memory": self.memory.as_dict(), "disk": self.disk.as_dict(), "refusal": self.refusal,
                "checks": self.checks}


def store_disk_reader(commitlog_dirs: Callable[[], list[str]], other_dirs: list[str], disk_usage,
                      thresholds: Callable[[str], tuple[int, int]]) -> Callable[[], list[DiskReading]]:
    """The readings the disk alarm judges for a store: the commit-log directories that can take a
    new segment, as one group, and the other directories on file systems without a commit-log
    directory (the first path names a file system). ``commitlog_dirs()`` (asked at every check)
    names the ones neither offline nor read-only; which of them can take a new segment is judged
    from the same reading as their free space, as the store places segments: those below their
    clean-forcibly ratio, or, when none is, those below their warning ratio (``thresholds(dir)``:
    (clean-forcibly %, warning %)). (The store's own view of a directory can be a moment older than
    the reading: judged from it, a directory that just filled past its clean-forcibly ratio raised
    the alarm for a moment while another one had room.) Every limit is capped at the free space the
    directory has at its clean-forcibly ratio."""
    def read() -> list[DiskReading]:
        out: list[DiskReading] = []
        devices: set[int] = set()
        usable = []
        for d in commitlog_dirs():
            try:
                u = disk_usage(d)
                devices.add(os.stat(d).st_dev)
            except OSError:
                continue      # the store's disk monitor takes it offline
            usable.append((d, u, *thresholds(d)))
        below = [x for x in usable if 100.0 * x[1].used_ratio < x[2]]
        for d, u, forcibly, _warning in below or [x for x in usable if 100.0 * x[1].used_ratio < x[3]]:
            out.append(DiskReading(d, u.free_bytes, _cap(u.total_bytes, forcibly), "commitlog"))
        for d in other_dirs:
            try:
                dev = os.stat(d).st_dev
                if dev in devices:
                    continue
                devices.add(dev)
                u = disk_usage(d)
            except OSError:
                continue
            out.append(DiskReading(d, u.free_bytes, _cap(u.total_bytes, thresholds(d)[0])))
        return out
    return read


def _cap(total_bytes: int, forcibly_percent: int) -> int:
    return total_bytes * (100 - forcibly_percent) // 100
