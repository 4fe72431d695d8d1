"""What per-topic retention costs a cleanup round with 10,000 topics (issue 33.2).

    .venv/bin/python bench/topic_retention.py            # 10,000 topics, 5 rounds
    .venv/bin/python bench/topic_retention.py --quick    # 2,000 topics, 3 rounds

Set-up (untimed): a store with TOPICS topics of one queue each (topics.json written before the first
start: creating 10,000 topics one by one rewrites the file each time), two 200-byte messages per topic
put round-robin over the topics twice, so every topic has messages in the head segment; 1 MiB
segments. The head segment is the one the cleaner would decide about.

Reference, measured next to every sample: ``QueueCleaner.run_round`` — the part of every cleanup
round that already visits every consume queue (files behind the log, minimum offsets): what a round
costs today with this many topics.

Variants (each the retention decision for the head segment, TopicRetention.holds, as the cleaner
calls it when some topic has a setting of its own):
* ``all own, warm`` — every topic with a retention_hours of its own that allows the segment to go:
  every topic is looked at (the whole walk), the first-unit cache filled by an earlier round: the
  steady state;
* ``all own, cold`` — the same with the cache emptied: the first round after a start, or after the
  queues' minimums moved everywhere (one consume-queue read per queue);
* ``one short, warm`` — one topic with a short retention, the others with none: the decision must
  look for any topic without a retention of its own in the segment (it stops at the first found);
* ``one short, all absent`` — the worst case of that: the head segment holds only the short topic,
  every other topic is looked at and found absent.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from _report import Report, progress, scratch_dir, settle

from tidemq.config import MIB, StoreConfig
from tidemq.layout import TOPICS_FILE
from tidemq.store import Message, MessageStore
from tidemq.store.cleaner import QueueCleaner
from tidemq.store.topic_retention import TopicRetention
from tidemq.store.topics import TopicSettings


def make_store(root: str, topics: int, head_only_one: bool) -> MessageStore:
    cfg = StoreConfig(root_dir=root, segment_size_bytes=1 * MIB, index_enabled=False, preallocate_next_segment=False,
                      consume_queue_units_per_segment=1024)
    os.makedirs(cfg.config_path, exist_ok=True)
    names = [f"T{i:05d}" for i in range(topics)]
    with open(os.path.join(cfg.config_path, TOPICS_FILE), "w") as fh:
        json.dump({"topics": {n: {"queue_count": 1} for n in names}}, fh)
    s = MessageStore(cfg).start()
    body = b"x" * 200
    if head_only_one:                     # the head segment: one topic alone
        for _ in range(1 * MIB // 300 + 10):
            assert s.put(Message(names[0], body)).ok
    for _ in range(2):
        s.put_batch([Message(n, body) for n in names])
    return s


def timed(fn, repeat: int) -> float:
    """Seconds per call (the median of ``repeat`` calls)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    a = ap.parse_args()
    topics = 2_000 if a.quick else 10_000
    rounds = a.rounds or (3 if a.quick else 5)
    rep = Report("topic_retention", unit="decisions/s", reference="QueueCleaner.run_round",
                 params={"topics": topics, "queues_per_topic": 1, "rounds": rounds, "segment_size_bytes": MIB},
                 reference_doc="the consume-queue pass every cleanup round makes already (files behind the log, "
                               "minimum offsets), over the same queues")
    for v in ("all own, warm", "all own, cold", "one short, warm", "one short, all absent"):
        rep.ratio(v, None)
    with scratch_dir("topic_retention") as tmp:
        progress(f"filling {topics} topics")
        s = make_store(os.path.join(tmp, "a"), topics, head_only_one=False)
        s2 = make_store(os.path.join(tmp, "b"), topics, head_only_one=True)
        try:
            qc = QueueCleaner(s.queues, None)
            head = s.segments.segments[0]
            end, newest = head.start_offset + head.size, head.last_store_timestamp_ms
            now = newest + 1000
            names = list(s.topics.topics)
            for r in range(rounds):
                settle()
                ref = 1 / timed(lambda: qc.run_round(s.segments.min_offset), 3)
                rep.add("QueueCleaner.run_round", ref)
                for n in names:                  # every topic: a retention of its own that lets the head go
                    s.topics.topics[n].settings = TopicSettings(retention_hours=0.0)
                ret = TopicRetention(s.topics, s.queues)
                assert ret.holds(end, newest, now, expired=True) is None          # (fills the cache)
                assert ret.queues_read == topics, "every topic was looked at"
                rep.add("all own, warm", 1 / timed(lambda: ret.holds(end, newest, now, True), 3), ref=ref)

                def cold():
                    ret._first.clear()
                    ret.holds(end, newest, now, True)
                rep.add("all own, cold", 1 / timed(cold, 3), ref=ref)
                for n in names:
                    s.topics.topics[n].settings = TopicSettings()
                s.topics.topics[names[0]].settings = TopicSettings(retention_hours=0.0)
                ret = TopicRetention(s.topics, s.queues)
                ret.holds(end, newest, now, False)
                rep.add("one short, warm", 1 / timed(lambda: ret.holds(end, newest, now, False), 3), ref=ref)
                n2 = list(s2.topics.topics)
                s2.topics.topics[n2[0]].settings = TopicSettings(retention_hours=0.0)
                h2 = s2.segments.segments[0]
                ret2 = TopicRetention(s2.topics, s2.queues)
                e2, nw2 = h2.start_offset + h2.size, h2.last_store_timestamp_ms
                assert ret2.holds(e2, nw2, nw2 + 1000, False) is None, "only the short topic is in the head"
                rep.add("one short, all absent", 1 / timed(lambda: ret2.holds(e2, nw2, nw2 + 1000, False), 3),
                        ref=ref)
                progress(f"round {r}: reference {1e3 / ref:.1f} ms; all own warm {1e3 / rep.samples['all own, warm'][-1]:.1f} ms, "
                         f"cold {1e3 / rep.samples['all own, cold'][-1]:.1f} ms; one short "
                         f"{1e3 / rep.samples['one short, warm'][-1]:.2f} ms, all absent "
                         f"{1e3 / rep.samples['one short, all absent'][-1]:.1f} ms")
        finally:
            s.shutdown()
            s2.shutdown()
        rep.note("decisions/s: 1 / seconds of one decision (median of 3 calls); the ratio is against the "
                 "consume-queue pass every round makes already, measured right before, in the same run.")
        rep.note("Topics without a setting of their own cost nothing while no topic has one (the cleaner does "
                 "not call the decision at all).")
        rep.write(tmp)


if __name__ == "__main__":
    main()
