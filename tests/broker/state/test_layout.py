"""The broker's state directory: every path under <root>/broker/, and the move of a root of the
layout before it (pop state and its secret, group offsets, timer progress, transaction
decisions lying directly under the root): nothing is lost, a crash mid-move is finished at
the next start, an item found at both places is not overwritten."""

import asyncio
import os
import shutil

from tidemq.broker.deferred.parking import PROP_DELIVER_MS, park
from tidemq.broker.topic_names import SCHEDULE_TOPIC
from tidemq.broker.service import MessagingService
from tidemq.broker.state.layout import StateLayout, legacy_moves, migrate, remake, state_dir
from tidemq.config import KIB, BrokerConfig
from tidemq.io import ManualClock, OsFileIO
from tidemq.protocol.stubs import Code, pb, spb
from tidemq.store import Message, MessageStore, StoreConfig

OLD = ("pop/journal", "pop/snapshot.json", "config/pop.secret", "config/consumer_offsets.json",
       "timer/checkpoint.json", "transaction/journal", "transaction/snapshot.json")
NEW = ("broker/pop/journal", "broker/pop/snapshot.json", "broker/pop/secret", "broker/consumer_offsets.json",
       "broker/timer/checkpoint.json", "broker/transactions/journal", "broker/transactions/snapshot.json")


def open_store(root, clock):
    return MessageStore(StoreConfig(root_dir=root, segment_size_bytes=256 * KIB, index_slots=1000, index_entries=4000,
                                    preallocate_next_segment=False), clock=clock).start()


def to_old_layout(root):
    """What a broker of the layout before <root>/broker/ leaves: the same files at the old places."""
    for old, new in zip(OLD, NEW):
        os.makedirs(os.path.dirname(os.path.join(root, old)), exist_ok=True)
        os.replace(os.path.join(root, new), os.path.join(root, old))
    shutil.rmtree(os.path.join(root, "broker"))


def files(root):
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}


def test_every_path_is_under_the_state_directory(tmp_path):
    lay = StateLayout(state_dir(str(tmp_path)))
    paths = [lay.pop_dir, lay.pop_secret, lay.consumer_offsets, lay.timer_checkpoint, lay.transactions_dir]
    assert all(p.startswith(str(tmp_path / "broker") + os.sep) for p in paths)
    assert [os.path.relpath(new, tmp_path) for _, new in legacy_moves(str(tmp_path))] == [
        "broker/pop", "broker/pop/secret", "broker/consumer_offsets.json", "broker/timer", "broker/transactions"]


def test_an_old_layout_root_is_moved_and_nothing_is_lost(tmp_path):
    root = str(tmp_path / "store")
    clock = ManualClock()
    store = open_store(root, clock)
    store.create_topic("T", 1)
    svc = MessagingService(store, BrokerConfig())
    # pop state: two messages delivered to group g, the first acked
    for b in (b"p0", b"p1"):
        assert store.put(Message(topic="T", body=b, queue_id=0)).ok
    delivered = svc.consumption.pop_batch("g", "T", 2, 600_000, None)
    assert [m.body for m in delivered] == [b"p0", b"p1"]
    svc.pop.ack("g", delivered[0].system_properties.receipt_handle)
    # a committed offset
    svc.group_offsets.set("etl", "T", 0, 2)           # (within the queue: past it, a start cuts it back)
    # timer progress: one delayed message moved, one still waiting
    for i, due in enumerate((1000, 3_600_000)):
        m = Message(topic="T", body=b"d%d" % i, properties={"UNIQ_KEY": "D%d" % i,
                                                             PROP_DELIVER_MS: str(clock.now_ms() + due)})
        assert store.put(park(m, SCHEDULE_TOPIC)).ok
    svc.timer.enqueue()
    clock.advance(2.0)
    assert svc.timer.move_due(clock.now_ms()) == (1, False)
    # transaction decisions: one half undecided, the next rolled back
    halves = []
    for u in ("U-open", "U-rolled-back"):
        r = store.put(svc.transactions.half(Message(topic="T", body=u.encode(), properties={"UNIQ_KEY": u}), "c1"))
        halves.append(r.offset_msg_id)

    def end(txid, uniq, resolution):
        return asyncio.run(svc.transactions.end(spb.EndTransactionRequest(
            topic=pb.Resource(name="T"), message_id=uniq, transaction_id=txid, resolution=resolution)))

    assert end(halves[1], "U-rolled-back", pb.TransactionResolution.ROLLBACK).code == Code.OK
    svc.close()
    store.shutdown()
    assert set(NEW) <= files(root)

    to_old_layout(root)
    assert set(OLD) <= files(root) and not os.path.exists(os.path.join(root, "broker"))
    store = open_store(root, clock)
    svc = MessagingService(store, BrokerConfig())                # moves the state, then opens it
    try:
        assert set(NEW) <= files(root) and not set(OLD) & files(root)
        assert not any(os.path.exists(os.path.join(root, d)) for d in ("pop", "timer", "transaction"))
        # pop: the acked message is not delivered again; the other is still in flight, and the
        # handle given before the move still acks (the receipt-handle secret moved with it)
        st = svc.pop.state("g", "T", 0)
        assert st.cursor == 2 and sorted(st.inflight) == [1]
        svc.pop.ack("g", delivered[1].system_properties.receipt_handle)
        assert svc.pop.state("g", "T", 0).inflight == {}
        assert svc.group_offsets.get("etl", "T", 0) == 2
        # the timer goes on from its checkpoint: the moved message is not moved twice
        svc.timer.enqueue()
        assert svc.timer.move_due(clock.now_ms()) == (0, False) and svc.timer.pending == 1
        got = store.get("check", "T", 0, 0, max_count=32).messages
        assert [m.body for m in got].count(b"d0") == 1
        # the rollback is remembered: a commit of it is refused and puts nothing
        st = end(halves[1], "U-rolled-back", pb.TransactionResolution.COMMIT)
        assert st.code == Code.INVALID_TRANSACTION_ID and "rolled back" in st.message
        assert end(halves[0], "U-open", pb.TransactionResolution.COMMIT).code == Code.OK
        bodies = [m.body for m in store.get("check", "T", 0, 0, max_count=32).messages]
        assert b"U-open" in bodies and b"U-rolled-back" not in bodies
    finally:
        svc.close()
        store.shutdown()


