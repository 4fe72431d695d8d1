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
        off, got = s.min_offset(topic, q), []
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


def damage_first(cfg):
    d = cq_dir(cfg, "T", 0)
    os.unlink(os.path.join(d, sorted(os.listdir(d))[0]))


def damage_swapped(cfg):
    """T/1's last file replaced by T/0's: its units point at T/0's messages."""
    a, b = cq_dir(cfg, "T", 0), cq_dir(cfg, "T", 1)
    shutil.copyfile(os.path.join(a, sorted(os.listdir(a))[-1]), os.path.join(b, sorted(os.listdir(b))[-1]))


def summary_kept(cfg):
    pass


def summary_deleted(cfg):
    os.unlink(heal.path(cfg.root_dir))


def summary_garbage(cfg):
    with open(heal.path(cfg.root_dir), "wb") as f:
        f.write(os.urandom(200))


@pytest.mark.parametrize("damage", [damage_dir, damage_half, damage_middle, damage_first, damage_swapped])
@pytest.mark.parametrize("summary", [summary_kept, summary_deleted, summary_garbage])
@pytest.mark.parametrize("crash", [False, True])
def test_a_damaged_queue_is_rebuilt_at_start(tmp_path, damage, summary, crash):
    """Whatever happened to config/queues.json too: kept, deleted, garbage."""
    cfg, s = filled(tmp_path)
    want = {t: bodies(s, t) for t in ("T", "U")}
    s.shutdown()
    damage(cfg)
    summary(cfg)
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


def test_an_intact_store_rebuilds_nothing_and_remembers_the_ends(tmp_path, caplog):
    with caplog.at_level("WARNING", logger="tidemq.store"):
        cfg, s = filled(tmp_path, 300)
    assert not [r for r in caplog.records if "queues' ends" in r.getMessage()], "a new store has nothing to check"
    ends = {t: {str(q): s.max_offset(t, q) for q in range(2)} for t in ("T", "U")}
    end = s.commitlog_max_offset
    s.shutdown()
    assert heal.QueueSummary(None, cfg.root_dir).path == os.path.join(cfg.root_dir, "config", "queues.json")
    with open(heal.path(cfg.root_dir)) as f:
        import json
        doc = json.load(f)
    assert doc["ends"] == ends and doc["log_offset"] == end and doc["firsts"]["T"] == {"0": 0, "1": 0}
    for lose in (False, True):
        if lose:
            os.unlink(heal.path(cfg.root_dir))         # checked against the whole log: still nothing to do
        caplog.clear()
        with caplog.at_level("WARNING", logger="tidemq.store"):
            s = MessageStore(cfg).start()
        try:
            assert s.recovery.queues_rebuilt == []
            said = [r.getMessage() for r in caplog.records if "checked against the whole log" in r.getMessage()]
            assert len(said) == (1 if lose else 0), said
        finally:
            s.shutdown()


def test_a_store_cleaned_at_its_head_rebuilds_nothing_with_or_without_its_summary(tmp_path):
    """Cleanup deletes queue files behind the log: a queue that starts later is no damage."""
    cfg = small_config(tmp_path / "s", consume_queue_units_per_segment=UNITS, topic_queues_default=2,
                       file_reserved_time_hours=0)
    s = MessageStore(cfg).start()
    for i in range(2000):
        assert s.put(Message("T", b"m%05d" % i + b"x" * 100)).ok
    s.trigger_delete_expired()
    s.clean()              # (a segment a reader holds meanwhile goes out of service: the queues follow it at once,
    s.clean()              # the log's own minimum once it is deleted, after the reader: here if it was the head)
    assert s.min_offset("T", 0) > UNITS and s.commitlog_min_offset > 0, "queue files went behind the log"
    want = bodies(s, "T")
    for q, got in want.items():            # each queue readable from its minimum to its end
        assert [o for o, _ in got] == list(range(s.min_offset("T", q), s.max_offset("T", q))), q
    s.shutdown()
    for lose in (False, True):
        if lose:
            os.unlink(heal.path(cfg.root_dir))
        s = MessageStore(cfg).start()
        try:
            assert s.recovery.queues_rebuilt == [] and bodies(s, "T") == want
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
    os.unlink(heal.path(cfg.root_dir))              # the remembered ends lost too: the start scans the log
    r = CliRunner().invoke(cli, ["verify", "--root", cfg.root_dir, "--json"], catch_exceptions=False)
    doc = __import__("json").loads(r.output)
    assert r.exit_code == 1 and sorted(c.split(" ")[0] for c in doc["corrected"] if c.startswith("T/")) == [
        "T/0", "T/1"] and doc["ok"], doc


def test_verify_reports_a_queue_missing_or_cut_short_against_the_log(tmp_path):
    from tidemq.store.verify import CheckReport, check_queue_ends
    cfg, s = filled(tmp_path, 600)
    try:
        rep = CheckReport()
        check_queue_ends(s, {("T", 0): s.max_offset("T", 0) + 5, ("Z", 0): 3}, rep)
        assert not rep.ok and any(p.startswith("queue T/0: short") for p in rep.problems) and any(
            p.startswith("queue Z/0: missing") for p in rep.problems), rep.problems
        assert s.check().ok
    finally:
        s.shutdown()
