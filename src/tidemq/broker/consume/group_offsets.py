"""The committed offsets of consumer groups (UpdateOffset / GetOffset): (group, topic, queue)
-> offset.

They live in ``<root>/broker/consumer_offsets.json`` (state/layout.py), a JSON object whose
keys are ``[group, topic, queue]`` as JSON text, rewritten atomically at most once a second
when something changed (the broker's flush task) and at shutdown, as RocketMQ persists them
periodically: a crash can replay up to a second of commits (at-least-once), never lose
messages.
"""

from __future__ import annotations

import json
import time

from ...io import FileIO, read_whole, write_atomic
from ..state.layout import StateLayout


class GroupOffsets:
    def __init__(self, fio: FileIO, state_dir: str) -> None:
        """``state_dir``: the broker's state directory (state/layout.py)."""
        self.fio = fio
        self.path = StateLayout(state_dir).consumer_offsets
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.committed_at_ms: dict[tuple[str, str, int], int] = {}   # since start: for `group status`
        self._dirty = False

    def load(self) -> None:
        if self.fio.exists(self.path):
            doc = json.loads(read_whole(self.fio, self.path))
            self.offsets = {tuple(json.loads(k)): v for k, v in doc.items()}

    def get(self, group: str, topic: str, qid: int) -> int | None:
        return self.offsets.get((group, topic, qid))

    def set(self, group: str, topic: str, qid: int, offset: int) -> None:
        self.offsets[(group, topic, qid)] = offset
        self.committed_at_ms[(group, topic, qid)] = int(time.time() * 1000)
        self._dirty = True

    def forget_topic(self, topic: str) -> None:
        """A deleted topic: every group's offsets of it go."""
        for key in [k for k in self.offsets if k[1] == topic]:
            del self.offsets[key]
            self.committed_at_ms.pop(key, None)
            self._dirty = True

    def flush(self) -> None:
        if self._dirty:
            self._dirty = False
            doc = {json.dumps(list(k)): v for k, v in sorted(self.offsets.items())}
            write_atomic(self.fio, self.path, json.dumps(doc).encode())
