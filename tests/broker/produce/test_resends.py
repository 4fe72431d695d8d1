"""What the send path knows of earlier sends (broker/produce/resends.py): a key the window matches is
confirmed by the stored record itself (its topic and id), so a collision, crafted or not, never makes
a message vanish as a duplicate: the attack of issue 29 (an attacker's ids whose keys are a victim's
next ones, sent to its own topic) as a test, with the strongest attacker there is: its entry holds
the victim's key outright."""

from tidemq.broker.produce.resends import Resends
from tidemq.config import BrokerConfig
from tidemq.io import ManualClock
from tidemq.record.codec import PROP_UNIQ_KEY
from tidemq.store import Message, PutStatus


def put(store, topic, mid):
    r = store.put(Message(topic=topic, body=b"x", properties={PROP_UNIQ_KEY: mid}))
    assert r.status is PutStatus.PUT_OK
    return r


def test_a_window_match_that_is_another_message_is_no_match(stores):
    store = stores(ManualClock(1_700_000_000_000))
    r = Resends(store, BrokerConfig())
    attacker = put(store, "junk", "attacker-1")
    victim_key = r.key("orders", "victim-7")
    r.window.put_key(victim_key, attacker.queue_offset, attacker.commitlog_offset)     # the crafted collision
    assert r.find(victim_key, [0], lambda i: "orders", lambda i: "victim-7") == {}, "not a duplicate: stored"
    assert r.collisions == 1
    # the same id in another topic, or another id in the same topic: neither is the message
    same_id = put(store, "junk", "victim-7")
    r.window.put_key(victim_key, same_id.queue_offset, same_id.commitlog_offset)
    assert r.find(victim_key, [0], lambda i: "orders", lambda i: "victim-7") == {} and r.collisions == 2


def test_a_real_resend_is_still_recognised(stores):
    store = stores(ManualClock(1_700_000_000_000))
    r = Resends(store, BrokerConfig())
    first = put(store, "orders", "victim-7")
    key = r.key("orders", "victim-7")
    r.remember(key, [first.queue_offset], [first.commitlog_offset], [True], {})
    assert r.find(key, [0], lambda i: "orders", lambda i: "victim-7") == {0: (first.queue_offset, "")}
    assert r.collisions == 0
    r.window.put_key(key, first.queue_offset, 10**12)                  # an offset with no record there
    assert r.find(key, [0], lambda i: "orders", lambda i: "victim-7") == {}


def test_a_resend_found_past_the_high_watermark_waits_for_it_and_is_never_stored_twice(stores):
    """A promoted follower (SYNC replication) holds records past its high watermark: not served to
    consumers (store.set_commit_limit), yet a resend of one of them is found by its id (the whole
    log) and answered Unconfirmed until every follower of the in-sync set has it, then as the
    earlier store; never stored a second time."""
    from tidemq.broker.produce.resends import Unconfirmed
    from tidemq.broker.replication.acks import ReplicaAcks
    from tidemq.store import PutReason
    clock = ManualClock(1_700_000_000_000)
    store = stores(clock)
    first = put(store, "orders", "in-flight-1")
    end = first.commitlog_offset + first.size
    acks = ReplicaAcks(True, 1, 60_000, 60_000, lambda: store.replica.end, clock)
    acks.set_isr({"f"})                                  # its follower has confirmed nothing yet
    store.writer.replicas = acks
    store.set_commit_limit(lambda: acks.hw)
    assert store.query_by_key("orders", "in-flight-1") == [], "not served: past the high watermark"
    r = Resends(store, BrokerConfig())                   # the leader's services, built at its promotion
    key = r.key("orders", "in-flight-1")
    got = r.find(key, [0], lambda i: "orders", lambda i: "in-flight-1")
    assert isinstance(got[0], Unconfirmed) and got[0][0] is PutReason.REPLICATION_TIMEOUT
    conn = acks.connect("f", "", 0).conn
    acks.confirm("f", conn, end)
    assert acks.hw >= end
    assert r.find(key, [0], lambda i: "orders", lambda i: "in-flight-1") == {0: (first.queue_offset, "")}
    assert [m.queue_offset for m in store.query_by_key("orders", "in-flight-1")] == [first.queue_offset]


