"""The space policy and the losses per group (store/backlog.py): the cleaner built directly over
in-memory segments, consume queues whose units point into them, a fake provider of consumer
positions and a manual clock; then through the store (a put refused with UNCONSUMED_BACKLOG that
is accepted again once the group consumed, by itself)."""

from __future__ import annotations

from tidemq.io import ManualClock
from tidemq.store import Message, PutReason
from tidemq.store.backlog import BacklogGuard
from tidemq.store.cleaner import CommitLogCleaner, DeleteReason, NotFreed, QueueCleaner
from tidemq.store.consume_queue import UNIT, ConsumeQueueTable
from tidemq.store.topics import SpacePolicy, TopicTable
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import memory_config
from ..support.cleaner import SEG, World, other_hour


class Positions:
    """The fake provider: {topic: {group: {queue: offset}}}, changed by the test."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[str, dict[int, int]]] = {}
        self.calls = 0

    def __call__(self, topic: str) -> dict:
        self.calls += 1
        return self.by_topic.get(topic, {})


def world(policy: str, n_sealed: int = 4, **cfg) -> tuple[World, Positions]:
    """World's segments (4 sealed, an active one), topic R of one queue with one message in the
    middle of each sealed segment (queue offsets 0..3), the cleaner with a BacklogGuard."""
    w = World(n_sealed=n_sealed, **cfg)
    w.topics = TopicTable(w.fio, w.cfg.config_path)
    w.topics.load()
    w.topics.create("R", 1, space_policy=policy)
    w.queues = ConsumeQueueTable(w.fio, w.cfg.consumequeue_path, w.cfg.consume_queue_units_per_segment, 16)
    cq = w.queues.get_or_create("R", 0)
    for k in range(n_sealed):
        cq.append(k, UNIT.pack(k * SEG + SEG // 2, 100, 0))
    pos = Positions()
    w.guard = BacklogGuard(w.topics, w.queues, pos)
    w.cleaner = CommitLogCleaner(w.cfg, w.segments, w.disk, w.clock, backlog=w.guard,
                                 on_deleted=lambda mf: w.deleted.append(mf.start_offset))
    return w, pos


def test_refuse_keeps_what_a_group_has_not_consumed_and_lets_go_once_it_has():
    w, pos = world("refuse", file_reserved_time_hours=72)
    pos.by_topic["R"] = {"G": {0: 0}, "H": {0: 3}}
    w.used(86)                                        # above clean-forcibly: unexpired segments would go
    rnd = w.cleaner.run_round()
    assert rnd.clean_immediately and rnd.deleted == [] and rnd.why_not_code is NotFreed.UNCONSUMED
    h = w.cleaner.hold
    assert h is not None and (h.topic, h.queue_id, h.offset, h.groups) == ("R", 0, 0, ("G",)), h
    assert "G" in rnd.why_not and "space_policy=refuse" in rnd.why_not and h.segment == w.segments.segments[0].path
    assert rnd.as_dict()["hold"] == h.text

    pos.by_topic["R"]["G"][0] = 2                     # G consumed the messages in segments 0 and 1
    rnd = w.cleaner.run_round()
    assert w.deleted == [0, SEG] and rnd.reasons == [DeleteReason.SPACE] * 2
    assert w.cleaner.hold is not None and w.cleaner.hold.offset == 2 and w.cleaner.hold.segment.endswith(
        "%020d" % (2 * SEG)), "held again by the next unconsumed message"

    pos.by_topic["R"]["G"][0] = 3                     # G is where H is: segment 2 free, 3 held by both
    w.cleaner.run_round()
    assert w.deleted == [0, SEG, 2 * SEG] and w.cleaner.hold.groups == ("G", "H")

    pos.by_topic["R"] = {"G": {0: 4}, "H": {0: 4}}    # all consumed: everything but the active segment goes
    rnd = w.cleaner.run_round()
    assert w.deleted == [0, SEG, 2 * SEG, 3 * SEG] and w.cleaner.hold is None and rnd.hold is None


def test_refuse_without_a_subscribed_group_keeps_nothing():
    w, pos = world("refuse", file_reserved_time_hours=72, delete_file_batch_max=10)
    w.used(86)
    rnd = w.cleaner.run_round()
    assert w.deleted == [0, SEG, 2 * SEG, 3 * SEG] and rnd.hold is None and pos.calls >= 1


def test_a_queue_a_group_never_touched_counts_as_not_consumed():
    w, pos = world("refuse", file_reserved_time_hours=72)
    pos.by_topic["R"] = {"G": {}}                     # subscribed (it consumed another queue, say)
    w.used(86)
    assert w.cleaner.run_round().deleted == [] and w.cleaner.hold.groups == ("G",)


def test_the_hold_clears_when_space_is_no_longer_short():
    w, pos = world("refuse", file_reserved_time_hours=72)
    pos.by_topic["R"] = {"G": {0: 0}}
    w.used(86)
    w.cleaner.run_round()
    assert w.cleaner.hold is not None
    w.fio.capacity_bytes = 1 << 40                    # room again (a disk grown, other files removed)
    w.disk.refresh()
    w.cleaner.run_round()
    assert w.cleaner.hold is None and w.deleted == []


def test_expired_segments_still_go_under_refuse_and_the_loss_is_reported():
    """The policy guards against space pressure, not retention: file_reserved_time_hours holds."""
    w, pos = world("refuse", file_reserved_time_hours=2.5, at_the_delete_hour=True)
    pos.by_topic["R"] = {"G": {0: 1}}
    w.disk.refresh()
    rnd = w.cleaner.run_round()                       # 5, 4, 3 h old: expired
    assert rnd.reasons == [DeleteReason.EXPIRED] * 3 and rnd.hold is None
    QueueCleaner(w.queues, None).run_round(w.segments.min_offset, rnd.lost)
    w.cleaner.account(rnd)
    assert [(g.group, g.topic, g.queue_id, g.first, g.end) for g in rnd.groups_lost] == [("G", "R", 0, 1, 3)]


def test_evict_deletes_and_says_which_group_lost_which_offsets(caplog):
    from tidemq.store.cleaner import log_deletion
    w, pos = world("evict", file_reserved_time_hours=72, delete_file_batch_max=2)
    pos.by_topic["R"] = {"G": {0: 1}, "H": {0: 0}, "done": {0: 4}}
    w.used(86)
    rnd = w.cleaner.run_round()
    assert w.deleted == [0, SEG] and rnd.hold is None
    QueueCleaner(w.queues, None).run_round(w.segments.min_offset, rnd.lost)
    w.cleaner.account(rnd)
    got = {g.group: (g.topic, g.queue_id, g.first, g.end, g.messages) for g in rnd.groups_lost}
    assert got == {"G": ("R", 0, 1, 2, 1), "H": ("R", 0, 0, 2, 2)}, "a group that had consumed them lost nothing"
    assert w.cleaner.evicted_by_group == {("G", "R"): 1, ("H", "R"): 2}
    assert rnd.as_dict()["groups_lost"][0] == {"group": "G", "topic": "R", "queue_id": 0, "first": 1, "end": 2,
                                               "messages": 1}
    with caplog.at_level("WARNING", logger="tidemq.store"):
        log_deletion(rnd)
    said = [r.getMessage() for r in caplog.records if "consumer groups lost" in r.getMessage()]
    assert said and "G R/0 1..1 (1)" in said[0] and "H R/0 0..1 (2)" in said[0], said
    # the next round: what was lost before is not counted again
    pos.by_topic["R"] = {"G": {0: 0}, "H": {0: 0}}
    rnd = w.cleaner.run_round()
    QueueCleaner(w.queues, None).run_round(w.segments.min_offset, rnd.lost)
    w.cleaner.account(rnd)
    assert w.cleaner.evicted_by_group == {("G", "R"): 3, ("H", "R"): 4}


def test_a_provider_that_fails_is_taken_as_no_group(caplog):
    w, _pos = world("refuse", file_reserved_time_hours=72, delete_file_batch_max=10)

    def broken(topic):
        raise KeyError(topic)
    w.guard.positions = broken
    w.used(86)
    with caplog.at_level("WARNING", logger="tidemq.store"):
        assert w.cleaner.run_round().deleted, "a cleanup never stops on the broker's provider"
    assert any("consumer positions of topic R" in r.getMessage() for r in caplog.records)


def test_topics_remember_their_space_policy(tmp_path):
    from tidemq.io import OsFileIO
    t = TopicTable(OsFileIO(), str(tmp_path))
    t.create("A", 2)
    t.create("B", 2, space_policy="refuse")
    t.create("A", 1, space_policy=SpacePolicy.REFUSE)       # policy set on an existing topic, queues kept
    t.create("B", 3)                                         # grown, policy kept
    again = TopicTable(OsFileIO(), str(tmp_path))
    again.load()
    assert {n: (x.queue_count, x.space_policy) for n, x in again.topics.items()} == {
        "A": (2, SpacePolicy.REFUSE), "B": (3, SpacePolicy.REFUSE)}
    import pytest
    with pytest.raises(ValueError, match="evict, refuse"):
        t.create("C", 1, space_policy="keep")


# Through the store ------------------------------------------------------------------------

def test_the_store_refuses_puts_while_a_refuse_topic_holds_space_and_accepts_them_once_consumed(stores):
    clock = ManualClock()
    fio = FaultyFileIO()
    s = stores(memory_config(segment_size_bytes=SEG, file_reserved_time_hours=72, delete_when=other_hour(clock),
                             delete_file_batch_max=100), fio, clock)
    s.create_topic("R", 1, space_policy="refuse")
    assert s.space_policy("R") == "refuse" and s.space_policy("nope") is None
    rs = s.put_batch([Message("R", b"x" * 500) for _ in range(60)])
    assert all(r.ok for r in rs) and len(s.segments) >= 4
    pos = Positions()
    pos.by_topic["R"] = {"G": {0: 0}}
    s.set_consumer_positions(pos)
    fio.capacity_bytes = int(fio.disk_usage("/").used_bytes * 100 / 86)     # above clean-forcibly
    s.clean()
    refused = s.put(Message("R", b"y"))
    assert refused.reason is PutReason.UNCONSUMED_BACKLOG and "group(s) G" in refused.error, refused
    assert s.put_refusal()[0] is PutReason.UNCONSUMED_BACKLOG
    st = s.disk_status()
    assert st["last_round"]["why_not_code"] == "unconsumed" and "G" in st["flags"]["write_refusal"]
    assert s.get("G", "R", 0, 0).messages, "reads go on"

    pos.by_topic["R"]["G"][0] = 60                     # the group drained the queue
    s.clean()
    assert s.cleaner.last.deleted and s.cleaner.hold is None
    assert s.put(Message("R", b"z")).ok, "writes are back by themselves"
    assert s.min_offset("R", 0) > 0 and not s.cleaner.last.groups_lost, "nothing unconsumed was lost"
