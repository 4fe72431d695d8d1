"""glibc's malloc told to keep the broker's big buffers rather than map fresh pages for each.

A PullRecords answer is one buffer of up to 16 MiB (more when a reader asks: record/framing.py),
and gRPC copies it into buffers of its own. glibc serves an allocation that large with a fresh
mmap unless its threshold, which it adjusts as blocks are freed, has grown past the size; the
pages of a fresh mapping fault in one at a time (4 KiB each, ~4,000 faults for 16 MiB) and are
unmapped again on free. Measured while Spark's JVM reader pulled 2 M rows through a broker
(``bench/spark_read.py``'s set-up, the broker's main thread): 0.16 page faults and 0.69 us of CPU
per row with glibc's defaults, none and 0.39 us with the threshold fixed at 32 MiB and the
heap's top kept up to 128 MiB.

The cost: up to ``keep_bytes`` of freed memory stays resident (the memory alarm counts it).
Not glibc (musl, macOS), or ``keep_bytes`` 0: nothing is changed.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger("tidemq.broker")

M_TRIM_THRESHOLD = -1           # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 << 20   # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)


def keep_big_buffers(keep_bytes: int) -> bool:
    """Buffers up to min(keep_bytes, 32 MiB) come from the heap, and up to ``keep_bytes`` freed at
    its top stay there (mallopt). True when glibc took both."""
    if keep_bytes <= 0:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):               # not glibc
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    took = mallopt(M_MMAP_THRESHOLD, min(keep_bytes, MMAP_THRESHOLD_MAX)) == 1 and \
        mallopt(M_TRIM_THRESHOLD, min(keep_bytes, (1 << 31) - 1)) == 1
    if not took:
        log.info("malloc did not take the big-buffer thresholds (malloc_keep_bytes): glibc's defaults stay")
    return took
