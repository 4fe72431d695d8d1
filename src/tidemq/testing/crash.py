"""A store's marker files as a crash leaves them, for the damage tests and
scripts/damage_scenarios.py: the abort file a running store keeps (a clean stop removes it),
and the checkpoint as written, emptied, or overwritten with random bytes."""

from __future__ import annotations

import os

from ..layout import abort_path, checkpoint_path


def crash_files(root: str, abort: bool, checkpoint: str) -> None:
    """The files of the store at ``root`` as a crash leaves them: an abort file (or none); the
    checkpoint kept ("valid"), emptied ("empty") or random bytes ("random")."""
    if abort:
        open(abort_path(root), "wb").close()
    cp = checkpoint_path(root)
    if checkpoint == "empty":
        open(cp, "wb").close()
    elif checkpoint == "random":
        with open(cp, "wb") as f:
            f.write(os.urandom(4096))
