"""Transaction state without a server: half messages, EndTransaction, checks, the journal."""

import asyncio
import errno

import pytest

from tidemq.protocol.stubs import Code, pb, spb
from tidemq.broker.sessions.telemetry import Known, Session, Sessions
from tidemq.broker.deferred.transactions import Transactions
from tidemq.config import BrokerConfig
from tidemq.io import ManualClock
from tidemq.store import Message

from ...support.store import topic_bodies as bodies

COMMIT, ROLLBACK = pb.TransactionResolution.COMMIT, pb.TransactionResolution.ROLLBACK


def service(store, sessions=None, **cfg):
    async def put(msgs):
        return store.put_batch(msgs)

    t = Transactions(store, BrokerConfig(**cfg), sessions or Sessions(), put, lambda r: Code.INTERNAL_SERVER_ERROR)
    t.open()
    return t


def send_half(store, t, body, uniq, client="c1"):
    r = store.put(t.half(Message(topic="T", body=body, properties={"UNIQ_KEY": uniq}), client))
    assert r.ok
    return r.offset_msg_id


def end(t, txid, uniq, resolution):
    req = spb.EndTransactionRequest(topic=pb.Resource(name="T"), message_id=uniq, transaction_id=txid,
                                    resolution=resolution)
    return asyncio.run(t.end(req))


def test_commit_puts_once_rollback_puts_nothing_and_conflicts_are_refused(stores):
    s = stores(ManualClock())
    s.create_topic("T", 2)
    t = service(s)
    a = send_half(s, t, b"a", "UA")
    b = send_half(s, t, b"b", "UB")
    assert bodies(s, "T") == []
    assert end(t, a, "UA", COMMIT).code == Code.OK
    assert end(t, b, "UB", ROLLBACK).code == Code.OK
    assert bodies(s, "T") == [b"a"]
    assert end(t, a, "UA", COMMIT).code == Code.OK, "a resent commit"
    st = end(t, a, "UA", ROLLBACK)
    assert st.code == Code.INVALID_TRANSACTION_ID and "already committed" in st.message
    assert end(t, b, "UB", COMMIT).code == Code.INVALID_TRANSACTION_ID
    assert end(t, a, "UB", COMMIT).code == Code.INVALID_TRANSACTION_ID, "the id of another message"
    assert end(t, "nonsense", "UA", COMMIT).code == Code.INVALID_TRANSACTION_ID
    assert end(t, a, "UA", pb.TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED).code == Code.OK
    t.scan()
    t.flush()                                      # every half decided: low moves past them, forgotten
    assert t.low == 2 and t.ended == {}
    assert end(t, a, "UA", COMMIT).code == Code.OK, "the real topic still tells a resent commit"
    assert end(t, b, "UB", COMMIT).code == Code.INVALID_TRANSACTION_ID
    assert bodies(s, "T") == [b"a"]


