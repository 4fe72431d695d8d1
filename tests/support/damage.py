"""Issue 12's damage scenarios for real-broker tests: one stopped store written once (several
small segments, several consume-queue files per queue, an index), copied per case, its files
damaged by hand, then read back through a broker and counted.

    pristine = build(root)                        # i -> Sent(phys, size, queue, queue offset)
    hit = flip(copy, pristine.sent, offset, 64)   # the messages whose records the damage touched
    crash_files(copy, abort=True, checkpoint="random")
    counts(pristine.sent, hit, served)            # {"intact_lost": 0, "damaged_served": 0}
"""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass
from typing import NamedTuple

from tidemq.store import Message, MessageStore, StoreConfig
from tidemq.testing.crash import crash_files  # noqa: F401 (tests use it as d.crash_files)

SEG = 128 << 10                 # commit-log segment: 2,400 messages fill about nine
UNITS = 256                     # consume-queue units per file: three files per queue
QUEUES = 4
TOPIC = "Dmg"
MESSAGES = 2400
# the same settings for the broker that reads the copies
ENV = {"TIDEMQ_SEGMENT_SIZE_BYTES": str(SEG), "TIDEMQ_CONSUME_QUEUE_UNITS_PER_SEGMENT": str(UNITS),
       "TIDEMQ_INDEX_SLOTS": "1000", "TIDEMQ_INDEX_ENTRIES": "8000", "TIDEMQ_PREALLOCATE_NEXT_SEGMENT": "false"}


class Sent(NamedTuple):
    phys: int
    size: int
    queue: int
    queue_offset: int


@dataclass
class Pristine:
    root: str
    sent: dict[int, Sent]


def body_of(i: int) -> bytes:
    return b"%06d|" % i + random.Random(i).randbytes(200 + i % 150)


def key_of(i: int) -> str:
    return "k%06d" % i


def config(root: str) -> StoreConfig:
    return StoreConfig(root_dir=root, segment_size_bytes=SEG, consume_queue_units_per_segment=UNITS,
                       index_slots=1000, index_entries=8000, preallocate_next_segment=False,
                       topic_queues_default=QUEUES, auto_create_topics=True)


def build(root: str) -> Pristine:
    s = MessageStore(config(root)).start()
    try:
        sent = {}
        for k in range(0, MESSAGES, 400):
            rs = s.put_batch([Message(TOPIC, body_of(i), keys=[key_of(i)]) for i in range(k, k + 400)])
            for j, r in enumerate(rs):
                assert r.ok, r
                sent[k + j] = Sent(r.commitlog_offset, r.size, r.queue_id, r.queue_offset)
        assert len(s.segments) >= 8, len(s.segments)
    finally:
        s.shutdown()
    return Pristine(root, sent)


def copy(p: Pristine, dest: str) -> str:
    shutil.copytree(p.root, dest)
    return dest


def segment_path(root: str, k: int) -> str:
    return os.path.join(root, "commitlog", "%020d" % (k * SEG))


def touched(sent: dict[int, Sent], lo: int, hi: int) -> set[int]:
    """The messages whose records overlap [lo, hi) of the log."""
    return {i for i, m in sent.items() if m.phys < hi and lo < m.phys + m.size}


def flip(root: str, sent: dict[int, Sent], offset: int, length: int) -> set[int]:
    with open(segment_path(root, offset // SEG), "r+b") as f:
        f.seek(offset % SEG)
        old = f.read(length)
        f.seek(offset % SEG)
        f.write(bytes(b ^ 0xFF for b in old))
    return touched(sent, offset, offset + length)


def truncate_segment(root: str, sent: dict[int, Sent], k: int) -> set[int]:
    with open(segment_path(root, k), "r+b") as f:
        f.truncate(SEG // 2)
    return touched(sent, k * SEG + SEG // 2, (k + 1) * SEG)


def queue_files(root: str, queue: int) -> list[str]:
    d = os.path.join(root, "consumequeue", TOPIC, str(queue))
    return [os.path.join(d, n) for n in sorted(os.listdir(d))]


def counts(sent: dict[int, Sent], hit: set[int], served: list[tuple[bytes, int, int]]) -> dict:
    """Of what a read back served, as (body, queue, queue offset): intact messages not served
    exactly once at their place, and records served that are not exactly a message as sent or
    that the damage touched."""
    by_body = {body_of(i): i for i in sent}
    times: dict[int, int] = {}
    bad = 0
    for body, queue, qoff in served:
        i = by_body.get(bytes(body))
        if i is None or (queue, qoff) != (sent[i].queue, sent[i].queue_offset):
            bad += 1
            continue
        times[i] = times.get(i, 0) + 1
    return {"intact_lost": sum(1 for i in sent if i not in hit and times.get(i) != 1),
            "damaged_served": bad + sum(1 for i in hit if i in times)}
