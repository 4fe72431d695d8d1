"""Consume-queue damage scenarios of issue 12 (4 MiB segments, 30,000 messages of topic T in 4
queues, a message of U between batches): intact, consumequeue/T deleted, one queue file cut to
half (each also with config/queues.json deleted), each after a clean stop and with an abort file;
prints messages readable and start time.

    .venv/bin/python scripts/heal_scenarios.py
"""
import os
import shutil
import tempfile
import time

from tidemq.store import MessageStore, Message, StoreConfig
def cfg(root): return StoreConfig(root_dir=root, auto_create_topics=True, segment_size_bytes=4 << 20, topic_queues_default=4,
                                   index_slots=10000, index_entries=40000)
def build(root):
    shutil.rmtree(root, ignore_errors=True)
    s = MessageStore(cfg(root)).start()
    for i in range(0, 30000, 500):
        s.put_batch([Message("T", b"x" * 400 + b"%06d" % (i + k)) for k in range(500)])
        s.put(Message("U", b"other"))
    s.shutdown()
def count(s):
    n = 0
    for q in range(s.queue_count("T")):
        off = 0
        while True:
            r = s.get("g", "T", q, off, 1000)
            if not r.messages: break
            n += len(r.messages); off = r.next_offset
    return n
def run(name, damage, crash):
    root = os.path.join(tempfile.gettempdir(), "tidemq-heal-scenarios"); build(root); damage(root)
    if crash: open(os.path.join(root, "abort"), "w").close()
    t = time.perf_counter(); s = MessageStore(cfg(root)).start(); dt = time.perf_counter() - t
    n = count(s); s.shutdown()
    print(f"{name:28s} crash={crash!s:5s} readable {n} of 30000 (lost {30000 - n}), start {dt:.3f} s")
def rm_dir(root): shutil.rmtree(os.path.join(root, "consumequeue", "T"))
def half(root):
    d = os.path.join(root, "consumequeue", "T", "0"); f = os.path.join(d, sorted(os.listdir(d))[-1])
    os.truncate(f, os.path.getsize(f) // 2 // 20 * 20)
def none(root): pass
def rm_dir_and_summary(root):
    rm_dir(root); os.unlink(os.path.join(root, "config", "queues.json"))
def half_and_summary(root):
    half(root); os.unlink(os.path.join(root, "config", "queues.json"))
for crash in (False, True):
    run("intact", none, crash); run("consumequeue/T deleted", rm_dir, crash); run("queue file cut to half", half, crash)
    run("... + queues.json deleted", rm_dir_and_summary, crash); run("half + queues.json deleted", half_and_summary, crash)
