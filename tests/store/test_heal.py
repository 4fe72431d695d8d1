"""Consume queues heal at every start: a topic's queue directory deleted, a queue file cut to half,
a file missing in the middle of a queue, each after a clean stop and after a crash (abort file):
every message is readable again at its own queue offset, later puts go on after it, and the
recovery report names the queues rebuilt."""

import os
import shutil

import pytest

from tidemq.store import Message, MessageStore
from tidemq.store import heal

from ..support.store import small_config

UNITS = 64           # units per consume-queue file: several files per queue


def filled(tmp_path, n=1000):
    cfg = small_config(tmp_path / "s", consume_queue_units_per_segment=UNITS, topic_queues_default=2)
    s = MessageStore(cfg).start()
    for i in range(n):
        assert s.put(Message("T" if i % 3 else "U", b"m%05d" % i)).ok
    return cfg, s


def bodies(s, topic):
    out = {}
    for q in range(s.queue_count(topic)):
        off, got = 0, []
        while True:
            r = s.get("g", topic, q, off, 256)
            if not r.messages:
                break
            got += [(m.queue_offset, m.body) for m in r.messages]
            off = r.next_offset
        out[q] = got
    return out


def cq_dir(cfg, topic, q=None):
    d = os.path.join(cfg.consumequeue_path, topic)
    return d if q is None else os.path.join(d, str(q))


def damage_dir(cfg):
    shutil.rmtree(cq_dir(cfg, "T"))


def damage_half(cfg):
    d = cq_dir(cfg, "T", 0)
    last = sorted(os.listdir(d))[-1]
    p = os.path.join(d, last)
    os.truncate(p, os.path.getsize(p) // 2 // 20 * 20)


def damage_middle(cfg):
    d = cq_dir(cfg, "T", 1)
    files = sorted(os.listdir(d))
    assert len(files) >= 3
    os.unlink(os.path.join(d, files[1]))


@pytest.mark.parametrize("damage", [damage_dir, damage_half, damage_middle])
@pytest.mark.parametrize("crash", [False, True])
def test_a_damaged_queue_is_rebuilt_at_start(tmp_path, damage, crash):
    cfg, s = filled(tmp_path)
    want = {t: bodies(s, t) for t in ("T", "U")}
    s.shutdown()
    damage(cfg)
    if crash:
        open(os.path.join(cfg.root_dir, "abort"), "w").close()       # the state after any crash
    s = MessageStore(cfg).start()
    try:
        assert [x for x in s.recovery.queues_rebuilt if x.startswith("T/")], s.recovery.summary()
        assert {t: bodies(s, t) for t in ("T", "U")} == want, "every message at its own queue offset"
        before = {q: s.max_offset("T", q) for q in range(2)}
        r = s.put(Message("T", b"after", queue_id=0))
        assert r.ok and r.queue_offset == before[0], "a put goes on after the rebuilt queue"
    finally:
        s.shutdown()
    s = MessageStore(cfg).start()                    # healed for good: nothing to rebuild again
    try:
        assert s.recovery.queues_rebuilt == [] and s.check().ok
    finally:
        s.shutdown()


def test_an_intact_store_rebuilds_nothing_and_remembers_the_ends(tmp_path):
    cfg, s = filled(tmp_path, 300)
    ends = {t: {str(q): s.max_offset(t, q) for q in range(2)} for t in ("T", "U")}
    s.shutdown()
    assert heal.QueueSummary(None, cfg.root_dir).path == os.path.join(cfg.root_dir, "config", "queues.json")
    with open(heal.path(cfg.root_dir)) as f:
        import json
        assert json.load(f)["ends"] == ends
    s = MessageStore(cfg).start()
    try:
        assert s.recovery.queues_rebuilt == []
    finally:
        s.shutdown()


def test_a_deleted_topic_is_not_brought_back(tmp_path):
    cfg, s = filled(tmp_path, 300)
    s.shutdown()
    s = MessageStore(cfg).start()
    s.delete_topic("T")
    s.kill()                                         # the remembered ends may still name T
    s._unlock_root()
    s = MessageStore(cfg).start()
    try:
        assert "T" not in s.topic_names() and not [x for x in s.recovery.queues_rebuilt if x.startswith("T/")]
    finally:
        s.shutdown()


def test_verify_reports_what_start_corrected_and_what_it_could_not_see(tmp_path):
    from click.testing import CliRunner

    from tidemq.cli.main import cli

    cfg, s = filled(tmp_path, 600)
    s.shutdown()
    damage_dir(cfg)
    r = CliRunner().invoke(cli, ["verify", "--root", cfg.root_dir, "--json"], catch_exceptions=False)
    doc = __import__("json").loads(r.output)
    assert r.exit_code == 1 and [c for c in doc["corrected"] if c.startswith("T/")] and doc["ok"]
    r = CliRunner().invoke(cli, ["verify", "--root", cfg.root_dir], catch_exceptions=False)
    assert r.exit_code == 0 and "OK" in r.output, "corrected for good"

    damage_dir(cfg)
    os.unlink(heal.path(cfg.root_dir))              # the remembered ends lost too: start cannot see it
    r = CliRunner().invoke(cli, ["verify", "--root", cfg.root_dir], catch_exceptions=False)
    assert r.exit_code == 1 and "queue T/0: missing" in r.output and "queue T/1: missing" in r.output, r.output


def test_verify_reports_a_queue_cut_short(tmp_path):
    cfg, s = filled(tmp_path, 600)
    s.shutdown()
    damage_half(cfg)
    os.unlink(heal.path(cfg.root_dir))
    s = MessageStore(cfg).start()
    try:
        rep = s.check()
        assert not rep.ok and any(p.startswith("queue T/0: short") for p in rep.problems), rep.problems
    finally:
        s.shutdown()