def test_orphans_are_checked_over_telemetry_then_discarded_and_decisions_survive_a_restart(stores):
    clock = ManualClock()
    s = stores(clock)
    s.create_topic("T", 1)
    sessions = Sessions()
    t = service(s, sessions, transaction_check_interval_s=1.0, transaction_check_max=2)
    orphan = send_half(s, t, b"o", "UO", client="gone")
    done = send_half(s, t, b"d", "UD")
    assert end(t, done, "UD", ROLLBACK).code == Code.OK
    assert t.scan() == 2 and list(t.pending) == [0]
    clock.advance(1.5)
    assert t.check(clock.now_ms()) == 0, "no producer stream: waits, not counted"
    assert t.checks == {}
    sess = Session("p2")
    sessions.open["p2"] = [sess]
    sessions.known["p2"] = Known(True, frozenset({"T"}))
    assert t.check(clock.now_ms()) == 1
    cmd = sess.outbox.get_nowait().recover_orphaned_transaction_command
    assert cmd.transaction_id == orphan and cmd.message.topic.name == "T"
    assert cmd.message.system_properties.message_id == "UO" and cmd.message.body == b"o"
    assert dict(cmd.message.user_properties) == {}, "no parking properties leak"
    assert t.check(clock.now_ms()) == 0, "not again before the interval"
    t.flush()
    t.close()
    s.shutdown()

    s2 = stores(clock)
    t2 = service(s2, sessions, transaction_check_interval_s=1.0, transaction_check_max=2)
    assert t2.checks == {0: 1} and t2.ended == {1: "r"}
    t2.scan()
    assert list(t2.pending) == [0]
    clock.advance(1.5)
    assert t2.check(clock.now_ms()) == 1 and t2.checks == {0: 2}
    clock.advance(1.5)
    assert t2.check(clock.now_ms()) == 0 and t2.pending == {} and t2.ended[0] == "d", "discarded"
    st = end(t2, orphan, "UO", COMMIT)
    assert st.code == Code.INVALID_TRANSACTION_ID and "discarded" in st.message
    assert bodies(s2, "T") == []


def test_a_commit_whose_decision_was_lost_is_not_put_again(stores):
    clock = ManualClock()
    s = stores(clock)
    s.create_topic("T", 1)
    t = service(s)
    a = send_half(s, t, b"a", "UA")
    assert end(t, a, "UA", COMMIT).code == Code.OK
    t.journal.fio.truncate(t.journal._h, 0)        # the decision line never reached the file
    s.kill()
    s.fio.unlock(s._lock_handle)
    s2 = stores(clock)
    t2 = service(s2)
    t2.scan()
    assert t2.pending == {} and t2.ended == {0: "c"}, "the real topic has it: committed"
    assert end(t2, a, "UA", COMMIT).code == Code.OK
    assert bodies(s2, "T") == [b"a"]


def test_a_message_s_own_orphan_recovery_time_sets_its_first_check(stores):
    """orphaned_transaction_recovery_duration (kept as CHECK_IMMUNITY_TIME_IN_SECONDS): the first check
    comes after the message's own time, the later ones after the interval; a time past
    transaction_recovery_s_max waits that long."""
    clock = ManualClock()
    s = stores(clock)
    s.create_topic("T", 1)
    sessions = Sessions()
    sess = Session("c1")
    sessions.open["c1"] = [sess]
    sessions.known["c1"] = Known(True, frozenset({"T"}))
    t = service(s, sessions, transaction_check_interval_s=100.0, transaction_recovery_s_max=50.0)
    r = s.put(t.half(Message(topic="T", body=b"soon", properties={"UNIQ_KEY": "US",
                                                                   "CHECK_IMMUNITY_TIME_IN_SECONDS": "5"}), "c1"))
    assert r.ok
    r = s.put(t.half(Message(topic="T", body=b"capped", properties={"UNIQ_KEY": "UC",
                                                                     "CHECK_IMMUNITY_TIME_IN_SECONDS": "9999"}), "c1"))
    assert r.ok
    send_half(s, t, b"plain", "UP")
    assert t.scan() == 3
    clock.advance(4)
    assert t.check(clock.now_ms()) == 0
    clock.advance(2)
    assert t.check(clock.now_ms()) == 1, "its own 5 s, not the 100 s interval"
    assert sess.outbox.get_nowait().recover_orphaned_transaction_command.message.system_properties.message_id == "US"
    clock.advance(45)                                                     # 51 s
    assert t.check(clock.now_ms()) == 1, "9999 s asked, transaction_recovery_s_max=50 kept"
    m = sess.outbox.get_nowait().recover_orphaned_transaction_command.message
    assert m.system_properties.message_id == "UC"
    assert m.system_properties.orphaned_transaction_recovery_duration.seconds == 9999, "given back as sent"
    clock.advance(50)                                                     # 101 s
    assert t.check(clock.now_ms()) == 1, "UP: the interval"
    assert sess.outbox.get_nowait().recover_orphaned_transaction_command.message.system_properties.message_id == "UP"
    clock.advance(5)                                                      # 106 s
    assert t.check(clock.now_ms()) == 1, "US again: the interval after its last check"


