"""Damage never costs an intact message and is never served (issue 12), on a real broker: one
stopped store (nine 128 KiB segments, 2,400 messages in four queues of three files each, an
index) written once and copied per case; its files damaged by hand (a record flipped in a middle
segment with and without an abort file, with a valid, empty or random checkpoint; a middle
segment truncated to half; the topic's consume-queue directory deleted, with and without
config/queues.json; a queue file cut to half; a queue file deleted; the index deleted); then
``tidemq serve`` starts on it and every queue is read back through PullMessage and PullRecords.
Counted per read path: intact messages not served exactly once at their place (must be 0) and
damaged records served (must be 0). Each case prints its figures (``-s``): start time until the
broker said ready, records the damage touched, what each path served."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from tidemq.client import PullConsumer
from tidemq.protocol.stubs import Code

from ..support import damage as d
from ..support.brokers import admin_call

MIDDLE = 4                       # the segment damaged: others before and after it


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return d.build(str(tmp_path_factory.mktemp("damage") / "pristine"))


def read_back(endpoint: str, pull) -> list[tuple[bytes, int, int]]:
    """Every queue from offset 0 to its end: ``pull(consumer, queue, offset)`` -> (served as
    (body, queue, queue offset), the next offset, whether the queue ended)."""
    out = []
    with PullConsumer(endpoint, timeout_s=60) as c:
        for q in range(d.QUEUES):
            off = 0
            while True:
                got, nxt, ended = pull(c, q, off)
                out += got
                if ended or nxt <= off:
                    break
                off = nxt
    return out


def by_pull_message(c, q, off):
    r = c.pull(d.TOPIC, q, off, batch_size=64)
    return ([(m.body, q, m.system_properties.queue_offset) for m in r.messages], r.next_offset,
            r.code == Code.ILLEGAL_OFFSET)


def by_pull_records(c, q, off):
    r = c.pull_records(d.TOPIC, q, off, max_count=512)
    return [(m.body, m.queue_id, m.queue_offset) for m in r.messages()], r.next_offset, off >= r.max_offset


def cp_half(root, sent):
    f = d.queue_files(root, 0)[-1]
    os.truncate(f, os.path.getsize(f) // 2 // 20 * 20)
    return set()


def cp_file_deleted(root, sent):
    os.unlink(d.queue_files(root, 1)[1])           # the middle one of three
    return set()


def cp_dir_deleted(root, sent):
    shutil.rmtree(os.path.join(root, "consumequeue", d.TOPIC))
    return set()


def cp_dir_and_summary_deleted(root, sent):
    os.unlink(os.path.join(root, "config", "queues.json"))
    return cp_dir_deleted(root, sent)


def index_deleted(root, sent):
    shutil.rmtree(os.path.join(root, "index"))
    return set()


def flip_middle(root, sent):
    return d.flip(root, sent, MIDDLE * d.SEG + d.SEG // 2, 64)


def truncated_middle(root, sent):
    return d.truncate_segment(root, sent, MIDDLE)


CASES = [
    # (name, damage, abort file, checkpoint)
    *[(f"flip-mid-segment-abort={a}-checkpoint={cp}", flip_middle, a, cp)
      for a in (True, False) for cp in ("valid", "empty", "random")],
    ("truncated-mid-segment-abort=True-checkpoint=empty", truncated_middle, True, "empty"),
    ("truncated-mid-segment-abort=False-checkpoint=valid", truncated_middle, False, "valid"),
    ("consumequeue-dir-deleted", cp_dir_deleted, False, "valid"),
    ("consumequeue-dir-and-queues.json-deleted", cp_dir_and_summary_deleted, False, "valid"),
    ("queue-file-cut-to-half", cp_half, False, "valid"),
    ("queue-file-deleted", cp_file_deleted, False, "valid"),
    ("index-deleted", index_deleted, False, "valid"),
]


@pytest.mark.parametrize("name,damage,abort,checkpoint", CASES, ids=[c[0] for c in CASES])
def test_a_damaged_store_serves_every_intact_message_and_nothing_damaged(pristine, broker_factory, tmp_path,
                                                                          name, damage, abort, checkpoint):
    root = d.copy(pristine, str(tmp_path / "store"))
    hit = damage(root, pristine.sent)
    d.crash_files(root, abort, checkpoint)
    t0 = time.perf_counter()
    b = broker_factory(root, env=d.ENV)
    start_s = time.perf_counter() - t0
    by_pull = d.counts(pristine.sent, hit, read_back(b.endpoint, by_pull_message))
    by_records = d.counts(pristine.sent, hit, read_back(b.endpoint, by_pull_records))
    print(f"\n{name}: start {start_s:.2f} s, records touched {len(hit)}, PullMessage {by_pull}, "
          f"PullRecords {by_records}")
    assert by_pull == {"intact_lost": 0, "damaged_served": 0}, by_pull
    assert by_records == {"intact_lost": 0, "damaged_served": 0}, by_records
    if damage is index_deleted:
        for i in range(0, d.MESSAGES, 97):
            got = admin_call(b.endpoint, "Query", {"topic": d.TOPIC, "key": d.key_of(i)})["messages"]
            m = pristine.sent[i]
            assert [(x["queue"], x["queue_offset"]) for x in got] == [(m.queue, m.queue_offset)], (i, got)
    assert b.stop() == 0
