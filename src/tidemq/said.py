"""Expected failures said once per condition, not once per retry.

A loop that retries (a timer round on a full disk, a follower's copy whose disk refuses the
leader's bytes or whose leader refuses it) said each failure again: one WARNING line per retry, a
traceback each time for what is an expected condition. ``Conditions`` says the first failure of
each kind (``kind_of``: the exception's type and errno, never its text, which may carry an offset
that changes at every retry) at WARNING without a traceback, counts the repeats, and says once
when it works again, with the counts. At most ``KINDS_MAX`` kinds are kept per streak (more are
counted under "other")."""

from __future__ import annotations

import errno as errno_names
import logging

KINDS_MAX = 16


def kind_of(e: BaseException) -> str:
    """What a failure is, for ``Conditions``: its type, and the errno of the OSError it is or was
    raised from (a full disk and an I/O error are two conditions; two offsets are one)."""
    kind = type(e).__name__
    cause: BaseException | None = e
    for _ in range(4):
        if isinstance(cause, OSError) and cause.errno is not None:
            return f"{kind} {errno_names.errorcode.get(cause.errno, cause.errno)}"
        err = getattr(cause, "error", None)          # (a wrapper holding its OSError)
        cause = err if isinstance(err, BaseException) else cause.__cause__ if cause is not None else None
        if cause is None:
            break
    return kind


class Conditions:
    def __init__(self, logger: logging.Logger, what: str) -> None:
        """``what`` begins every line ("timer", "replication from 10.0.0.2:8081")."""
        self.log = logger
        self.what = what
        self.counts: dict[str, int] = {}

    def failed(self, kind: str, text: str) -> bool:
        """A failure of ``kind`` (``text``: what it was); True when it was said (the first of its kind
        since things last worked)."""
        if kind not in self.counts and len(self.counts) >= KINDS_MAX:
            kind = "other"
        n = self.counts.get(kind, 0)
        self.counts[kind] = n + 1
        if n == 0:
            self.log.warning("%s: %s (trying again; said once while it lasts)", self.what, text)
        return n == 0

    def recovered(self, how: str = "works again") -> None:
        """Things work again: the failures since the last time said in one line (nothing when none)."""
        if not self.counts:
            return
        counts, self.counts = self.counts, {}
        self.log.warning("%s: %s after %d failed attempt(s) (%s)", self.what, how, sum(counts.values()),
                         ", ".join(f"{k}: {n}" for k, n in counts.items()))

    @property
    def failing(self) -> bool:
        return bool(self.counts)
