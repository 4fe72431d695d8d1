"""The store root's layout: every path and file name of a store, in one place.

A module of its own, outside tidemq.store, because more than the store reads a store root:
StoreConfig derives its directories from it, Spark's file mode and the CLI read a stopped
store's files, the broker keeps its state beside them. It imports nothing but the FileIO seam.

Store root (``StoreConfig.root_dir``)::

    <root>/
      lock                            held (flock) by the process that has the store open
      checkpoint                      flushed offsets and timestamps, two slots (checkpoint.py)
      abort                           exists while a store runs; found at start: abnormal recovery
      commitlog/                      the commit log (or the ``commitlog_dirs``: one or more
        .tidemq-dir                   directories anywhere); a marker the store rewrites to tell
                                      its own disk from another one mounted there (disk.py)
        00000000000000000000          segments, named by their first byte offset (20 digits),
        00000000001073741824          each ``segment_size_bytes`` long (commit_log.py)
      consumequeue/<topic>/<queue id>/
        00000000000000000000          consume-queue files, named by the byte offset of their
                                      first 20-byte unit in the queue (consume_queue.py)
      index/
        .tidemq-index                 marker: an index/ without it was emptied or lost (rebuilt)
        00000001700000000000          index files, named by their creation time in ms (index_file.py)
      config/
        topics.json                   topics and their queue counts (topics.py)
        sealed.json                   segments sealed early, start offset -> position (commit_log.py)
        queues.json                   every queue's end as of a checkpoint: a queue that lost
                                      units is rebuilt at start (heal.py)
        store.json                    the settings the store last ran with, for commands given
                                      only --root (remembered.py)
        epochs.json                   leader epochs and where each began to write the log, for
                                      replication's divergence check (epochs.py)
        served_end.json               SYNC replication: a lower bound of the group's high watermark
                                      (what no failover takes back), for readers of the files
                                      (Spark's file mode; broker/replication/served_end.py)
      archive/                        written by ``tidemq archive`` (tidemq.spark.archive)
        manifest.json                 archived segments (store/archive.py)
        gaps.json                     segments deleted before they were archived
        pending.json                  the run under way (removed once its manifest entry is written)
        spark.log                     what Spark's JVM printed during `tidemq archive`
        .lock                         one archive job per store

The broker keeps its own state under the same root (consumer offsets, pop state,
timer, transactions): its modules say where.

Segment-like files (commit log, consume queue, index) are all named by a number
zero-padded to 20 digits: ``segment_name`` / ``parse_segment_name``;
``list_segments`` lists a directory's through the FileIO seam.
"""

from __future__ import annotations

import os

from .io import FileIO

LOCK = "lock"
CHECKPOINT = "checkpoint"
ABORT = "abort"
COMMITLOG_DIR = "commitlog"
CONSUMEQUEUE_DIR = "consumequeue"
INDEX_DIR = "index"
CONFIG_DIR = "config"
TOPICS_FILE = "topics.json"
SEALED_FILE = "sealed.json"
EPOCHS_FILE = "epochs.json"
SERVED_END_FILE = "served_end.json"
ARCHIVE_DIR = "archive"
MANIFEST_FILE = "manifest.json"
GAPS_FILE = "gaps.json"
PENDING_FILE = "pending.json"
ARCHIVE_LOCK = ".lock"
DIR_MARKER = ".tidemq-dir"          # in every commit-log directory the store writes
INDEX_MARKER = ".tidemq-index"      # in index/

SEGMENT_NAME_DIGITS = 20


# Names -------------------------------------------------------------------------------
def segment_name(start: int) -> str:
    """The file name of a segment starting at ``start`` (a byte offset, or a time in ms for the index)."""
    return f"{start:0{SEGMENT_NAME_DIGITS}d}"


def parse_segment_name(name: str) -> int | None:
    """The number a segment file name stands for, or None for any other name."""
    if len(name) == SEGMENT_NAME_DIGITS and name.isdigit():
        return int(name)
    return None


def list_segments(fio: FileIO, directory: str) -> list[tuple[int, str]]:
    """(start, path) of every segment file in ``directory``, ascending; [] if it does not exist."""
    try:
        names = fio.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for name in names:
        start = parse_segment_name(name)
        if start is not None:
            out.append((start, os.path.join(directory, name)))
    out.sort()
    return out


# Paths under a store root ---------------------------------------------------------------
def lock_path(root: str) -> str:
    return os.path.join(root, LOCK)


def checkpoint_path(root: str) -> str:
    return os.path.join(root, CHECKPOINT)


def abort_path(root: str) -> str:
    return os.path.join(root, ABORT)


def commitlog_dir(root: str) -> str:
    """The commit-log directory when ``commitlog_dirs`` names none."""
    return os.path.join(root, COMMITLOG_DIR)


def consumequeue_dir(root: str) -> str:
    return os.path.join(root, CONSUMEQUEUE_DIR)


def topic_dir(consumequeue: str, topic: str) -> str:
    """The directory of a topic's consume queues under ``consumequeue/`` (one per queue id)."""
    return os.path.join(consumequeue, topic)


def queue_dir(consumequeue: str, topic: str, queue_id: int) -> str:
    """The directory of one consume queue under ``consumequeue/``."""
    return os.path.join(consumequeue, topic, str(queue_id))


def index_dir(root: str) -> str:
    return os.path.join(root, INDEX_DIR)


def config_dir(root: str) -> str:
    return os.path.join(root, CONFIG_DIR)


def topics_path(root: str) -> str:
    return os.path.join(root, CONFIG_DIR, TOPICS_FILE)


def sealed_path(root: str) -> str:
    return os.path.join(root, CONFIG_DIR, SEALED_FILE)


def epochs_path(root: str) -> str:
    return os.path.join(root, CONFIG_DIR, EPOCHS_FILE)


def served_end_path(root: str) -> str:
    return os.path.join(root, CONFIG_DIR, SERVED_END_FILE)


def archive_dir(root: str) -> str:
    return os.path.join(root, ARCHIVE_DIR)


def manifest_path(root: str) -> str:
    return os.path.join(root, ARCHIVE_DIR, MANIFEST_FILE)


def gaps_path(root: str) -> str:
    return os.path.join(root, ARCHIVE_DIR, GAPS_FILE)


def pending_path(root: str) -> str:
    return os.path.join(root, ARCHIVE_DIR, PENDING_FILE)


def archive_lock_path(root: str) -> str:
    return os.path.join(root, ARCHIVE_DIR, ARCHIVE_LOCK)


# What a directory is ----------------------------------------------------------------------
STORE_SIGNS = (CHECKPOINT, COMMITLOG_DIR, CONSUMEQUEUE_DIR, CONFIG_DIR)   # a store made any of these at its start


def root_problem(root: str) -> str | None:
    """Why ``root`` is not the root of an existing store (for commands that open one and must not
    make one: a mistyped --root is said, never turned into a new empty store), or None."""
    if not os.path.exists(root):
        return f"no store at {root}: the directory does not exist"
    if not os.path.isdir(root):
        return f"the store root {root} is a file, not a directory"
    try:
        names = set(os.listdir(root))
    except OSError as e:
        return f"cannot read the store root {root}: {e.strerror or e}"
    if not names & set(STORE_SIGNS):
        return (f"{root} is not a tidemq store (none of {', '.join(STORE_SIGNS)} in it)"
                + (": it is empty" if not names else ""))
    return None
