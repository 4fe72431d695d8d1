"""Disk space: per-directory usage, states, the write flags, and the forecast.

Each store directory (every commit-log directory, read-only ones too, and the
consume-queue directory) is measured through the FileIO seam and gets a state:

    writable         takes new segments
    no-new-segments  above disk_space_clean_forcibly_percent: new segments go elsewhere
                     (unless every writable directory is above it)
    full             at or above disk_space_warning_level_percent
    read-only        configured read-only (readonly_commitlog_dirs)
    offline          missing, unmounted or failing I/O: reported once, no new segment goes there;
                     its segments are still read where the OS allows. It is probed again at every
                     check and comes back by itself once the probe passes (its marker is its own
                     again, it takes a write, its usage reads): reported once too
    failed           an fsync or write of the commit log failed there (store/log_failure.py):
                     like offline, but final for this run (what the failed fsync covered may be
                     gone: no probe brings it back; no new segment until a restart; read up to the
                     failed segment's durable end); a consume-queue or index directory whose fsync
                     failed shows it too, but keeps being written (derived data: rebuilt from
                     the log, never a reason to refuse puts)

Flags, with hysteresis so they never flap and never need a restart: a directory
becomes *full* at the warning ratio and stops being full once it is back under
the clean-forcibly ratio. Puts are refused (``write_refusal()``) while every
writable commit-log directory is full, offline or failed, or the consume-queue directory
is full; the message names the directories and their ratios or why they are out;
``refusal_failed`` says when no directory is merely full but one failed (the write path
answers WRITE_ERROR then, not DISK_FULL: no cleanup will make room).

A directory counts as unmounted when the marker file tidemq wrote into it at
start (``.tidemq-dir``, holding a random id) is gone or holds another id; the
marker is rewritten at every check, so a read-only remount or an EIO shows too.

An error that is not the disk's is never held against a directory: EMFILE / ENFILE (the process or
the system is out of file descriptors), ENOMEM, ENOBUFS, EAGAIN, EINTR while checking or writing
leave its state as it was (a warning, at most once a minute per directory); the next check tries
again. (Before, 366 idle connections to the metrics port at an open-file limit of 400 took the
commit log offline for good.)

Forecast: how fast each file system fills over the last minute (WINDOW_S) gives the
time until the three ratios are reached, per directory and overall (the commit-log file
systems together, each counted once), with one measure for both so they agree: the
growth of the file system's usage, less the segment bytes allocated ahead of the writes
(a preallocated segment is not the disk filling in a jump), so the commit log and
anything else written there count alike. The time to the warning ratio is zero while
writes are refused, or held for lack of space (``writes_held``, set by the broker's
disk alarm). The rates of ingest (commit-log bytes appended) and cleanup (bytes deleted)
give how long the disks hold data before the clean-forcibly ratio deletes it unexpired:
the answer to "when must we add disk?".
"""

from __future__ import annotations

import collections
import enum
import errno
import logging
import os
import threading
import uuid
from dataclasses import dataclass, field

from ..config import StoreConfig
from ..io import Clock, DiskUsage, FileIO
from ..words import human_bytes, human_seconds
from ..layout import DIR_MARKER

log = logging.getLogger("tidemq.store")

ERRORS_BEFORE_OFFLINE = 3
# errors of the process or the system, not of a disk: never a reason to take a directory offline
NOT_THE_DISKS = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS, errno.EAGAIN, errno.EINTR))
TRANSIENT_LOG_INTERVAL_S = 60.0


def disk_error(e: OSError) -> bool:
    """Whether an error says something about the disk (EIO, ENOENT, EROFS, ...), not about the
    process or the system (out of file descriptors or memory)."""
    return getattr(e, "errno", None) not in NOT_THE_DISKS
DERIVED_ROLES = ("consumequeue", "index")      # derived data written with every message
WINDOW_S = 60.0          # rates for the forecast: over the last minute


class DirState(str, enum.Enum):
    WRITABLE = "writable"
    NO_NEW_SEGMENTS = "no-new-segments"
    FULL = "full"
    READ_ONLY = "read-only"
    OFFLINE = "offline"
    FAILED = "failed"