def test_a_waiting_batch_is_remembered_record_by_record_and_forgotten_once_confirmed(stores):
    """A batch put that waits (SYNC replication, SYNC_FLUSH) is remembered from its append on, in one
    pass over the batch (``remember_appended`` past ``SMALL`` messages): each appended record with an id
    under its key, with its queue offset, end and commit-log offset; a record not appended (size 0) or
    without an id (a zero key) is not. A resend of any of them is found (Unconfirmed while the store
    cannot confirm it); once confirmed (``remember``) the pending entries go and the window answers."""
    from tidemq.broker.produce.resends import SMALL, Unconfirmed, split_keys
    from tidemq.broker.replication.acks import ReplicaAcks
    from tidemq.store.types import PutResults

    clock = ManualClock(1_700_000_000_000)
    store = stores(clock)
    r = Resends(store, BrokerConfig())
    n = SMALL + 12
    msgs = [put(store, "orders", f"m-{i}") for i in range(n)]
    acks = ReplicaAcks(True, 1, 60_000, 60_000, lambda: store.replica.end, clock)
    acks.set_isr({"f"})                                  # its follower has confirmed nothing yet
    store.writer.replicas = acks
    keys = bytearray(b"".join(r.key("orders", f"m-{i}") for i in range(n)))
    keys[16 * 3:16 * 4] = bytes(16)                      # message 3 has no id
    res = PutResults(n)
    for i, m in enumerate(msgs):
        res.phys[i], res.qoff[i], res.size[i] = m.commitlog_offset, m.queue_offset, m.size
    res.size[5] = 0                                      # message 5 was not appended
    r.remember_appended(keys, res, None)
    ks = split_keys(keys)
    assert list(r.unconfirmed) == [ks[i] for i in range(n) if i not in (3, 5)], "in order, the others only"
    m = msgs[7]
    assert r.unconfirmed[ks[7]] == (m.queue_offset, "", m.commitlog_offset + m.size, m.commitlog_offset)
    found = r.find(bytes(keys), range(n), lambda i: "orders", lambda i: f"m-{i}")
    assert set(found) == {i for i in range(n) if i not in (3, 5)}
    assert all(isinstance(v, Unconfirmed) for v in found.values()), "not confirmed yet: never stored again"
    r.remember(bytes(keys), [m.queue_offset for m in msgs], [m.commitlog_offset for m in msgs], [1] * n, {})
    assert r.unconfirmed == {}, "confirmed: the window answers them now"
    assert r.find(ks[9], [0], lambda i: "orders", lambda i: "m-9") == {0: (msgs[9].queue_offset, "")}


def test_an_unconfirmed_entry_keeps_only_its_own_message_off_the_compiled_lane(stores):
    """``surely_new`` (SendPath.send_one's precondition) declines the key of a message appended and not
    confirmed (its resend must ask the store), and only that key: an entry that stays (a put answered
    not confirmed in time, its caller gone) kept every other single send off the compiled lane too."""
    store = stores(ManualClock(1_700_000_000_000))
    r = Resends(store, BrokerConfig(send_dedup_after_restart_s=0))
    first = put(store, "orders", "waiting-1")
    waiting = r.key("orders", "waiting-1")
    r.remember_unconfirmed(waiting, PutStatus.FLUSH_SLAVE_TIMEOUT, first.queue_offset, first.commitlog_offset,
                           first.commitlog_offset + first.size)
    assert not r.surely_new(waiting), "its resend asks the store"
    assert r.surely_new(r.key("orders", "other-1")), "another message takes the lane"


