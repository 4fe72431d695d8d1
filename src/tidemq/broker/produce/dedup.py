"""The send dedup window: (topic, message id) -> (queue offset, transaction id) of recent
stores. The official clients resend a message with the same id after a timeout; the
retry is answered from here instead of being stored twice. In memory; across a restart
(or kill -9) the send path looks ids it misses up in the store's index for
send_dedup_after_restart_s after the start (send_path.SendPath.seen).

Two generations of per-topic dicts: entries go into the newer one; when it holds
``size`` entries it becomes the older one and the previous older one is dropped. So at
least the last ``size`` stores are recognised, at most ``2 x size``, and remembering a
batch costs one ``dict.update`` (no per-entry eviction, as an LRU would need). Size 0
turns the window off.
"""

from __future__ import annotations

from typing import Iterable


class DedupWindow:
    def __init__(self, size: int) -> None:
        self.size = size
        self._new: dict[str, dict[str, object]] = {}
        self._old: dict[str, dict[str, object]] = {}
        self._count = 0          # entries in the newer generation

    def get(self, topic: str, message_id: str) -> tuple[int, str] | None:
        """(queue offset, transaction id) of a recent store of this id, or None."""
        d = self._new.get(topic)
        v = d.get(message_id) if d is not None else None
        if v is None:
            d = self._old.get(topic)
            v = d.get(message_id) if d is not None else None
            if v is None:
                return None
        return v if type(v) is tuple else (v, "")

    def find_many(self, topic: str, message_ids: list) -> dict[int, tuple[int, str]]:
        """{index: (queue offset, transaction id)} of the ids (None: skipped) recently stored: one
        C-level disjointness test per generation when none is (the common case)."""
        out: dict[int, tuple[int, str]] = {}
        for d in (self._new.get(topic), self._old.get(topic)):
            if not d or d.keys().isdisjoint(message_ids):
                continue
            for i, m in enumerate(message_ids):
                if i not in out and m is not None:
                    v = d.get(m)
                    if v is not None:
                        out[i] = v if type(v) is tuple else (v, "")
        return out

    def put(self, topic: str, message_id: str, offset: int, txn: str = "") -> None:
        self.put_many(topic, ((message_id, (offset, txn) if txn else offset),))

    def put_many(self, topic: str, stored: Iterable[tuple[str, object]]) -> None:
        """``stored``: (message id, queue offset) pairs (or (id, (offset, transaction id)))."""
        if self.size <= 0:
            return                          # the window is off
        d = self._new.get(topic)
        if d is None:
            d = self._new[topic] = {}
        before = len(d)
        d.update(stored)
        self._count += len(d) - before
        if self._count >= self.size:
            self._old, self._new, self._count = self._new, {}, 0

    def __len__(self) -> int:
        return self._count + sum(len(d) for d in self._old.values())