@dataclass
class DirStatus:
    path: str
    role: str                        # commitlog | commitlog-readonly | consumequeue | index
    state: DirState = DirState.WRITABLE
    capacity_bytes: int = 0
    used_bytes: int = 0
    free_bytes: int = 0
    used_ratio_percent: float = 0.0
    thresholds_percent: tuple[int, int, int] = (75, 85, 90)
    segments: int = 0
    segment_bytes: int = 0
    offline_reason: str | None = None
    device: int | None = None        # st_dev: directories on one file system count once in the forecast
    growth_bytes_per_s: float = 0.0  # how fast its file system filled over the last WINDOW_S (negative: freed)
    unwritten_bytes: int = 0         # commit-log bytes allocated on its file system, not written yet
    seconds_until_percent: dict[int, float | None] = field(default_factory=dict)


@dataclass
class Forecast:
    ingest_bytes_per_s: float = 0.0
    cleanup_bytes_per_s: float = 0.0
    fill_bytes_per_s: float = 0.0    # the commit-log file systems together: what the times are from
    seconds_until_percent: dict[int, float | None] = field(default_factory=dict)
    retention_hours_possible: float | None = None
    file_reserved_time_hours: float = 72.0
    advice: str = ""


def _device(path: str) -> int | None:
    """The file system a directory is on (two disks of one size and usage are still two)."""
    try:
        return os.stat(path).st_dev
    except (OSError, ValueError):
        return None