def test_a_half_message_whose_recovery_time_is_no_number_does_not_stop_the_scan(stores):
    """CHECK_IMMUNITY_TIME_IN_SECONDS as a client's user property of that name, digits int() does not
    read ('\\u00b2': str.isdigit says yes): its half is checked after the interval, and the scan goes
    on past it; it raised ValueError at every round, and no half after it was ever checked."""
    clock = ManualClock()
    s = stores(clock)
    s.create_topic("T", 1)
    t = service(s, transaction_check_interval_s=100.0)
    for i, odd in enumerate(("\u00b2", "1\u00b2", "")):
        r = s.put(t.half(Message(topic="T", body=b"odd", properties={"UNIQ_KEY": f"U{i}",
                                                                     "CHECK_IMMUNITY_TIME_IN_SECONDS": odd}), "c1"))
        assert r.ok
    send_half(s, t, b"plain", "UP")
    assert t.scan() == 4
    assert len(t.pending) == 4 and all(h.first_ms is None for h in t.pending.values())


def test_a_half_message_not_readable_at_its_check_is_not_discarded(stores):
    """A pending half message whose record is not readable when its check comes (past the readable
    end: a promoted leader's high watermark behind its old leader's) was taken for "gone from the
    store" and discarded: the producer's commit then was refused, the transaction lost."""
    clock = ManualClock()
    s = stores(clock)
    s.create_topic("T", 1)
    sessions = Sessions()
    t = service(s, sessions, transaction_check_interval_s=1.0, transaction_check_max=2)
    txid = send_half(s, t, b"h", "UH")
    assert t.scan() == 1
    sess = Session("c1")
    sessions.open["c1"] = [sess]
    sessions.known["c1"] = Known(True, frozenset({"T"}))
    clock.advance(1.5)
    s.set_commit_limit(lambda: 0)
    assert t.check(clock.now_ms()) == 0 and list(t.pending) == [0], "not readable now: waits"
    s.set_commit_limit(None)
    assert t.check(clock.now_ms()) == 1
    assert end(t, txid, "UH", COMMIT).code == Code.OK
    assert bodies(s, "T") == [b"h"]


def test_decisions_past_the_half_queues_end_are_not_taken_for_new_transactions(stores):
    """A promoted follower under ASYNC replication opens its old leader's transaction decisions, which
    may name half offsets this log never got (the tail the failover took back). The half messages sent
    to the new leader get those offsets: a commit of one below the copied ``low`` was refused as
    rolled back, one whose offset the copy had as committed answered OK and put nothing."""
    from tidemq.broker.state import journal
    from tidemq.broker.state.layout import StateLayout, state_dir
    s = stores(ManualClock())
    s.create_topic("T", 1)
    layout = StateLayout(state_dir(s.config.root_dir))
    journal.write_state(s.fio, layout.transactions_dir, {"low": 2, "ended": {"2": "c", "3": "r"}, "checks": {}})
    t = service(s)                                  # the new leader's, from the copied decisions
    ids = [send_half(s, t, b"h%d" % i, "U%d" % i) for i in range(4)]
    for i, txid in enumerate(ids):
        assert end(t, txid, "U%d" % i, COMMIT).code == Code.OK, i
    assert bodies(s, "T") == [b"h0", b"h1", b"h2", b"h3"]


