"""Open file descriptors of this process, for tests that check a part closes what it opened."""

from __future__ import annotations

import os


def fd_count(under=None) -> int:
    """How many file descriptors this process holds open; with ``under`` (a directory), only those
    open on a path inside it. A test compares counts under its own ``tmp_path``: the process-wide
    count also moves when an object of an earlier test is collected and closes its file."""
    if under is None:
        return len(os.listdir("/proc/self/fd"))
    prefix = os.path.join(os.path.realpath(under), "")
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:              # closed meanwhile (the listing's own descriptor among them)
            continue
        n += target.startswith(prefix)
    return n