class _Window:
    """The rate of a growing total over the last WINDOW_S seconds: a change of rate shows within
    the window (an average over minutes would hide it), and a stop shows as zero."""

    def __init__(self) -> None:
        self.samples: collections.deque[tuple[float, float]] = collections.deque()

    def observe(self, t: float, total: float) -> None:
        if self.samples and t - self.samples[-1][0] < 0.5:
            return
        self.samples.append((t, total))
        while len(self.samples) > 2 and t - self.samples[1][0] >= WINDOW_S:
            self.samples.popleft()

    @property
    def rate(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        (t0, v0), (t1, v1) = self.samples[0], self.samples[-1]
        return (v1 - v0) / (t1 - t0) if t1 > t0 else 0.0


class DiskMonitor:
    def __init__(self, config: StoreConfig, fio: FileIO, clock: Clock) -> None:
        self.config = config
        self.fio = fio
        self.clock = clock
        base = config.thresholds()
        per_dir = config.dir_thresholds()
        self.dirs: dict[str, DirStatus] = {}
        for d in config.commitlog_paths:
            self.dirs[d] = DirStatus(d, "commitlog", thresholds_percent=per_dir.get(os.path.normpath(d), base))
        for d in config.readonly_commitlog_dirs:
            self.dirs[d] = DirStatus(d, "commitlog-readonly", DirState.READ_ONLY,
                                     thresholds_percent=per_dir.get(os.path.normpath(d), base))
        cq = config.consumequeue_path
        self.dirs.setdefault(cq, DirStatus(cq, "consumequeue", thresholds_percent=per_dir.get(os.path.normpath(cq),
                                                                                                base)))
        if config.index_enabled:        # index files are written with every message too
            ix = config.index_path
            self.dirs.setdefault(ix, DirStatus(ix, "index", thresholds_percent=per_dir.get(os.path.normpath(ix),
                                                                                             base)))
        self._full: set[str] = set()
        self._offline: dict[str, str] = {}
        self._transient_logged: dict[str, float] = {}   # directory -> when an error not the disk's was logged
        self._failed: dict[str, str] = {}          # directories an fsync or write failed in (also in _offline
                                                   # for the commit log's: never probed back)
        self._markers: dict[str, bytes] = {}
        self._errors: dict[str, int] = {}          # consecutive I/O errors per directory
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()   # one measurement at a time: a late one never undoes a newer
        self._ingest = _Window()
        self._cleanup = _Window()
        self._growth: dict[str, _Window] = {d: _Window() for d in self.dirs}
        self._unwritten: dict[str, int] = {}       # commit-log directory -> bytes allocated, not written
        self.refusal: str | None = None
        self.refusal_failed = False      # refused because directories failed, none merely full (WRITE_ERROR)
        # set from outside while sends are held for lack of space (the broker's disk alarm): the
        # forecast then says the warning ratio's time is now, as while the store refuses writes
        self.writes_held: str | None = None

    def set_thresholds(self, config: StoreConfig) -> None:
        """The three ratios changed at run time (`tidemq config set`): every directory without a ratio
        of its own (per_dir_thresholds) takes the new ones; checked from the next disk check on."""
        base, per_dir = config.thresholds(), config.dir_thresholds()
        self.config = config
        for st in self.dirs.values():
            st.thresholds_percent = per_dir.get(os.path.normpath(st.path), base)

    # Markers and offline directories --------------------------------------------------
    def write_markers(self) -> None:
        for d, st in self.dirs.items():
            if st.role != "commitlog":
                continue
            token = uuid.uuid4().hex.encode()
            try:
                self._write_marker(d, token)
                self._markers[d] = token
            except OSError as e:
                if disk_error(e):
                    self.mark_offline(d, f"cannot write to it: {e}")
                else:
                    self._transient(d, e)          # the next check writes it

    def _write_marker(self, d: str, token: bytes) -> None:
        h = self.fio.open(os.path.join(d, DIR_MARKER), create=True)
        try:
            self.fio.truncate(h, 0)
            self.fio.pwrite(h, token, 0)
        finally:
            self.fio.close(h)

    def _check_marker(self, d: str) -> str | None:
        token = self._markers.get(d)
        if token is None:
            return None
        path = os.path.join(d, DIR_MARKER)
        try:
            h = self.fio.open(path)
        except FileNotFoundError:
            return "its marker file is gone: the directory was removed or its disk unmounted"
        try:
            if self.fio.pread(h, 64, 0) != token:
                return "its marker file changed: another disk is mounted there"
            self.fio.pwrite(h, token, 0)      # a read-only remount or a dying disk answers here
        finally:
            self.fio.close(h)
        return None

    def mark_offline(self, d: str, reason: str) -> None:
        """Take a directory offline, once (Kafka's log-dir failure handling)."""
        with self._lock:
            if d in self._offline:
                return
            self._offline[d] = reason
            st = self.dirs.get(d)
            if st is not None:
                st.state, st.offline_reason = DirState.OFFLINE, reason
        log.error("store directory %s is offline: %s. No new segments go there; its segments are read while "
                  "the OS allows; the store serves from the other directories.", d, reason)
        self._update_refusal()

    def _transient(self, d: str, e: OSError) -> None:
        """An error not the disk's met in ``d``: said at most once a minute, held against nothing."""
        now = self.clock.monotonic_s()
        if now - self._transient_logged.get(d, -TRANSIENT_LOG_INTERVAL_S) >= TRANSIENT_LOG_INTERVAL_S:
            self._transient_logged[d] = now
            log.warning("cannot check or write %s now: %s (the process or the system, not the disk: the directory "
                        "keeps its state; the next check tries again)", d, e)

    def mark_failed(self, d: str, reason: str) -> None:
        """An fsync or write failed in ``d`` (store/log_failure.py; the store for a consume-queue or
        index fsync). A commit-log directory is then out like an offline one, until a restart; a
        derived one only shows it (it keeps being written)."""
        st = self.dirs.get(d)
        with self._lock:
            if d in self._failed:
                return
            self._failed[d] = reason
            if st is not None:
                st.state, st.offline_reason = DirState.FAILED, reason
            out = st is None or st.role == "commitlog"
            if out:
                self._offline[d] = reason
        log.error("store directory %s failed: %s", d, reason)
        self._update_refusal()

    def failed(self) -> dict[str, str]:
        """directory -> why it failed (mark_failed), in this run."""
        return dict(self._failed)

    def report_error(self, d: str, e: OSError) -> None:
        """An I/O error in ``d`` (a segment could not be created there). One error is not a dead
        disk: the directory is probed now (marker rewrite, usage) and goes offline only if the
        probe fails too, or after errors_before_offline errors in a row. An error that is not the
        disk's (out of file descriptors or memory) counts for nothing."""
        st = self.dirs.get(d)
        if st is None or d in self._offline:
            return
        if not disk_error(e):
            self._transient(d, e)
            return
        n = self._errors.get(d, 0) + 1
        self._errors[d] = n
        try:
            problem = self._check_marker(d) if d in self._markers else None
            self.fio.disk_usage(d)
        except OSError as probe:
            if not disk_error(probe):
                self._transient(d, probe)
                return
            problem = f"I/O error: {e}; probe: {probe}"
        if problem or n >= ERRORS_BEFORE_OFFLINE:
            self.mark_offline(d, problem or f"I/O error {n} times in a row: {e}")
        else:
            log.warning("I/O error in %s (%s); the directory answers its probe, so it stays in service", d, e)

    def _new_marker(self, d: str) -> bytes:
        token = uuid.uuid4().hex.encode()
        self._write_marker(d, token)
        return token

    def _probe_back(self, d: str, st: DirStatus) -> bool:
        """Probe an offline directory: it comes back (True) once it is there, its marker is its own
        (or, never written, can be written now), it takes a write and its usage reads. A failed one
        never does (False): a failed fsync is final for this run."""
        if d in self._failed:
            return False
        try:
            if not self.fio.is_dir(d):
                return False
            if d in self._markers:
                if self._check_marker(d) is not None:
                    return False                   # gone, or another disk mounted there: stays offline
            elif st.role == "commitlog":
                token = self._new_marker(d)
                self._markers[d] = token
            self.fio.disk_usage(d)
        except OSError:
            return False                           # still failing (or out of descriptors): next check
        with self._lock:
            reason = self._offline.pop(d, None)
            if reason is None:
                return True
            st.state, st.offline_reason = DirState.WRITABLE, None
            self._errors.pop(d, None)
        log.warning("store directory %s is back: it passes its checks again (it was offline: %s); new segments "
                    "may go there again", d, reason)
        self._update_refusal()
        return True

    def note_success(self, d: str) -> None:
        self._errors.pop(d, None)

    def is_offline(self, d: str) -> bool:
        return d in self._offline

    # Measuring -------------------------------------------------------------------------
    def refresh(self, segment_counts: dict[str, tuple[int, int, int]] | None = None) -> None:
        """Measure every directory. ``segment_counts``: directory -> (segments, bytes, bytes not
        written yet) of the commit log (SegmentQueue.counts_by_dir; None: as last given)."""
        with self._refresh_lock:
            self._refresh(segment_counts)

    def _refresh(self, segment_counts: dict[str, tuple[int, int, int]] | None) -> None:
        if segment_counts is not None:
            self._unwritten = {d: c[2] for d, c in segment_counts.items()}
        measured: list[tuple[DirStatus, DiskUsage]] = []
        for d, st in self.dirs.items():
            if segment_counts is not None:
                st.segments, st.segment_bytes = segment_counts.get(d, (0, 0, 0))[:2]
            if d in self._offline and not self._probe_back(d, st):
                continue
            try:
                if not self.fio.is_dir(d):
                    if st.role == "index":
                        continue            # not made yet, or lost: the store rebuilds it at start
                    raise FileNotFoundError(2, "directory is missing", d)
                if st.role == "commitlog" and d not in self._markers:
                    self._markers[d] = self._new_marker(d)     # its first write failed (not the disk's)
                problem = self._check_marker(d) if st.role == "commitlog" else None
                usage = self.fio.disk_usage(d)
            except OSError as e:
                if not disk_error(e):
                    self._transient(d, e)
                elif st.role == "commitlog":
                    self.mark_offline(d, f"I/O error: {e}")
                else:
                    log.warning("cannot measure %s: %s", d, e)
                continue
            if problem:
                self.mark_offline(d, problem)
                continue
            st.device = _device(d)
            self._apply(st, usage)
            measured.append((st, usage))
        # the log's bytes allocated ahead of the writes, per file system (directories sharing one
        # count together): taken off its usage, what is left grows as bytes are written
        ahead: dict[tuple, int] = {}
        for st in self.dirs.values():
            if st.role == "commitlog" and st.path not in self._offline:
                key = _fs_key(st)
                ahead[key] = ahead.get(key, 0) + self._unwritten.get(st.path, 0)
        t = self.clock.monotonic_s()
        for st, usage in measured:
            st.unwritten_bytes = ahead.get(_fs_key(st), 0)
            g = self._growth[st.path]
            g.observe(t, usage.used_bytes - st.unwritten_bytes)
            st.growth_bytes_per_s = g.rate
        self._update_refusal()

    def _apply(self, st: DirStatus, usage: DiskUsage) -> None:
        mx, forcibly, warning = st.thresholds_percent
        st.capacity_bytes, st.used_bytes, st.free_bytes = usage.total_bytes, usage.used_bytes, usage.free_bytes
        ratio = 100.0 * usage.used_ratio
        st.used_ratio_percent = ratio
        if ratio >= warning:
            if st.path not in self._full:
                log.error("disk full: %s is at %.1f%% (warning level %d%%)", st.path, ratio, warning)
            self._full.add(st.path)
        elif ratio < forcibly and st.path in self._full:
            log.warning("disk no longer full: %s is at %.1f%%", st.path, ratio)
            self._full.discard(st.path)
        if st.state is DirState.READ_ONLY or st.path in self._failed:
            return
        if st.path in self._full:
            st.state = DirState.FULL
        elif ratio >= forcibly:
            st.state = DirState.NO_NEW_SEGMENTS
        else:
            st.state = DirState.WRITABLE

    def _update_refusal(self) -> None:
        cl = [st for st in self.dirs.values() if st.role == "commitlog"]
        usable = [st for st in cl if st.path not in self._offline and st.path not in self._full]
        reason = None
        failed = False
        if not usable:
            parts = [f"{st.path} ({self._out_words(st.path) if st.path in self._offline else f'{st.used_ratio_percent:.1f}% used'})"
                     for st in cl]
            full = any(st.path in self._full for st in cl)
            failed = any(st.path in self._failed for st in cl) and \
                not any(st.path in self._full and st.path not in self._offline for st in cl)
            reason = ((f"disk full: no commit-log directory can take writes (warning level "
                       f"{cl[0].thresholds_percent[2] if cl else 90}%): ") if full else
                      "no commit-log directory can take writes: ") + ", ".join(parts)
        else:
            for st in self.dirs.values():
                if st.role in DERIVED_ROLES and st.path in self._full:
                    what = "consume-queue" if st.role == "consumequeue" else st.role
                    reason = (f"disk full: {what} directory {st.path} is at {st.used_ratio_percent:.1f}% "
                              f"(warning level {st.thresholds_percent[2]}%)")
                    break
        self.refusal_failed = failed
        self.refusal = reason

    def _out_words(self, d: str) -> str:
        return f"failed: {self._failed[d]}" if d in self._failed else f"offline: {self._offline[d]}"

    # Decisions -------------------------------------------------------------------------
    def online_commitlog_dirs(self) -> list[str]:
        """Commit-log directories neither offline nor read-only (their fill is another question)."""
        return [st.path for st in self.dirs.values() if st.role == "commitlog" and st.path not in self._offline]

    def placement_candidates(self) -> list[str]:
        """Directories that may take a new segment: below their clean-forcibly ratio, or, when
        none is, below their warning ratio (writes are refused only at the warning level)."""
        cl = [st for st in self.dirs.values() if st.role == "commitlog" and st.path not in self._offline]
        below = [st.path for st in cl if st.state is DirState.WRITABLE]
        if below:
            return below
        return [st.path for st in cl if st.path not in self._full]

    def space_pressure(self) -> tuple[bool, bool, list[str]]:
        """(some writable directory is above its max used ratio, every writable directory is above
        its clean-forcibly ratio, the directories concerned)."""
        cl = [st for st in self.dirs.values() if st.role == "commitlog" and st.path not in self._offline]
        over = [st.path for st in cl if st.used_ratio_percent >= st.thresholds_percent[0]]
        forcibly = bool(cl) and all(st.used_ratio_percent >= st.thresholds_percent[1] for st in cl)
        cq = [st for st in self.dirs.values() if st.role in DERIVED_ROLES]
        for st in cq:
            if st.used_ratio_percent >= st.thresholds_percent[0]:
                over.append(st.path)
            if st.used_ratio_percent >= st.thresholds_percent[1]:
                forcibly = True
        return bool(over), forcibly, over

    # Forecast --------------------------------------------------------------------------
    def observe(self, appended_bytes_total: int, deleted_bytes_total: int) -> None:
        t = self.clock.monotonic_s()
        self._ingest.observe(t, appended_bytes_total)
        self._cleanup.observe(t, deleted_bytes_total)

    def forecast(self) -> Forecast:
        """When the ratios are reached at the rates of the last minute, per directory and overall
        (the commit-log file systems, each counted once), both from how fast the file systems
        fill; zero for a ratio reached, and for the warning ratio while writes are refused or
        held for lack of space (nothing more can be written: the time is now)."""
        cfg = self.config
        cl = [st for st in self.dirs.values() if st.role == "commitlog" and st.path not in self._offline]
        seen_fs: dict[tuple, DirStatus] = {}
        for st in cl:                       # directories on one file system count once
            seen_fs.setdefault(_fs_key(st), st)
        cap = sum(st.capacity_bytes for st in seen_fs.values())
        used = sum(st.used_bytes for st in seen_fs.values())
        fill = sum(st.growth_bytes_per_s for st in seen_fs.values())
        log_bytes = sum(st.segment_bytes for st in cl)
        ingest, cleanup = max(0.0, self._ingest.rate), max(0.0, self._cleanup.rate)
        f = Forecast(ingest_bytes_per_s=ingest, cleanup_bytes_per_s=cleanup, fill_bytes_per_s=fill,
                     file_reserved_time_hours=cfg.file_reserved_time_hours)
        mx, forcibly, warning = cfg.thresholds()
        stopped = self.refusal is not None or self.writes_held is not None
        for pct in (mx, forcibly, warning):
            f.seconds_until_percent[pct] = _until(pct / 100 * cap - used, fill, stopped and pct == warning)
        for st in self.dirs.values():
            warn = st.thresholds_percent[2]
            now = st.state is DirState.FULL or (stopped and st.role == "commitlog")
            st.seconds_until_percent = {
                pct: _until(pct / 100 * st.capacity_bytes - st.used_bytes, st.growth_bytes_per_s, now and pct == warn)
                for pct in st.thresholds_percent}
        other = max(0, used - log_bytes)
        usable = forcibly / 100 * cap - other
        if ingest > 0 and cap > 0:
            f.retention_hours_possible = max(0.0, usable) / ingest / 3600
        f.advice = self._advice(f, cap, other)
        return f

    def _advice(self, f: Forecast, cap: int, other: int) -> str:
        """What will happen, in the words of what the cleaner and the alarm do: above the max-used
        ratio only expired segments are deleted (at once, not at delete_when); above the
        clean-forcibly ratio segments are deleted before they expire; at the warning ratio writes
        are refused. The times are the file systems' (the log and whatever else fills them)."""
        mx, forcibly, warning = self.config.thresholds()
        if cap <= 0:
            return "no commit-log directory can be measured"
        if self.refusal is not None:
            return f"writes are refused now ({self.refusal}): free space or add disk"
        if self.writes_held is not None:
            return f"sends are held now ({self.writes_held}): free space or add disk"
        ingest, fill = f.ingest_bytes_per_s, f.fill_bytes_per_s
        eta = f.seconds_until_percent
        if fill <= 0:
            if ingest <= 0:
                return "nothing written in the last minute and the disks are not filling: no forecast"
            return (f"the disks are not filling: cleanup keeps up with the {human_bytes(ingest)}/s written "
                    f"(last {WINDOW_S:g} s)")
        words = {mx: "expired segments are deleted", forcibly: "segments are deleted before they expire, read or not",
                 warning: "writes are refused"}
        steps = []
        for pct in (mx, forcibly, warning):
            s = eta.get(pct)
            if s is not None:
                steps.append(f"above {pct}% now ({words[pct]})" if s == 0 else
                             f"{pct}% in {human_seconds(s)} ({words[pct]})")
        head = f"the disks fill at {human_bytes(fill)}/s"
        if ingest <= 0:
            head += " and nothing is written to the log: something else fills them"
        elif fill > 1.5 * ingest:
            head += f", the log {human_bytes(ingest)}/s of it: something else fills them too"
        advice = head + (": " + ", ".join(steps) if steps else "")
        if ingest <= 0:
            return advice
        keep_h = f.file_reserved_time_hours
        hours = f.retention_hours_possible or 0.0
        if hours + 1e-9 < keep_h:
            need = ingest * keep_h * 3600 / (forcibly / 100) + other
            return (f"{advice}; at {human_bytes(ingest)}/s the disks hold {human_seconds(hours * 3600)} of data, "
                    f"less than file_reserved_time_hours={keep_h:g}: add {human_bytes(max(0, need - cap))} "
                    f"to keep {keep_h:g} h")
        if fill <= 1.5 * ingest:         # the log is what fills them: expiry stops it
            level = 100.0 * (other + ingest * keep_h * 3600) / cap
            return (f"{advice}; unless segments expire first: {keep_h:g} h of the log at {human_bytes(ingest)}/s "
                    f"take {level:.0f}% of the disks, where usage levels off once the oldest segments are "
                    f"{keep_h:g} h old and deleted")
        return advice


def _fs_key(st: DirStatus) -> tuple:
    """The file system a directory is on, as far as we can tell (two disks of one size and usage
    are still two: st_dev tells them apart)."""
    return (st.device, st.capacity_bytes, st.used_bytes + st.free_bytes)


def _until(room: float, rate: float, now: bool) -> float | None:
    """Seconds until ``room`` bytes are filled at ``rate``: 0 when none is left (or ``now``),
    None when the usage does not grow."""
    if now or room <= 0:
        return 0.0
    return room / rate if rate > 0 else None


def status_report(disk: DiskMonitor, cleaner, segments, flags: dict) -> dict:
    """The disk status as plain data (MessageStore.disk_status, `tidemq disk`, the admin service)."""
    f = disk.forecast()
    return {
        "directories": [
            {"path": st.path, "role": st.role, "state": st.state.value, "capacity_bytes": st.capacity_bytes,
             "used_bytes": st.used_bytes, "free_bytes": st.free_bytes,
             "used_ratio_percent": round(st.used_ratio_percent, 2),
             "thresholds_percent": {"max_used": st.thresholds_percent[0],
                                    "clean_forcibly": st.thresholds_percent[1],
                                    "warning": st.thresholds_percent[2]},
             "segments": st.segments, "segment_bytes": st.segment_bytes, "offline_reason": st.offline_reason,
             "growth_bytes_per_s": round(st.growth_bytes_per_s, 1), "unwritten_bytes": st.unwritten_bytes,
             "seconds_until_percent": {str(k): (round(v, 1) if v is not None else None)
                                       for k, v in st.seconds_until_percent.items()}}
            for st in disk.dirs.values()],
        "flags": flags,
        "last_cleanup": cleaner.last_deleted.as_dict(),
        "last_round": cleaner.last.as_dict(),
        "manual_rounds_left": cleaner.manual_rounds,
        "commitlog": {"min_offset": segments.min_offset, "max_offset": segments.max_offset,
                      "deleted_bytes_total": cleaner.deleted_bytes_total,
                      "deleted_segments_by_reason": {r.value: n for r, n in cleaner.deleted_segments.items()},
                      "not_freed_rounds_by_reason": {r.value: n for r, n in cleaner.not_freed_rounds.items()},
                      "evicted_by_group": [{"group": g, "topic": t, "messages": n}
                                           for (g, t), n in sorted(cleaner.evicted_by_group.items())]},
        "forecast": {"ingest_bytes_per_s": round(f.ingest_bytes_per_s, 1),
                     "cleanup_bytes_per_s": round(f.cleanup_bytes_per_s, 1),
                     "fill_bytes_per_s": round(f.fill_bytes_per_s, 1),
                     "seconds_until_percent": {str(k): (round(v, 1) if v is not None else None)
                                               for k, v in f.seconds_until_percent.items()},
                     "retention_hours_possible": (round(f.retention_hours_possible, 2)
                                                  if f.retention_hours_possible is not None else None),
                     "file_reserved_time_hours": f.file_reserved_time_hours,
                     "window_s": WINDOW_S, "advice": f.advice},
    }