def test_a_move_cut_short_is_finished_and_nothing_is_created_when_there_is_nothing_to_move(tmp_path):
    root = str(tmp_path)
    fio = OsFileIO()
    assert migrate(fio, root) == [] and os.listdir(root) == []
    for rel, text in (("pop/journal", b"j\n"), ("config/pop.secret", b"s"), ("config/consumer_offsets.json", b"{}"),
                      ("transaction/journal", b"t\n")):
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(text)
    os.makedirs(os.path.join(root, "broker", "pop"))          # a crash after the first move: pop/ is there
    os.replace(os.path.join(root, "pop", "journal"), os.path.join(root, "broker", "pop", "journal"))
    os.rmdir(os.path.join(root, "pop"))
    moved = migrate(fio, root)
    assert [os.path.relpath(src, root) for src, _ in moved] == ["config/pop.secret", "config/consumer_offsets.json",
                                                                "transaction"]
    assert files(root) == {"broker/pop/journal", "broker/pop/secret", "broker/consumer_offsets.json",
                           "broker/transactions/journal"}
    assert migrate(fio, root) == [], "done once"


def test_an_item_at_both_places_is_left_alone(tmp_path, caplog):
    root = str(tmp_path)
    for rel, text in (("config/consumer_offsets.json", b"old"), ("broker/consumer_offsets.json", b"new")):
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(text)
    assert migrate(OsFileIO(), root) == []
    assert open(os.path.join(root, "broker/consumer_offsets.json"), "rb").read() == b"new"
    assert open(os.path.join(root, "config/consumer_offsets.json"), "rb").read() == b"old"
    assert "both exist" in caplog.text


def test_a_fresh_root_gets_only_the_new_layout(tmp_path):
    root = str(tmp_path / "store")
    store = open_store(root, ManualClock())
    try:
        svc = MessagingService(store, BrokerConfig())
        svc.group_offsets.set("g", "T", 0, 1)
        svc.close()
    finally:
        store.shutdown()
    assert not any(os.path.exists(os.path.join(root, d)) for d in ("pop", "timer", "transaction"))
    assert not os.path.exists(os.path.join(root, "config", "pop.secret"))
    assert {"broker/pop/secret", "broker/consumer_offsets.json", "broker/timer/checkpoint.json"} <= files(root)


def test_a_state_directory_removed_while_running_is_made_again_only_where_the_store_runs(tmp_path):
    """remake: the state directory and its parts, made again while the store root holds its abort
    file (a running store); a root without it (a disk not mounted any more: the mount point's empty
    directory) gets nothing."""
    fio, root = OsFileIO(), str(tmp_path / "root")
    lay = StateLayout(state_dir(root))
    for d in (lay.pop_dir, os.path.dirname(lay.timer_checkpoint), lay.transactions_dir):
        os.makedirs(d)
    assert remake(fio, root) == []
    shutil.rmtree(lay.dir)
    assert remake(fio, root) == [] and not os.path.exists(lay.dir), "no abort file: not a running store's root"
    open(os.path.join(root, "abort"), "wb").close()
    assert set(remake(fio, root)) == {lay.dir, lay.pop_dir, os.path.dirname(lay.timer_checkpoint),
                                      lay.transactions_dir}
    assert os.path.isdir(lay.pop_dir) and remake(fio, root) == []