def test_after_a_failure_of_the_log_a_commit_is_neither_lost_nor_refused_for_another_transaction():
    """ASYNC_FLUSH: half messages and commits' copies are answered before their fsync. When it fails
    (store/log_failure.py) the half queue is cut back and the next half messages take its offsets
    again; a commit's copy after the durable end is taken back. Transactions.cut_back (what the broker
    does at once, service.after_log_failure) forgets the decisions past the cut (the new transaction
    at an old offset is not 'already rolled back') and makes a commit whose copy was lost undecided
    (ended again, it is put again; not OK with nothing put)."""
    import errno
    import pytest
    from tidemq.broker.topic_names import HALF_TOPIC
    from tidemq.store import MessageStore
    from tidemq.store.log_failure import LogFailed
    from tidemq.testing.faulty_io import FaultyFileIO
    from ...support.store import memory_config
    fio = FaultyFileIO(seed=6)
    s = MessageStore(memory_config(segment_size_bytes=32 << 10, commitlog_dirs=("/r/a", "/r/b")), fio=fio,
                     clock=ManualClock()).start()
    try:
        s.create_topic("T", 1)
        t = service(s)
        a = send_half(s, t, b"a", "UA")                    # half offset 0
        s.commit_log.flush()                               # durable
        b = send_half(s, t, b"b", "UB")                    # 1: answered OK, never flushed
        assert end(t, b, "UB", ROLLBACK).code == Code.OK
        assert end(t, a, "UA", COMMIT).code == Code.OK     # its copy not flushed
        fio.fail("fsync", errno.EIO, "/r/a/")
        with pytest.raises(LogFailed):
            s.commit_log.flush()
        [f] = s.log_failures
        assert f.queue_ends == {(HALF_TOPIC, 0): 1, ("T", 0): 0}
        assert bodies(s, "T") == [], "the copy of 'a' was taken back"
        t.cut_back(f.queue_ends.get((HALF_TOPIC, 0)), f.covers)
        c = send_half(s, t, b"c", "UC")                    # takes half offset 1 again
        assert end(t, c, "UC", COMMIT).code == Code.OK and bodies(s, "T") == [b"c"], "a new transaction"
        assert end(t, a, "UA", COMMIT).code == Code.OK
        assert sorted(bodies(s, "T")) == [b"a", b"c"], "'a' put again"
        assert end(t, a, "UA", COMMIT).code == Code.OK and sorted(bodies(s, "T")) == [b"a", b"c"], "once"
    finally:
        s.shutdown()


def test_end_transaction_on_a_new_leader_whose_high_watermark_is_behind_the_half_message_commits_it(stores):
    """A promoted leader holds the half message but its high watermark (store.set_commit_limit: what
    its in-sync set confirmed) has not reached it yet. The producer's EndTransaction COMMIT was refused
    as an unknown transaction (INVALID_TRANSACTION_ID: the client gives up; only an orphan check could
    save it). It is the broker's own record: the commit is put (acknowledged, under SYNC replication,
    once the in-sync set holds the copy and so the half before it), once."""
    s = stores(ManualClock())
    s.create_topic("T", 1)
    t = service(s)
    a = send_half(s, t, b"a", "UA")
    limit = s.commitlog_min_offset + s.get_by_commitlog_offset(s.commitlog_min_offset).store_size
    b = send_half(s, t, b"b", "UB")
    s.set_commit_limit(lambda: limit)            # 'a' readable, 'b' not yet
    assert end(t, b, "UB", COMMIT).code == Code.OK
    assert end(t, a, "UA", ROLLBACK).code == Code.OK
    s.set_commit_limit(None)
    assert bodies(s, "T") == [b"b"]
    assert end(t, b, "UB", COMMIT).code == Code.OK and bodies(s, "T") == [b"b"], "once"
    st = end(t, b, "UB", ROLLBACK)
    assert st.code == Code.INVALID_TRANSACTION_ID and "already committed" in st.message


