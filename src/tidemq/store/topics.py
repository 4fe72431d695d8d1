"""Topics and their queue counts, kept in ``<root>/config/topics.json``.

Written atomically (write, fsync, rename, fsync dir): after any crash the file
is the old or the new version, never a torn one. Queues found on disk that the
file does not know (a crash between the first put and the file write) are added
back at start, so no message becomes unreachable.
"""

from __future__ import annotations

import json
import os
import threading

from ..io import FileIO, read_whole, write_atomic
from . import codec
from .layout import TOPICS_FILE
from .types import StoreError



class TopicState:
    """In-memory state of one topic for the write path."""

    __slots__ = ("name", "name_bytes", "queue_count", "next_offsets", "queues", "rr", "tag_cache", "tail_prefix_crc",
                 "write_ids")

    def __init__(self, name: str, queue_count: int) -> None:
        self.name = name
        self.name_bytes = name.encode("ascii")
        self.queue_count = queue_count
        self.next_offsets = [0] * queue_count   # next queue offset per queue id
        self.queues: list = [None] * queue_count  # ConsumeQueue per queue id (set by the store)
        self.rr = 0
        # the queues a put without a queue id goes to, round-robin: all of them, or (a topic spread over
        # several broker groups) the ones this store's group owns
        self.write_ids: range | tuple[int, ...] = range(queue_count)
        self.tag_cache: dict = {}   # tags -> (properties bytes, tags hash, tail CRC): the write path's cache
        self.tail_prefix_crc: dict = {}   # properties length -> codec.tail_prefix_crc (put_encoded's cache)


class TopicTable:
    def __init__(self, fio: FileIO, config_dir: str) -> None:
        self.fio = fio
        self.dir = config_dir
        self.path = os.path.join(config_dir, TOPICS_FILE)
        self.topics: dict[str, TopicState] = {}
        # deleted topics: name -> the log's end when it was deleted; its records before that offset
        # belong to the deleted topic (never dispatched again, never found), even once re-created
        self.deleted: dict[str, int] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        self.fio.makedirs(self.dir)
        if not self.fio.exists(self.path):
            return
        try:
            doc = json.loads(read_whole(self.fio, self.path).decode("utf-8"))
            for name, t in doc.get("topics", {}).items():
                self.topics[name] = TopicState(name, int(t["queue_count"]))
            self.deleted = {str(n): int(o) for n, o in doc.get("deleted", {}).items()}
        except (ValueError, KeyError, TypeError) as e:
            raise StoreError(f"{self.path} is unreadable ({e}); restore it or remove it "
                             f"(queues found on disk are added back)") from e

    def save(self) -> None:
        with self._lock:
            doc = {"topics": {n: {"queue_count": t.queue_count} for n, t in sorted(self.topics.items())}}
            if self.deleted:
                doc["deleted"] = dict(sorted(self.deleted.items()))
        write_atomic(self.fio, self.path, json.dumps(doc, indent=1).encode("utf-8"))

    def delete(self, name: str, log_end: int) -> TopicState | None:
        """Forget a topic (None if unknown); its records before ``log_end`` stay dead. Saved before
        it returns (OSError: nothing changed)."""
        with self._lock:
            t = self.topics.pop(name, None)
            if t is None:
                return None
            was = self.deleted.get(name)
            self.deleted[name] = log_end
        try:
            self.save()
        except OSError:
            with self._lock:
                self.topics[name] = t
                if was is None:
                    self.deleted.pop(name, None)
                else:
                    self.deleted[name] = was
            raise
        return t

    def is_dead(self, topic: str, phys: int) -> bool:
        """Whether the record of ``topic`` at log offset ``phys`` belongs to a deleted topic."""
        return phys < self.deleted.get(topic, -1)

    def forget_deleted_before(self, log_min: int) -> None:
        """Deleted topics whose every record the cleaner has removed need no remembering."""
        if any(end <= log_min for end in self.deleted.values()):
            with self._lock:
                self.deleted = {n: end for n, end in self.deleted.items() if end > log_min}
            self.save()

    def get(self, name: str) -> TopicState | None:
        return self.topics.get(name)

    def create(self, name: str, queue_count: int, save: bool = True) -> TopicState:
        problem = codec.topic_problem(name)
        if problem is not None:
            raise ValueError(problem)
        if queue_count < 1:
            raise ValueError("a topic needs at least one queue")
        with self._lock:
            t = self.topics.get(name)
            was = None if t is None else t.queue_count
            if t is None:
                t = self.topics[name] = TopicState(name, queue_count)
            elif queue_count > t.queue_count:
                grow = queue_count - t.queue_count
                t.next_offsets.extend([0] * grow)
                t.queues.extend([None] * grow)
                t.queue_count = queue_count
                if isinstance(t.write_ids, range):
                    t.write_ids = range(queue_count)
            else:
                save = False
        if save:
            try:
                self.save()
            except OSError:
                # not saved: not created (nor grown), so nobody puts into queues that were never bound
                with self._lock:
                    if was is None:
                        self.topics.pop(name, None)
                    else:
                        del t.next_offsets[was:], t.queues[was:]
                        t.queue_count = was
                        if isinstance(t.write_ids, range):
                            t.write_ids = range(was)
                raise
        return t
