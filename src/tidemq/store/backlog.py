"""What consumer groups have not consumed, as far as cleanup is concerned: the space policy's
guard (topics.SpacePolicy) and the report of what a deletion took from each group.

The store does not know consumer groups (the broker does: committed pull offsets, pop cursors
with messages in flight). It learns their positions through a *provider* the broker passes in
(``MessageStore.set_consumer_positions``)::

    positions(topic) -> {group: {queue id: the first offset the group has not consumed}}

A group the provider names for a topic is *subscribed* to it; a queue the group has no position
for counts as not consumed at all (its position is the queue's minimum). Called from the
cleanup thread, once per REFUSE topic and round, and after a deletion.

* ``BacklogGuard.hold(segment)``: before cleanup deletes an unexpired segment for space, whether
  it holds a message of a REFUSE topic at or above the lowest position of a subscribed group
  (a queue's units point into the log in order, so one unit per queue tells: the one at that
  position lies before the segment's end). Then the segment stays and writes are refused
  (PutReason.UNCONSUMED_BACKLOG) until the groups have consumed it.
* ``BacklogGuard.losses(lost)``: for what a deletion took from each queue (queue offsets
  [first, end), cleaner.LostRange), which subscribed groups had not consumed which of them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Mapping

from .consume_queue import UNIT, ConsumeQueueTable
from .topics import TopicTable

log = logging.getLogger("tidemq.store")

Positions = Callable[[str], Mapping[str, Mapping[int, int]]]
GROUPS_NAMED_MAX = 5          # groups named in one hold's text


@dataclass(frozen=True)
class Hold:
    """A segment cleanup may not delete: ``topic``/``queue_id`` from ``offset`` on is in it and
    ``groups`` (subscribed, space policy refuse) have not consumed it."""
    segment: str
    topic: str
    queue_id: int
    offset: int
    groups: tuple[str, ...]

    @property
    def text(self) -> str:
        more = len(self.groups) - GROUPS_NAMED_MAX
        names = ", ".join(self.groups[:GROUPS_NAMED_MAX]) + (f" and {more} more" if more > 0 else "")
        return (f"space is short and segment {self.segment} holds messages of topic {self.topic} "
                f"(space_policy=refuse) that group(s) {names} have not consumed (queue {self.queue_id} from "
                f"offset {self.offset}): writes are refused until they are consumed (or the groups reset, "
                f"or the topic's space policy set to evict)")


@dataclass(frozen=True)
class GroupLoss:
    """Messages of one queue that a cleanup deleted before ``group`` consumed them: [first, end)."""
    group: str
    topic: str
    queue_id: int
    first: int
    end: int

    @property
    def messages(self) -> int:
        return self.end - self.first

    def as_dict(self) -> dict:
        return {"group": self.group, "topic": self.topic, "queue_id": self.queue_id, "first": self.first,
                "end": self.end, "messages": self.messages}

    def words(self) -> str:
        return f"{self.group} {self.topic}/{self.queue_id} {self.first}..{self.end - 1}"


def _phys(cq, offset: int) -> int | None:
    raw = cq.read(offset, 1)
    return UNIT.unpack(raw)[0] if raw else None


def _first_unit_from(cq, lo: int, hi: int, phys_min: int) -> int:
    """The first queue offset in [lo, hi) whose unit points at or after ``phys_min`` (hi: none);
    units point into the log in order, so a binary search."""
    while lo < hi:
        mid = (lo + hi) // 2
        p = _phys(cq, mid)
        if p is not None and p >= phys_min:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _groups_in(cq, behind: list[tuple[int, str]], low: int, hi: int, end: int) -> tuple[str, ...]:
    """The groups (``behind``: (position, name), ascending) whose first unconsumed message of the
    queue lies before log offset ``end``."""
    out = []
    for off, name in behind:
        if off >= hi:
            break
        if off > low:
            p = _phys(cq, off)
            if p is None or p >= end:
                break                       # positions ascend, and so do the units' log offsets
        out.append(name)
    return tuple(out)


class BacklogGuard:
    def __init__(self, topics: TopicTable, queues: ConsumeQueueTable, positions: Positions | None = None) -> None:
        self.topics = topics
        self.queues = queues
        self.positions = positions

    def _positions(self, topic: str) -> Mapping[str, Mapping[int, int]]:
        if self.positions is None:
            return {}
        for _ in range(3):
            try:
                return dict(self.positions(topic))
            except RuntimeError:          # a dict the broker changed while it was read: again
                continue
            except Exception as e:  # noqa: BLE001 - the provider is the broker's; never out of a cleanup
                log.warning("consumer positions of topic %s could not be read (%r): taken as none", topic, e)
                return {}
        return {}

    def hold(self, mf) -> Hold | None:
        """Why segment ``mf`` may not be deleted for space, or None."""
        end = mf.start_offset + mf.size
        for t in self.topics.refusing():
            groups = self._positions(t.name)
            if not groups:
                continue                                  # no subscription: nothing to keep for anyone
            for qid in range(t.queue_count):
                cq = self.queues.get(t.name, qid)
                if cq is None or cq.max_offset <= cq.min_offset:
                    continue
                lo, hi = cq.min_offset, cq.max_offset
                behind = sorted((max(lo, int(g.get(qid, lo))), name) for name, g in groups.items())
                low = behind[0][0]
                if low >= hi:
                    continue                              # every group consumed the whole queue
                phys = _phys(cq, low)
                if phys is not None and phys < mf.start_offset:
                    # deleted already (the queue's minimum is corrected after the round): the first
                    # unconsumed unit still in the log
                    low = _first_unit_from(cq, low, hi, mf.start_offset)
                    phys = _phys(cq, low) if low < hi else None
                if phys is not None and phys < end:
                    return Hold(mf.path, t.name, qid, low, _groups_in(cq, behind, low, hi, end))
        return None

    def losses(self, lost) -> list[GroupLoss]:
        """Per subscribed group, the messages of ``lost`` (cleaner.LostRange) it had not consumed."""
        out: list[GroupLoss] = []
        by_topic: dict[str, Mapping[str, Mapping[int, int]]] = {}
        for r in lost:
            if r.topic not in by_topic:
                by_topic[r.topic] = self._positions(r.topic)
            for name, g in sorted(by_topic[r.topic].items()):
                first = max(r.first, int(g.get(r.queue_id, r.first)))
                if first < r.end:
                    out.append(GroupLoss(name, r.topic, r.queue_id, first, r.end))
        return out
