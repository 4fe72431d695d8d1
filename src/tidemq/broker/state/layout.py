"""Where the broker keeps its own durable state: one directory, ``<store root>/broker/``.

    <root>/broker/
        pop/journal                  pop consumption (consume/pop_state.py): JSON lines
        pop/snapshot.json              (journal.py), fsynced every second, compacted into the snapshot
        pop/secret                   the key of receipt-handle MACs (64 hex digits); a new key
                                       makes every handle given out before invalid
        consumer_offsets.json        committed offsets of consumer groups (consume/group_offsets.py),
                                       rewritten atomically at most once a second
        timer/checkpoint.json        the timer's progress through the schedule topic
                                       (deferred/timer.py), rewritten atomically
        transactions/journal         transaction decisions and checks (deferred/transactions.py),
        transactions/snapshot.json     the same journal format as pop/

The JSON files are checked documents and the journals carry a CRC per line (checked.py,
journal.py): damage is recognised, falls back to the previous version (``*.bak``) and is set
aside (``*.damaged``), never read as state and never a reason not to start.

The store owns everything else under the root (commitlog/, consumequeue/, index/,
checkpoint, abort, config/, archive/); the broker writes nowhere else.

Before this directory, the same files lay at these places of the store root; at every
start (:func:`migrate`, before any of them is opened) what is found there is moved here:

    pop/                         ->  broker/pop/                (journal, snapshot.json)
    config/pop.secret            ->  broker/pop/secret
    config/consumer_offsets.json ->  broker/consumer_offsets.json
    timer/                       ->  broker/timer/              (checkpoint.json)
    transaction/                 ->  broker/transactions/       (journal, snapshot.json)

Each move is one rename within the store root's file system (atomic), made durable by
an fsync of both parent directories, so a crash during the migration leaves every item
either at its old place (moved at the next start) or at its new one. An item found at both
places (an old copy put back after the move) is left where it is and reported: the new
one is used, the old one is never deleted by the broker. A broker of an older version does
not see state moved here.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from ...io import FileIO
from ...layout import abort_path

log = logging.getLogger("tidemq.broker")

STATE_DIR = "broker"


def state_dir(store_root: str) -> str:
    """The broker's state directory under a store root."""
    return os.path.join(store_root, STATE_DIR)


@dataclass(frozen=True)
class StateLayout:
    """The paths of the broker's state under ``dir`` (``state_dir(store root)`` for a broker)."""
    dir: str

    @property
    def pop_dir(self) -> str:
        return os.path.join(self.dir, "pop")

    @property
    def pop_secret(self) -> str:
        return os.path.join(self.dir, "pop", "secret")

    @property
    def consumer_offsets(self) -> str:
        return os.path.join(self.dir, "consumer_offsets.json")

    @property
    def timer_checkpoint(self) -> str:
        return os.path.join(self.dir, "timer", "checkpoint.json")

    @property
    def transactions_dir(self) -> str:
        return os.path.join(self.dir, "transactions")


def legacy_moves(store_root: str) -> list[tuple[str, str]]:
    """(old path, new path) of every item of the layout before ``<root>/broker/``, in the order
    they are moved (a directory before a file moved into it)."""
    new = StateLayout(state_dir(store_root))
    old = lambda *parts: os.path.join(store_root, *parts)  # noqa: E731
    return [(old("pop"), new.pop_dir),
            (old("config", "pop.secret"), new.pop_secret),
            (old("config", "consumer_offsets.json"), new.consumer_offsets),
            (old("timer"), os.path.dirname(new.timer_checkpoint)),
            (old("transaction"), new.transactions_dir)]


def migrate(fio: FileIO, store_root: str) -> list[tuple[str, str]]:
    """Move the broker state found at its old places under ``store_root`` to ``<root>/broker/``;
    the (old, new) pairs moved. Nothing to move: nothing is touched, not even created."""
    moved = []
    for src, dst in legacy_moves(store_root):
        if not fio.exists(src):
            continue
        if fio.exists(dst):
            log.warning("broker state: %s and %s both exist; %s is used, %s is left as it is (remove it once "
                        "it is not needed)", src, dst, dst, src)
            continue
        parent = os.path.dirname(dst)
        fio.makedirs(parent)
        fio.rename(src, dst)
        fio.fsync_dir(parent)
        fio.fsync_dir(os.path.dirname(src))
        log.info("broker state: moved %s to %s", src, dst)
        moved.append((src, dst))
    if moved:
        fio.fsync_dir(store_root)            # <root>/broker itself, when it was made here
    return moved


def remake(fio: FileIO, store_root: str) -> list[str]:
    """The state directory and its parts made again when they were removed while the broker runs (an
    operator's ``rm -rf``, a cleanup script): without them every state write fails and the journals
    go on into files no name reaches (journal.py). Only while the store root holds its ``abort``
    file -- the running store is there -- never on the disk under a mount point that is gone. The
    directories made (each said once at WARNING); [] when none was gone."""
    lay = StateLayout(state_dir(store_root))
    dirs = [lay.dir, lay.pop_dir, os.path.dirname(lay.timer_checkpoint), lay.transactions_dir]
    gone = [d for d in dirs if not fio.exists(d)]
    if not gone or not fio.exists(abort_path(store_root)):
        return []
    for d in gone:
        fio.makedirs(d)
    fio.fsync_dir(store_root)
    log.warning("broker state: %s removed while the broker ran: made again (the state is written there from "
                "now on; what was only in the removed files and not in memory is lost)", ", ".join(gone))
    return gone
