"""The broker state a follower copies from its leader (replication/state.py) is written in the
formats a broker reads at start: the consumer offsets and the timer's progress as checked
documents (CRC, previous version kept as .bak), each journal as its snapshot with the journal
emptied. A service opened on the follower's copy (a promotion) finds every part intact, from its
file (never a fallback to a backup, never set aside as damaged). A document of the wrong shape is
refused before anything is written."""

import os

import pytest

from tidemq import checked
from tidemq.broker.consume.group_offsets import GroupOffsets
from tidemq.broker.deferred.parking import PROP_DELIVER_MS, park
from tidemq.broker.topic_names import SCHEDULE_TOPIC
from tidemq.broker.replication import state
from tidemq.broker.service import MessagingService
from tidemq.broker.state.layout import StateLayout
from tidemq.config import KIB, BrokerConfig
from tidemq.io import ManualClock
from tidemq.store import Message, MessageStore, StoreConfig


def open_store(root, clock):
    return MessageStore(StoreConfig(root_dir=root, segment_size_bytes=256 * KIB, index_slots=1000, index_entries=4000,
                                    preallocate_next_segment=False), clock=clock).start()


@pytest.fixture
def leader(tmp_path):
    """A leader's store and service with state in every part: a pop in flight, a committed offset,
    timer progress, a transaction decision, a topic with space_policy=refuse."""
    clock = ManualClock()
    store = open_store(str(tmp_path / "leader"), clock)
    store.create_topic("T", 2)
    store.create_topic("R", 1, "refuse")
    svc = MessagingService(store, BrokerConfig())
    for b in (b"p0", b"p1"):
        assert store.put(Message(topic="T", body=b, queue_id=0)).ok
    delivered = svc.consumption.pop_batch("g", "T", 2, 600_000, None)
    svc.pop.ack("g", delivered[0].system_properties.receipt_handle)
    svc.group_offsets.set("etl", "T", 1, 7)
    m = Message(topic="T", body=b"d", properties={"UNIQ_KEY": "D", PROP_DELIVER_MS: str(clock.now_ms() + 1000)})
    assert store.put(park(m, SCHEDULE_TOPIC)).ok
    svc.timer.enqueue()
    svc.timer.checkpoint(force=True)
    store.put(svc.transactions.half(Message(topic="T", body=b"h", properties={"UNIQ_KEY": "H"}), "c1"))
    yield store, svc, clock, delivered
    svc.close()
    store.shutdown()


def test_a_followers_copy_is_written_checked_and_a_promoted_service_loads_it(tmp_path, leader):
    store, svc, clock, delivered = leader
    doc = state.snapshot(store, svc)
    f_store = open_store(str(tmp_path / "follower"), clock)
    f_svc = MessagingService(f_store, BrokerConfig(), leading=False)
    try:
        state.apply(doc, f_store, f_svc, f_svc.state_dir)
        state.apply(doc, f_store, f_svc, f_svc.state_dir)       # every copy rewrites: the .bak is the one before
        lay = StateLayout(f_svc.state_dir)
        for path in (lay.consumer_offsets, lay.timer_checkpoint, os.path.join(lay.pop_dir, "snapshot.json"),
                     os.path.join(lay.transactions_dir, "snapshot.json")):
            with open(path, "rb") as fh:
                raw = fh.read()
            assert raw.startswith(b'{"crc32":"') and checked.decode(raw) is not None, path
        assert f_store.queue_count("T") == 2 and f_store.space_policy("R") == "refuse"
        # the log the follower copied (state past its end is cut back: a cursor, the timer's progress)
        for b in (b"p0", b"p1"):
            assert f_store.put(Message(topic="T", body=b, queue_id=0)).ok
        assert f_store.put(park(Message(topic="T", body=b"d", properties={
            "UNIQ_KEY": "D", PROP_DELIVER_MS: str(clock.now_ms() + 1000)}), SCHEDULE_TOPIC)).ok
        for i in range(7):                                       # what group etl committed in queue 1
            assert f_store.put(Message(topic="T", body=b"e%d" % i, queue_id=1)).ok
        f_svc.sends.outcomes.add("T", "OK", 3)                  # what the follower counted (reads)
        f_svc.got.add("T", "OK", 2)
        f_svc.discard()
        old = f_svc
        f_svc = MessagingService(f_store, BrokerConfig(), replaces=old)   # promoted: opened from the copy
        # the counts of the process go on across the change of role (metrics never jump back)
        assert f_svc.sends.outcomes.snapshot() == {("T", "OK"): 3} and f_svc.got.snapshot() == {("T", "OK"): 2}
        assert f_svc.consumption.got is f_svc.got and f_svc.pulls.got is f_svc.got
        assert f_svc.group_offsets.loaded.source is checked.Source.FILE
        assert f_svc.group_offsets.get("etl", "T", 1) == 7
        assert f_svc.pop.journal.loaded.source is checked.Source.FILE
        assert f_svc.transactions.journal.loaded.source is checked.Source.FILE
        st = f_svc.pop.state("g", "T", 0)
        assert st.cursor == 2 and sorted(st.inflight) == [1]
        assert f_svc.pop.ack("g", delivered[1].system_properties.receipt_handle) == ("T", 0, 1)   # the leader's key
        assert f_svc.timer.snapshot() == svc.timer.snapshot()
        assert not [n for _d, _s, fs in os.walk(f_svc.state_dir) for n in fs if n.endswith(".damaged")]
    finally:
        f_svc.close()
        f_store.shutdown()


def test_a_document_of_the_wrong_shape_is_refused_before_anything_is_written(tmp_path, leader):
    store, svc, clock, _ = leader
    f_store = open_store(str(tmp_path / "follower"), clock)
    f_svc = MessagingService(f_store, BrokerConfig(), leading=False)
    try:
        lay = StateLayout(f_svc.state_dir)
        before = {p: os.path.exists(p) for p in (lay.consumer_offsets, lay.timer_checkpoint)}
        for bad in ({**state.snapshot(store, svc), "timer": {"enqueued": "1", "low": 0, "delivered_before_ms": 0}},
                    {**state.snapshot(store, svc), "topics": {"topics": {"T": 2}, "policies": {"T": "keep"}}}):
            with pytest.raises(ValueError, match="not a broker state document"):
                state.apply(bad, f_store, f_svc, f_svc.state_dir)
        assert {p: os.path.exists(p) for p in before} == before
        assert f_store.queue_count("T") == 0
        assert GroupOffsets(f_store.fio, f_svc.state_dir).offsets == {}
    finally:
        f_svc.discard()
        f_store.shutdown()


def test_a_state_answer_checks_only_as_sent_for_its_challenge_and_group():
    from tidemq.broker.replication.state import Unauthenticated, open_answer, sign_answer
    body, key, ch = b'{"ok": true, "state": {"acl": {"users": {"alice": {"super": false}}}}}', "k" * 40, b"c" * 16
    signed = sign_answer(body, key, "g", ch)
    assert open_answer(signed, key, "g", ch) == body
    for raw, k, group, c in [(signed.replace(b"false", b"true "), key, "g", ch),    # changed on the way
                             (signed, key, "g", b"d" * 16),                         # replayed for another challenge
                             (signed, key, "h", ch),                                # another group's answer
                             (signed, "x" * 40, "g", ch),                           # another secret_key
                             (body, key, "g", ch),                                  # no MAC
                             (b"mac1:zz" + body, key, "g", ch)]:                    # no MAC that reads
        with pytest.raises(Unauthenticated):
            open_answer(raw, k, group, c)
    assert sign_answer(body, None, "g", ch) == body and open_answer(body, None, "g", ch) == body   # the open default
