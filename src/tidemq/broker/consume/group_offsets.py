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

The document also says, under ``LAST``, which record each committed offset's last consumed message
was: [offset - 1, its commit-log offset] (``unit_at``, read when the file is written). A failure of the
commit log cuts the queues back (store/log_failure.py) and the next messages take the offsets again;
the broker's listener brings the committed offsets back to the cut (``within_queues``), but a kill -9
before it wrote them left them past the cut, at offsets the new messages took: skipped for good. At a
leader's start ``cut_where_reused`` finds such an offset (another record there now) and cuts it back to
the first offset whose record lies past the one it counted: the cut.
"""

from __future__ import annotations

import json
import logging
import time

from ...io import FileIO
from ... import checked
from ..state.layout import StateLayout
from .reused import reused_from

log = logging.getLogger("tidemq.broker")

LAST = "#last"        # the document's key of the fingerprints (no [group, topic, queue] key is spelt so)


class GroupOffsets:
    def __init__(self, fio: FileIO, state_dir: str, unit_at=None) -> None:
        """``state_dir``: the broker's state directory (state/layout.py). ``unit_at(topic, queue,
        offset)``: the commit-log offset of the record the queue holds at ``offset`` (None: none);
        without it no fingerprint is written (a follower's copy)."""
        self.fio = fio
        self.unit_at = unit_at
        self.last: dict[tuple[str, str, int], tuple[int, int]] = {}   # key -> (offset - 1, commit-log offset)
        self.path = StateLayout(state_dir).consumer_offsets
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.committed_at_ms: dict[tuple[str, str, int], int] = {}   # since start: for `group status`
        self._dirty = False
        self.loaded = checked.Loaded(None, checked.Source.NONE, "")

    def load(self) -> None:
        self.loaded = checked.load(self.fio, self.path, "consumer offsets", check=parse)
        if self.loaded.doc is not None:
            self.offsets = parse(self.loaded.doc)
            self.last = parse_last(self.loaded.doc)

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

    def cut_where_reused(self) -> int:
        """At a leader's start: every committed offset whose last consumed message is another record
        now (its fingerprint, module docstring) comes back to the first offset whose record lies past
        the one it counted, written at once. How many were moved."""
        if self.unit_at is None:
            return 0
        moved = 0
        for key, last in list(self.last.items()):
            g, t, qid = key
            off = self.offsets.get(key)
            if off is None:
                continue
            cut = reused_from(lambda o: self.unit_at(t, qid, o), last, off)
            if cut is None:
                continue
            log.warning("group %s, %s queue %d: its committed offset %d counted a record that offset %d no longer "
                        "holds (a failure of the log took it, and its offsets were taken again); moved back to %d",
                        g, t, qid, off, last[0], cut)
            self.offsets[key] = cut
            self._dirty = True
            moved += 1
        if moved:
            self.flush()
        return moved

    def _fingerprints(self) -> dict[tuple[str, str, int], tuple[int, int]]:
        if self.unit_at is None:
            return {}
        last = {}
        for key, off in self.offsets.items():
            fp = self.last.get(key)
            if fp is not None and fp[0] == off - 1:
                last[key] = fp
                continue
            if off <= 0:
                continue
            try:
                p = self.unit_at(key[1], key[2], off - 1)
            except OSError:
                p = None
            if p is not None and p >= 0:
                last[key] = (off - 1, p)
        self.last = last
        return last

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
                write(self.fio, self.path, dict(self.offsets), self._fingerprints())
            except BaseException:
                self._dirty = True
                raise


def write(fio: FileIO, path: str, offsets: dict[tuple[str, str, int], int],
          last: dict[tuple[str, str, int], tuple[int, int]] | None = None) -> None:
    """The offsets as the file holds them (a checked document; a follower writes its leader's
    copy with it too: replication/state.py), with their fingerprints (``last``) when given."""
    doc = {json.dumps(list(k)): v for k, v in sorted(offsets.items())}
    if last:
        doc[LAST] = {json.dumps(list(k)): list(v) for k, v in sorted(last.items())}
    checked.write(fio, path, doc)


def parse_last(doc) -> dict[tuple[str, str, int], tuple[int, int]]:
    """The fingerprints a document holds (none: an older file, or a follower's copy)."""
    last = {}
    for k, v in (doc.get(LAST) or {}).items():
        g, t, q = json.loads(k)
        if not (isinstance(v, list) and len(v) == 2 and all(type(x) is int and x >= 0 for x in v)):
            raise checked.Damaged(f"not a fingerprint: {k}: {v!r}")
        last[(g, t, q)] = (v[0], v[1])
    return last


def parse(doc) -> dict[tuple[str, str, int], int]:
    """The offsets a document holds; raises on anything else (a damaged file that still parses)."""
    offsets = {}
    for k, v in doc.items():
        if k == LAST:
            parse_last(doc)
            continue
        g, t, q = json.loads(k)
        if not (isinstance(g, str) and isinstance(t, str) and type(q) is int and type(v) is int and v >= 0):
            raise checked.Damaged(f"not an offset: {k}: {v!r}")
        offsets[(g, t, q)] = v
    return offsets
