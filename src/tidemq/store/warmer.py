"""Warming the commit log's pages ahead of the writer.

The first write to each page of a fresh (fallocated, mmapped) segment faults: the kernel
allocates a page-cache page, zeroes it, maps it and marks the file's unwritten extent;
measured here, ~3.4 us per 1152-byte record against ~0.34 us into pages already touched,
on the writer's thread and under the put lock. ``SegmentWarmer`` takes those faults on its
own thread: it keeps the ``ahead_bytes`` after the log's end populated (``FileIO.populate``:
madvise(MADV_POPULATE_WRITE), which changes no byte, runs without the GIL, and answers a page
it cannot back with an errno, never SIGBUS), going on into the pre-made next segment when
the window passes the active one's end, so a roll lands on warm pages too.

A window, not whole segments (RocketMQ's warmMappedFile writes a zero into every page of a
new file): a populated page is dirty, so an fsync of the segment writes out (zeroes) the
warm pages the writer has not reached yet and write-protects them again; the further ahead,
the more of that. The window is what the writer reaches soon.

Positions are absolute log offsets. The writer neither waits for the warmer nor takes a lock
of it: ``CommitLog.append`` compares the log's end with ``wake_offset`` once per batch and
calls ``wake()`` when half the window is used. The warmer never takes the put lock; it holds
the segment it warms (``MappedFile.hold``) for one chunk at a time: a segment deleted
meanwhile is skipped (a forced delete's unmap waits for the chunk, whose mapping is exported
during the call). Recovery and truncation run before the warmer starts; the cleaner deletes
only sealed segments at the head, which the warmer never touches.

Off by default (``commitlog_warm_enabled``) since the commit log writes batches with pwrite
(commit_log.append) and a follower its copies too: a pwrite of whole pages fills page-cache
pages without the fault and without zeroing them, so a warm page only adds its zeroing (and,
being dirty, its write-back) on the warmer's thread. Measured with bench/broker_produce.py
(bench/README.md, 9 interleaved rounds): broker CPU ~5.4 us per message with it off against
~7.0 with it on; in the store alone, put_batch(1024), 0.92 against 1.51 us of process CPU per
message. What it still helps is single puts and writes through the mapping (BLANKs, early
seals), at a cost paid on the other CPU.

Counters (``stats()``): bytes and chunks warmed, how often the writer was found past the
warmed range (``overtaken``) and the bytes it wrote there unwarmed, errors and the last one.
"""

from __future__ import annotations

import logging
import threading

from ..io import PAGE_SIZE, FileIO
from .flush import Service
from .segment_queue import SegmentQueue

log = logging.getLogger("tidemq.store")

CHUNK_BYTES = 4 << 20          # one populate call (~10-30 ms here, without the GIL): a writer holding the GIL
                               # lets the warmer in every 5 ms (sys.getswitchinterval), a chunk per turn
IDLE_WAIT_S = 0.5              # without a wake (writer idle): look again this often
BLOCKED_WAIT_S = 0.02          # the window reaches a next segment that does not exist yet


class SegmentWarmer(Service):
    name = "segment-warmer"

    def __init__(self, segments: SegmentQueue, fio: FileIO, ahead_bytes: int,
                 chunk_bytes: int = CHUNK_BYTES) -> None:
        super().__init__()
        self.segments = segments
        self.fio = fio
        ahead = min(ahead_bytes, segments.segment_size)
        self.ahead_bytes = max(PAGE_SIZE, ahead - ahead % PAGE_SIZE)
        self.chunk_bytes = max(PAGE_SIZE, chunk_bytes - chunk_bytes % PAGE_SIZE)
        self.warmed_to: int | None = None      # absolute: pages before it are warm (or passed)
        self.wake_offset = 0                   # the writer wakes us when the log's end reaches it
        self.unsupported = False               # the file layer populates nothing (in-memory FileIO)
        self._event = threading.Event()
        self._wait_s = IDLE_WAIT_S
        self.bytes_warmed_total = 0
        self.chunks_total = 0
        self.overtaken_total = 0
        self.overtaken_bytes_total = 0
        self.errors_total = 0
        self.last_warm_error: str | None = None

    def wake(self) -> None:
        self._event.set()

    def run(self) -> None:
        while not self._stop.is_set():
            self._event.clear()
            self.warm_once()
            if self.unsupported:
                log.info("segment warming off: the file layer does not populate pages")
                return
            self._event.wait(self._wait_s)

    def warm_once(self) -> int:
        """One pass: populate from the log's end (or where the last pass stopped) to ``ahead_bytes``
        past it, a chunk at a time. Returns the bytes warmed."""
        done = 0
        self._wait_s = IDLE_WAIT_S
        for _ in range(self.ahead_bytes // self.chunk_bytes + 4):   # a chunk per round, a few skips
            if self._stop.is_set():
                break
            last = self.segments.last
            end = self.segments.max_offset
            floor = end - (end - (last.start_offset if last else 0)) % PAGE_SIZE   # the writer's page
            if self.warmed_to is None or self.warmed_to > end + self.ahead_bytes:
                self.warmed_to = floor             # first pass, or the log was cut back
            elif self.warmed_to < end:
                self.overtaken_total += 1          # the writer wrote into pages not warmed
                self.overtaken_bytes_total += end - self.warmed_to
                self.warmed_to = floor
            off = self.warmed_to
            target = floor + self.ahead_bytes
            if off >= target:
                break
            mf = self.segments.tail_segment(off)
            if mf is None:                          # the next segment is not made yet
                if last is not None:                # (an empty log: the first append wakes us)
                    self._wait_s = BLOCKED_WAIT_S
                break
            n = min(self.chunk_bytes, target - off, mf.end_offset - off)
            if mf.is_full:                          # sealed early, or about to roll: nothing to warm
                self.warmed_to = mf.end_offset
                continue
            if not mf.hold():                       # being deleted (the log cut back): next pass
                break
            try:
                got = self.fio.populate(mf.mapping, off - mf.start_offset, n)
            except (OSError, ValueError) as e:
                self.errors_total += 1
                if self.errors_total % 1000 == 1:
                    log.warning("warming %s at %d failed: %s (the writer takes those page faults)",
                                mf.path, off - mf.start_offset, e)
                self.last_warm_error = f"{mf.path} at {off - mf.start_offset}: {e}"
                self.warmed_to = off + n            # skip the chunk: never retried in a loop
                continue
            finally:
                mf.release()
            if got == 0:
                self.unsupported = True
                break
            self.warmed_to = off + n
            self.bytes_warmed_total += n
            self.chunks_total += 1
            done += n
        if self.warmed_to is not None:
            self.wake_offset = self.warmed_to - self.ahead_bytes // 2
        return done

    def stats(self) -> dict:
        end = self.segments.max_offset
        return {
            "enabled": not self.unsupported and not self.dead,
            "populate_mode": "none" if self.unsupported else getattr(self.fio, "populate_mode", "populate"),
            "ahead_bytes": self.ahead_bytes,
            "warm_ahead_bytes": max(0, (self.warmed_to or 0) - end),
            "bytes_warmed_total": self.bytes_warmed_total,
            "chunks_total": self.chunks_total,
            "overtaken_total": self.overtaken_total,
            "overtaken_bytes_total": self.overtaken_bytes_total,
            "errors_total": self.errors_total,
            "last_error": self.last_warm_error or self.last_error,
        }
