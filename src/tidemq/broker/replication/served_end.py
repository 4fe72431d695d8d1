"""The served end on disk: what readers of a replicated store's files may read up to.

Under SYNC replication consumers are served only up to the high watermark (node.read_limit): what
every member of the in-sync set has, which no failover takes back (a new leader is elected from
that set). The files of a member hold more (records written, not yet confirmed by the set: a
failover can take them back). A reader of the files without the broker (Spark's file mode,
tidemq/spark/files.py) needs the high watermark, which lives in memory: this keeps a lower bound
of it in ``<root>/config/served_end.json`` (tidemq/layout.py; a checked document, tidemq/checked.py:
CRC, the previous version kept as ``.bak``)::

    {"end": E}     every record of this log ending at or before E was below the high watermark

written by the member (node.py) at its start (0 when there is none yet, before the copy or the
leading begins), then at most once a second while it moves, and at its stop. Monotonic: a value
once below the high watermark stays so (SYNC: every member of the in-sync set holds it, and only
they are elected), so it is never lowered, and an older version (the ``.bak``, a crash between the
two renames) is a lower bound too, except past a cut of this log (a follower cutting a divergent
tail, after an unclean promotion; its copy started over): the file is lowered to the cut before
anything is copied after it. Written only under SYNC: a member of an ASYNC group, or a broker
without a group, serves its whole log, and its start removes a file a SYNC past left (file mode then
reads what is written, as that broker serves it).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from ... import checked, layout
from ...io import FileIO

log = logging.getLogger("tidemq.broker")

INTERVAL_S = 1.0


def check(doc) -> None:
    if not (isinstance(doc, dict) and type(doc.get("end")) is int and doc["end"] >= 0):
        raise checked.Damaged("not a served end")


class ServedEnd:
    def __init__(self, fio: FileIO, root: str) -> None:
        self.fio = fio
        self.root = root
        self.path = layout.served_end_path(root)
        self.saved = -1
        self._lock = threading.Lock()     # a save (its value read, written) and a cut: one at a time

    def open(self) -> None:
        """Read what is there; none (or none intact): 0 written, before anything is copied or led."""
        doc = checked.load(self.fio, self.path, "served end", check=check).doc
        if doc is not None:
            self.saved = doc["end"]
            return
        self.fio.makedirs(layout.config_dir(self.root))
        checked.write(self.fio, self.path, {"end": 0})
        self.saved = 0

    def save(self, high_watermark: Callable[[], int | None]) -> None:
        """Write the high watermark (read under the lock: a cut meanwhile is seen) when it is past what
        the file says."""
        with self._lock:
            end = high_watermark()
            if end is not None and end > self.saved:
                checked.write(self.fio, self.path, {"end": end})
                self.saved = end

    def cut(self, end: int) -> None:
        """This log was cut back to ``end`` (a follower's divergent tail, or its copy started over):
        what it holds past ``end`` from now on is the new leader's, not confirmed yet. Never past it."""
        with self._lock:
            if self.saved > end:          # (its .bak too: the version before is past the cut)
                checked.write_mirrored(self.fio, self.path, {"end": end})
                self.saved = end


def forget(fio: FileIO, root: str) -> None:
    """A broker that serves its whole log (no group, or ASYNC): a served end a SYNC past left goes."""
    path = layout.served_end_path(root)
    for p in (path, path + ".bak"):
        if fio.exists(p):
            fio.unlink(p)
            log.info("%s removed: this broker serves its whole log (no SYNC replication)", p)
