"""What a store preallocates must fit its machine: checked and fitted at start.

A commit-log segment must fit twice below the clean-forcibly ratio of some commit-log directory
(else cleanup could never free space: a start-up error naming the setting); index files are sized
down to their disk (index_file.fitted, logged); the pulls served from memory are bounded by a share
of the machine's memory (``access_message_in_memory_percent_max``).
"""

from __future__ import annotations

import logging
import os

from ..config import StoreConfig
from ..io import FileIO
from .index_file import fitted, index_file_size
from .types import StoreError

log = logging.getLogger("tidemq.store")


def total_memory_bytes() -> int:
    """The machine's memory (8 GiB when it cannot be told)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def check_sizes(cfg: StoreConfig, fio: FileIO) -> None:
    """Preallocations must fit: two commit-log segments below the clean-forcibly ratio of some
    commit-log directory (else a StoreError naming the setting to lower)."""
    caps = []
    for d in cfg.commitlog_paths:
        try:
            fio.makedirs(d)
            caps.append((fio.disk_usage(d).total_bytes, d))
        except OSError:
            continue                      # missing or failing: the disk monitor takes it offline
    forcibly = cfg.thresholds()[1]
    if caps and all(cap * forcibly // 200 < cfg.segment_size_bytes for cap, _d in caps):
        cap, d = max(caps)
        raise StoreError(f"segment_size_bytes={cfg.segment_size_bytes} does not fit: the largest commit-log "
                         f"directory, {d}, holds {cap} bytes, and two segments must fit below its "
                         f"clean-forcibly ratio ({forcibly}%) for cleanup to free space; lower "
                         f"segment_size_bytes (to {cap * forcibly // 200} or less here)")


def index_size(cfg: StoreConfig, fio: FileIO) -> tuple[int, int]:
    """index_slots / index_entries, scaled down to fit the index directory's disk (logged)."""
    try:
        cap = fio.disk_usage(cfg.root_dir).total_bytes
    except OSError:
        return cfg.index_slots, cfg.index_entries
    slots, entries = fitted(cfg.index_slots, cfg.index_entries, cap)
    if (slots, entries) != (cfg.index_slots, cfg.index_entries):
        log.warning("index files sized to index_slots=%d, index_entries=%d (%d bytes each) to fit a disk of %d "
                    "bytes; set them to silence this", slots, entries, index_file_size(slots, entries), cap)
    return slots, entries
