"""The committed offsets of consumer groups (UpdateOffset / GetOffset): (group, topic, queue)
-> offset.

They live in ``<root>/broker/consumer_offsets.json`` (state/layout.py), a checked document
(state/checked.py: CRC, previous version kept as ``.bak``) holding a JSON object whose keys
are ``[group, topic, queue]`` as JSON text, rewritten atomically at most once a second when
something changed (the broker's flush task) and at shutdown, as RocketMQ persists them
periodically: a crash can replay up to a second of commits (at-least-once), never lose
messages. A damaged file falls back to its previous version (commits of its last second
replayed); with both damaged the groups start without committed offsets (ERROR in the log):
consumers start where their clients start without one, and nothing is skipped.
"""

from __future__ import annotations

import json
import logging
import time

from ...io import FileIO
from ... import checked
from ..state.layout import StateLayout

log = logging.getLogger("tidemq.broker")


class GroupOffsets:
    def __init__(self, fio: FileIO, state_dir: str) -> None:
        """``state_dir``: the broker's state directory (state/layout.py)."""
        self.fio = fio
        self.path = StateLayout(state_dir).consumer_offsets
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.committed_at_ms: dict[tuple[str, str, int], int] = {}   # since start: for `group status`
        self._dirty = False
        self.loaded = checked.Loaded(None, checked.Source.NONE, "")

    def load(self) -> None:
        self.loaded = checked.load(self.fio, self.path, "consumer offsets", check=parse)
        if self.loaded.doc is not None:
            self.offsets = parse(self.loaded.doc)

    def get(self, group: str, topic: str, qid: int) -> int | None:
        return self.offsets.get((group, topic, qid))

    def set(self, group: str, topic: str, qid: int, offset: int) -> None:
        self.offsets[(group, topic, qid)] = offset
        self.committed_at_ms[(group, topic, qid)] = int(time.time() * 1000)
        self._dirty = True

    def within_queues(self, end_of) -> int:
        """Bring every committed offset past its queue's end (``end_of(topic, queue)``; None: leave it)
        back to that end: a promoted follower's copy of its old leader's offsets (ASYNC replication:
        the tail the failover took back), a failure of the commit log that cut the queues. The
        messages sent from now on take the offsets from the end on; a group committed past them
        would skip them for good. How many were moved."""
        moved = 0
        for (g, t, q), off in list(self.offsets.items()):
            end = end_of(t, q)
            if end is not None and off > end:
                log.warning("group %s, %s queue %d: its committed offset %d stood past the queue's end %d (a "
                            "failover or a failure of the log took that tail back); moved back to it", g, t, q,
                            off, end)
                self.offsets[(g, t, q)] = end
                self._dirty = True
                moved += 1
        return moved

    def forget_topic(self, topic: str) -> None:
        """A deleted topic: every group's offsets of it go."""
        for key in [k for k in self.offsets if k[1] == topic]:
            del self.offsets[key]
            self.committed_at_ms.pop(key, None)
            self._dirty = True

    def flush(self) -> None:
        """Write the offsets when something changed; a write that fails (a full disk) leaves the
        previous version readable and is made again at the next flush, changed since or not."""
        if self._dirty:
            self._dirty = False
            try:
                write(self.fio, self.path, dict(self.offsets))
            except BaseException:
                self._dirty = True
                raise


def write(fio: FileIO, path: str, offsets: dict[tuple[str, str, int], int]) -> None:
    """The offsets as the file holds them (a checked document; a follower writes its leader's
    copy with it too: replication/state.py)."""
    checked.write(fio, path, {json.dumps(list(k)): v for k, v in sorted(offsets.items())})


def parse(doc) -> dict[tuple[str, str, int], int]:
    """The offsets a document holds; raises on anything else (a damaged file that still parses)."""
    offsets = {}
    for k, v in doc.items():
        g, t, q = json.loads(k)
        if not (isinstance(g, str) and isinstance(t, str) and type(q) is int and type(v) is int and v >= 0):
            raise checked.Damaged(f"not an offset: {k}: {v!r}")
        offsets[(g, t, q)] = v
    return offsets
