"""store/types.py: the store's values. A message's keys as a list; every refusal reason with its
one status; a PutResult's fields, ids and refusals; PutResults as a sequence of PutResult built from
the append's arrays (refused ones in their place, the appended ones sharing one status); the
lifecycle states and the error a call gets from a store that is not running."""

import pytest

from tidemq.record import codec
from tidemq.store.types import (GetResult, GetStatus, Message, PutReason, PutResult, PutResults, PutStatus,
                                StoreError, StoreNotRunning, StoreState)

HOST = codec.encode_host("10.0.0.7:10911")


def test_a_messages_keys_are_a_list():
    assert Message("T", b"x").keys == []
    assert Message("T", b"x", keys="order-1").keys == ["order-1"]
    assert Message("T", b"x", keys=("a", "b")).keys == ["a", "b"]
    assert repr(Message("T", b"xyz", tags="t")) == "Message(topic='T', body=3 bytes, tags='t', keys=[])"


def test_every_reason_has_one_status_and_only_put_ok_is_ok():
    assert {r.status for r in PutReason} <= set(PutStatus) - {PutStatus.PUT_OK}
    assert PutReason.DISK_FULL.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert PutReason.BODY_TOO_LARGE.status is PutStatus.MESSAGE_ILLEGAL
    # appended and not confirmed (timed out, or the in-sync set shrank meanwhile): one status, whose
    # resend the broker never stores twice; refused before the append: another
    assert PutReason.REPLICATION_TIMEOUT.status is PutReason.REPLICA_LOST.status is PutStatus.FLUSH_SLAVE_TIMEOUT
    assert PutReason.REPLICAS_NOT_ENOUGH.status is PutStatus.SLAVE_NOT_AVAILABLE
    assert [s for s in PutStatus if s.ok] == [PutStatus.PUT_OK]


def test_a_put_result_and_its_ids():
    r = PutResult(PutStatus.PUT_OK, 4096, 2, 17, 250, 123, None, None, HOST)
    assert r.ok and (r.commitlog_offset, r.queue_id, r.queue_offset, r.size, r.store_timestamp_ms) == (4096, 2, 17, 250, 123)
    assert r.offset_msg_id == codec.offset_msg_id(HOST, 4096) and r.msg_id == r.offset_msg_id
    assert codec.parse_offset_msg_id(r.msg_id) == ("10.0.0.7:10911", 4096)
    assert PutResult(PutStatus.PUT_OK, 4096, uniq_key="U1", store_host=HOST).msg_id == "U1"
    assert r.reason is None and r.error is None and "reason" not in repr(r)


def test_a_refused_put_has_no_offsets_and_says_why():
    r = PutResult.refused(PutReason.BAD_QUEUE_ID, "queue 9 of T: the topic has 8")
    assert not r.ok and r.status is PutStatus.MESSAGE_ILLEGAL and r.reason is PutReason.BAD_QUEUE_ID
    assert (r.commitlog_offset, r.queue_id, r.queue_offset, r.size) == (-1, -1, -1, 0)
    assert r.offset_msg_id is None and r.msg_id is None
    assert "reason=BAD_QUEUE_ID" in repr(r) and "queue 9 of T" in repr(r)


def filled(n=3):
    rs = PutResults(n, now_ms=99, store_host=HOST)
    for i in range(n):
        rs.phys[i], rs.size[i], rs.qid[i], rs.qoff[i], rs.uniq[i] = 1000 * i, 100, i % 2, 10 + i, f"U{i}"
    return rs


def test_put_results_are_a_sequence_of_put_results():
    rs = filled()
    assert len(rs) == 3 and rs.all_ok()
    assert rs[1] == PutResult(PutStatus.PUT_OK, 1000, 1, 11, 100, 99, None, "U1", HOST)
    assert rs[-1] == rs[2] and rs[0:2] == [rs[0], rs[1]] and list(rs)[2] == rs[2]
    with pytest.raises(IndexError):
        rs[3]
    with pytest.raises(IndexError):
        rs[-4]
    assert rs == list(rs) and rs == filled() and rs != filled(2)
    assert rs + [None] == list(rs) + [None] and [None] + rs == [None] + list(rs)


def test_a_refused_message_keeps_its_place_and_the_batch_is_not_all_ok():
    rs = filled()
    bad = PutResult.refused(PutReason.BAD_PROPERTY, "key with a space")
    rs.refuse(1, bad)
    assert [r.ok for r in rs] == [True, False, True] and rs[1] is bad and not rs.all_ok()


def test_the_appended_share_one_status():
    rs = filled()
    rs.status, rs.reason, rs.error = PutStatus.FLUSH_DISK_TIMEOUT, PutReason.FLUSH_TIMEOUT, "not durable in 5 s"
    assert all(r.status is PutStatus.FLUSH_DISK_TIMEOUT and r.reason is PutReason.FLUSH_TIMEOUT for r in rs)
    assert all(r.commitlog_offset >= 0 for r in rs), "appended all the same"
    assert not rs.all_ok(), "appended, not made durable as asked"


def test_all_ok_needs_messages_all_appended():
    assert not PutResults(0).all_ok()
    rs = filled()
    rs.size[2] = 0                          # never appended
    assert not rs.all_ok()
    refused = PutResults.all_refused(2, PutResult.refused(PutReason.NOT_RUNNING, "store is stopped"))
    assert [r.reason for r in refused] == [PutReason.NOT_RUNNING] * 2 and not refused.all_ok()


def test_a_get_result():
    g = GetResult(GetStatus.OFFSET_TOO_SMALL, 5, 5, 9)
    assert g.messages == [] and not g.from_disk and g.records is None
    assert repr(g) == "GetResult(OFFSET_TOO_SMALL, next=5, min=5, max=9, messages=0)"


def test_a_call_on_a_store_that_is_not_running():
    e = StoreNotRunning(StoreState.STOPPED, "create_topic")
    assert isinstance(e, StoreError) and e.state is StoreState.STOPPED and e.call == "create_topic"
    assert str(e) == "store is stopped: create_topic() needs a running store"
    assert StoreState("running") is StoreState.RUNNING and StoreState.KILLED == "killed"