@pytest.mark.parametrize("between", ["the checker's flush", "the commit's put"])
def test_a_commit_taken_by_a_failure_of_the_log_before_its_cut_back_ran_is_not_forgotten(between):
    """The log goes on past what a failure took (its flushed offset moved to where it resumes) before
    the broker's cut_back runs on the loop. Neither the checker's flush in between nor a commit whose
    put answered just before the failure may count the commit's copy as flushed and forget it:
    cut_back makes it undecided, ended again it is put again."""
    from tidemq.broker.topic_names import HALF_TOPIC
    from tidemq.store import MessageStore
    from tidemq.store.log_failure import LogFailed
    from tidemq.testing.faulty_io import FaultyFileIO
    from ...support.store import memory_config
    fio = FaultyFileIO(seed=6)
    s = MessageStore(memory_config(segment_size_bytes=32 << 10, commitlog_dirs=("/r/a", "/r/b")), fio=fio,
                     clock=ManualClock()).start()

    def fail():
        fio.fail("fsync", errno.EIO, "/r/a/")
        with pytest.raises(LogFailed):
            s.commit_log.flush()
    try:
        s.create_topic("T", 1)
        t = service(s)
        a = send_half(s, t, b"a", "UA")
        s.commit_log.flush()                               # durable
        if between == "the commit's put":
            put = t.put

            async def put_then_the_log_fails(msgs):
                rs = await put(msgs)                       # the copy: answered OK, not flushed
                fail()
                return rs
            t.put = put_then_the_log_fails
        assert end(t, a, "UA", COMMIT).code == Code.OK     # its copy not flushed
        if between == "the commit's put":
            t.put = put
        else:
            fail()
            t.flush()                                      # before cut_back
        [f] = s.log_failures
        assert bodies(s, "T") == [], "the copy of 'a' was taken back"
        t.cut_back(f.queue_ends.get((HALF_TOPIC, 0)), f.covers)
        assert end(t, a, "UA", COMMIT).code == Code.OK and bodies(s, "T") == [b"a"], "put again"
    finally:
        s.shutdown()


def test_a_kill_after_a_failure_of_the_log_before_the_journal_was_cut_takes_no_new_transaction_for_an_old_one():
    """The log fails (ASYNC_FLUSH) and the half queue is cut back below a decision the journal holds; a
    new half message takes that offset again; the process is killed before Transactions.cut_back
    compacted the journal. The half queue stands as far as the decision again: at the next start the
    new transaction must not be taken as the old one ('already rolled back')."""
    import errno
    import pytest
    from tidemq.broker.topic_names import HALF_TOPIC
    from tidemq.store import MessageStore
    from tidemq.store.log_failure import LogFailed
    from tidemq.testing.faulty_io import FaultyFileIO
    from ...support.store import memory_config
    fio = FaultyFileIO(seed=6)
    cfg = memory_config(segment_size_bytes=32 << 10, commitlog_dirs=("/r/a", "/r/b"))
    s = MessageStore(cfg, fio=fio, clock=ManualClock()).start()
    s.create_topic("T", 1)
    t = service(s)
    a = send_half(s, t, b"a", "UA")                    # half offset 0
    s.commit_log.flush()                               # durable
    b = send_half(s, t, b"b", "UB")                    # 1: answered OK, never flushed
    assert end(t, b, "UB", ROLLBACK).code == Code.OK
    t.scan()
    t.flush()
    fio.fail("fsync", errno.EIO, "/r/a/")
    with pytest.raises(LogFailed):
        s.commit_log.flush()
    [f] = s.log_failures
    assert f.queue_ends == {(HALF_TOPIC, 0): 1}
    c = send_half(s, t, b"c", "UC")                    # takes half offset 1 again
    s.commit_log.flush()
    s.kill()                                           # before cut_back compacted the journal
    s2 = MessageStore(cfg, fio=fio.after_crash(), clock=ManualClock()).start()
    try:
        t2 = service(s2)
        assert end(t2, c, "UC", COMMIT).code == Code.OK and bodies(s2, "T") == [b"c"], "a new transaction"
        assert end(t2, a, "UA", COMMIT).code == Code.OK and sorted(bodies(s2, "T")) == [b"a", b"c"]
    finally:
        s2.shutdown()
