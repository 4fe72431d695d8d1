"""What one member of ``tidemq serve --processes N`` knows of the others (see __init__.py).

``Siblings`` reads ``members.json`` (the members' endpoints, written by the parent) and
``topics.json`` (the cluster's topics and their queue counts, written by whichever member took a
CreateTopic) and answers, as a topic spread over broker groups is answered (replication/topology.py):

* ``route(topic)``: (member view, its queue ids) per member, for QueryRoute; None for a topic the
  cluster does not know (then the member answers for its own store alone);
* ``spread(topic)``: (queue count, the queues this member owns), for the send path
  (produce/send_path.py ``ensure_topic`` makes the topic local with those queues on first use);
* ``create_topic(name, queues)``: the cluster's topic made (never shrunk), under a file lock.

A watcher thread re-reads both files every ``RELOAD_S`` and makes every cluster topic local to
this member's store, so a receive on a member that never took a send finds the topic. Reads on
the send path are dict look-ups; a topic not known re-reads the files (a stat when unchanged).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time

from . import MEMBERS_FILE, TOPICS_FILE, TOPICS_LOCK, multi_dir, owned_queues

log = logging.getLogger("tidemq.broker")

RELOAD_S = 1.0
TOPICS_MAX = 100_000            # bounds on what topics.json may name (a damaged or hostile file)
QUEUES_MAX = 65_536


class MultiError(Exception):
    """The parent's root cannot be used for N members (another parent, another N, a single store)."""


def read_json(path: str):
    """A file's JSON, or None (missing, or not JSON: a torn write is never read, see write_json)."""
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read())
    except (OSError, ValueError):
        return None


def write_json(path: str, doc) -> None:
    """Written whole or not at all: a temporary file, fsync, rename, fsync of the directory."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(json.dumps(doc, sort_keys=True).encode())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _stamp(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class Siblings:
    def __init__(self, root: str, index: int, count: int, broker_name: str = "tidemq",
                 clock=time.monotonic) -> None:
        """``root``: the parent's root (members' stores are its p<i>); ``index`` of ``count`` members."""
        if not 0 <= index < count:
            raise ValueError(f"member {index} of {count}")
        self.root = root
        self.index = index
        self.count = count
        self.broker_name = broker_name
        self.clock = clock
        self.dir = multi_dir(root)
        self.members_path = os.path.join(self.dir, MEMBERS_FILE)
        self.topics_path = os.path.join(self.dir, TOPICS_FILE)
        self.topics: dict[str, int] = {}
        self.endpoints: list[str] = []
        self._stamps = (None, None)
        self._due_s = 0.0
        self._lock = threading.Lock()
        self._store = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reload(force=True)

    # reading ---------------------------------------------------------------------------------
    def reload(self, force: bool = False) -> bool:
        """Re-read the files when they changed; True when something did."""
        stamps = (_stamp(self.members_path), _stamp(self.topics_path))
        if not force and stamps == self._stamps:
            return False
        members = read_json(self.members_path) or {}
        topics = read_json(self.topics_path) or {}
        eps = [str(m.get("endpoint", "")) for m in members.get("members", []) if isinstance(m, dict)]
        got = {}
        raw = topics.get("topics", {}) if isinstance(topics, dict) else {}
        if isinstance(raw, dict):
            for name, q in list(raw.items())[:TOPICS_MAX]:
                if isinstance(name, str) and type(q) is int and 0 < q <= QUEUES_MAX:
                    got[name] = q
        with self._lock:
            self._stamps = stamps
            if len(eps) == self.count:
                self.endpoints = eps
            self.topics = got
        return True

    def _fresh(self, topic: str) -> int | None:
        q = self.topics.get(topic)
        now = self.clock()
        if q is None or now >= self._due_s:     # unknown: maybe made by another member just now
            self._due_s = now + RELOAD_S
            self.reload()
            q = self.topics.get(topic)
        return q

    def spread(self, topic: str) -> tuple[int, tuple[int, ...]] | None:
        """(queue count, the queues this member owns) of a cluster topic, else None."""
        q = self._fresh(topic)
        if q is None:
            return None
        return q, owned_queues(self.index, self.count, q)

    def route(self, topic: str) -> list[tuple[dict, list[int]]] | None:
        """(member view, its queue ids) per member owning queues of ``topic``; None when the cluster
        does not know the topic (or the members' endpoints are not known yet)."""
        q = self._fresh(topic)
        eps = self.endpoints
        if q is None or len(eps) != self.count:
            return None
        out = []
        for i, ep in enumerate(eps):
            qids = list(owned_queues(i, self.count, q))
            if qids:
                out.append(({"group": f"{self.broker_name}-p{i}", "leader": ep, "members": {}}, qids))
        return out

    def member_endpoints(self) -> list[str]:
        return list(self.endpoints)

    # writing ---------------------------------------------------------------------------------
    def create_topic(self, name: str, queues: int) -> int:
        """The cluster's topic ``name`` with at least ``queues`` queues (never fewer than it had):
        its queue count now. Made local here; the other members make it local within RELOAD_S (and
        their send path at once, from the file)."""
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, TOPICS_LOCK), "a+b") as lk:
            fcntl.flock(lk.fileno(), fcntl.LOCK_EX)
            doc = read_json(self.topics_path)
            if not isinstance(doc, dict) or not isinstance(doc.get("topics"), dict):
                doc = {"topics": {}}
            topics = doc["topics"]
            if not 0 < queues <= QUEUES_MAX:
                raise ValueError(f"{queues} queues: at most {QUEUES_MAX}")
            if name not in topics and len(topics) >= TOPICS_MAX:
                raise ValueError(f"the cluster has {len(topics)} topics (at most {TOPICS_MAX})")
            had = topics.get(name)
            now = max(queues, had if isinstance(had, int) else 0)
            if had != now:
                topics[name] = now
                write_json(self.topics_path, doc)
        self.reload(force=True)
        self.apply(name)
        return now

    # making the cluster's topics local ----------------------------------------------------------
    def apply(self, name: str) -> None:
        """Make cluster topic ``name`` local to this member's store with the queues it owns."""
        store = self._store
        q = self.topics.get(name)
        if store is None or q is None:
            return
        owned = owned_queues(self.index, self.count, q)
        if not owned:
            return
        if store.queue_count(name) >= q and set(store.write_queues(name)) == set(owned):
            return
        store.create_spread_topic(name, q, owned)
        log.info("topic %s: %d queue(s) over %d processes, member %d owns %s", name, q, self.count, self.index,
                 list(owned))

    def attach(self, store) -> None:
        """Start making the cluster's topics local to ``store`` (now and every RELOAD_S)."""
        self._store = store
        self._apply_all()
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="multi-siblings", daemon=True)
            self._thread.start()

    def _apply_all(self) -> None:
        for name in list(self.topics):
            try:
                self.apply(name)
            except (ValueError, OSError) as e:
                log.error("topic %s of the cluster cannot be made here: %s", name, e)

    def _watch(self) -> None:
        while not self._stop.wait(RELOAD_S):
            try:
                if self.reload():
                    self._apply_all()
            except Exception:           # the watcher never dies silently: said, and tried again
                log.exception("reading the cluster's members and topics failed")

    def close(self) -> None:
        self._stop.set()
        t, self._thread = self._thread, None
        if t is not None:
            t.join()
