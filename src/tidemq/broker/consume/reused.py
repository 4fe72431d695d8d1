"""Where a consumer's position counts records a failure of the commit log took (store/log_failure.py).

The failure cuts the queues back to the log's durable end and the next messages take the offsets
from there. The broker's listener brings every consumer's position back to the cut at once
(service.after_log_failure); a kill -9 before its state was written left the position past the cut,
at offsets other messages hold by the next start: skipped for good. So a position remembers the last
record it counted, (queue offset, commit-log offset) -- its fingerprint, as the timer's checkpoint
does (deferred/timer.py) -- and at start another record at that offset says where the cut was: the
first offset whose record lies past the counted one (the records before the cut lie before it in
the log, the ones after the cut past where the log resumed, past it too).
"""

from __future__ import annotations

from typing import Callable


def reused_from(unit_at: Callable[[int], int | None], last: tuple[int, int] | None, position: int) -> int | None:
    """The cut to bring ``position`` back to, or None: it stands. ``unit_at(offset)``: the commit-log
    offset of the record the queue holds there (None: none; -1: cleaned away, before every record kept); ``last``: the fingerprint (offset,
    commit-log offset), below ``position``. A record cleaned away, or none to read: it stands."""
    if last is None:
        return None
    q, p = last
    if q >= position:
        return None
    try:
        now = unit_at(q)
    except OSError:
        return None
    if now is None or now < 0 or now == p:
        return None
    lo, hi = 0, q
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            m = unit_at(mid)
        except OSError:
            m = None
        if m is None or m > p:          # (none to read: taken as past it, read again)
            hi = mid
        else:
            lo = mid + 1
    return lo