def test_a_delayed_or_transaction_message_resent_after_a_restart_is_found_where_it_is_parked(stores):
    """A delayed message waits in the schedule topic, a half message in the half topic (parking.py),
    under the real topic's name in REAL_TOPIC. After a restart (kill -9: the answer was lost, the
    client resends) the index was asked for the id in the real topic only: the resend was parked a
    second time, and the message delivered (or committed) twice."""
    from tidemq.broker.deferred.parking import PROP_DELIVER_MS, park
    from tidemq.broker.topic_names import HALF_TOPIC, SCHEDULE_TOPIC
    clock = ManualClock(1_700_000_000_000)
    store = stores(clock)
    store.create_topic("orders", 1)
    delayed = store.put(park(Message(topic="orders", body=b"d", properties={
        PROP_UNIQ_KEY: "delayed-1", PROP_DELIVER_MS: str(clock.now_ms() + 60_000)}), SCHEDULE_TOPIC))
    half = store.put(park(Message(topic="orders", body=b"h", properties={PROP_UNIQ_KEY: "half-1"}), HALF_TOPIC))
    elsewhere = store.put(park(Message(topic="other", body=b"o", properties={PROP_UNIQ_KEY: "other-1"}),
                               SCHEDULE_TOPIC))
    assert delayed.ok and half.ok and elsewhere.ok
    r = Resends(store, BrokerConfig())                   # the services of the restarted broker
    got = r.find(r.key("orders", "delayed-1"), [0], lambda i: "orders", lambda i: "delayed-1")
    assert got == {0: (delayed.queue_offset, "")}, "answered as the earlier store"
    got = r.find(r.key("orders", "half-1"), [0], lambda i: "orders", lambda i: "half-1")
    assert got == {0: (half.queue_offset, half.offset_msg_id)}, "with its transaction id"
    assert r.find(r.key("orders", "other-1"), [0], lambda i: "orders", lambda i: "other-1") == {}, \
        "parked for another topic: not this message"


def test_a_gone_callers_put_not_confirmed_in_time_moves_to_the_window_once_its_followers_confirm_it(stores):
    """A put whose caller went, settled (``settled_gone``) as not confirmed in time (its follower had
    not confirmed it by replication_timeout_ms), stays for a resend; no resend comes (its caller
    gave up). Once the follower confirms it after all, the next waiting put's append settles it
    (``_settle_late``): out of the unconfirmed, into the window, as its resend would have moved it.
    One the store still cannot confirm stays, and those after it too (later in the log)."""
    from tidemq.broker.produce.resends import Unconfirmed
    from tidemq.broker.replication.acks import ReplicaAcks

    clock = ManualClock(1_700_000_000_000)
    store = stores(clock)
    r = Resends(store, BrokerConfig(send_dedup_after_restart_s=0))
    acks = ReplicaAcks(True, 1, 60_000, 60_000, lambda: store.replica.end, clock)
    acks.set_isr({"f"})                                  # its follower has confirmed nothing yet
    conn = acks.connect("f", "", 0).conn
    store.writer.replicas = acks

    def appended(mid):
        """A put appended, its wait ahead (StorePuts.run: wait=False), remembered as the send path does."""
        res = store.put_batch([Message(topic="orders", body=b"x", properties={PROP_UNIQ_KEY: mid})], wait=False)
        assert res.pending_end >= 0
        key = r.key("orders", mid)
        r.remember_appended(key, res, None)
        return res, key

    res1, k1 = appended("gone-1")
    res2, k2 = appended("gone-2")
    r.settled_gone(k1, res1, None)                       # their time ran out, their callers gone
    r.settled_gone(k2, res2, None)
    assert k1 in r.unconfirmed and k2 in r.unconfirmed and r.window.find_keys(k1) == {}
    end1 = int(res1.phys[0] + res1.size[0])
    acks.confirm("f", conn, end1)                        # the first confirmed after its timeout
    appended("next-1")                                   # the next waiting put
    assert k1 not in r.unconfirmed, "settled: its followers confirmed it"
    assert r.find(k1, [0], lambda i: "orders", lambda i: "gone-1") == {0: (int(res1.qoff[0]), "")}
    assert k2 in r.unconfirmed, "not confirmed yet: stays for its resend"
    assert isinstance(r.find(k2, [0], lambda i: "orders", lambda i: "gone-2")[0], Unconfirmed)
    acks.confirm("f", conn, int(res2.phys[0] + res2.size[0]))
    appended("next-2")
    assert k2 not in r.unconfirmed
    assert r.find(k2, [0], lambda i: "orders", lambda i: "gone-2") == {0: (int(res2.qoff[0]), "")}
