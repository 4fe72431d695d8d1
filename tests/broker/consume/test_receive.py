"""Pop consumption without a server: Consumption over a real store, PopState and a manual clock.

In order (a FIFO consumer group): a queue hands out nothing while a message it gave is
invisible, moves on after the ack, gives the held-up message back first (attempt + 1) once
its invisible time is over, keeps that across a restart of the pop state; other queues and
other groups are not held. ForwardMessageToDeadLetterQueue moves and acks.
"""

import asyncio

from tidemq.protocol.stubs import Code, pb, spb

from ...support.pop import ORDERED, ack, bodies, put
from ...support.wait import PATIENCE_S

INVISIBLE_MS = 10_000


class HourContext:
    """A call's context with an hour left and no metadata: the receive's long polls run to their own end."""

    def time_remaining(self):
        return 3600.0

    def invocation_metadata(self):
        return ()


def test_a_queue_holds_its_next_message_while_one_is_in_flight(world):
    store, clock, consumption = world
    c = consumption()
    put(store, 0, b"a0", b"a1", b"a2")
    put(store, 1, b"b0", b"b1")
    first = c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None) + c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None)
    assert sorted(bodies(first)) == [b"a0", b"b0"], "the head of each queue"
    assert c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == [], "both queues held while their heads are out"
    a0 = next(m for m in first if m.body == b"a0")
    ack(c, ORDERED, a0)
    assert bodies(c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)) == [b"a1", b"a2"], \
        "after the ack queue 0 moves on (a batch takes consecutive messages, in order); queue 1 still held"
    other = c.pop_batch("unordered", "T", 8, INVISIBLE_MS, None)
    assert sorted(bodies(other)) == [b"a0", b"a1", b"a2", b"b0", b"b1"], "another group is not held"


def test_after_the_invisible_time_the_held_up_message_comes_back_first(world):
    store, clock, consumption = world
    c = consumption()
    put(store, 0, b"a0", b"a1")
    [a0] = c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None)
    clock.advance(INVISIBLE_MS / 1000 - 0.001)
    assert c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == []
    clock.advance(0.002)
    again = c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)
    assert [(m.body, m.system_properties.delivery_attempt) for m in again] == [(b"a0", 2), (b"a1", 1)], \
        "the expired one first, then what follows it"


def test_only_the_unacked_part_of_a_batch_comes_back_and_the_queue_waits_for_it(world):
    store, clock, consumption = world
    c = consumption()
    put(store, 0, b"a0", b"a1", b"a2")
    got = c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)
    assert bodies(got) == [b"a0", b"a1", b"a2"]
    ack(c, ORDERED, got[0])
    ack(c, ORDERED, got[2])
    put(store, 0, b"a3")
    assert c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == [], "a1 is still out: a3 waits"
    clock.advance(INVISIBLE_MS / 1000)
    again = c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None)
    assert [(m.body, m.system_properties.delivery_attempt) for m in again] == [(b"a1", 2)]
    assert c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == []
    ack(c, ORDERED, again[0])
    assert bodies(c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)) == [b"a3"]


def test_the_hold_survives_a_restart_of_the_pop_state(world):
    store, clock, consumption = world
    c = consumption()
    put(store, 0, b"a0", b"a1")
    [a0] = c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None)
    c.pop.flush()
    c2 = consumption()                         # what a broker killed with -9 reads back: the journal
    assert c2.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == [], "still held after the restart"
    clock.advance(INVISIBLE_MS / 1000)
    again = c2.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)
    assert [(m.body, m.system_properties.delivery_attempt) for m in again] == [(b"a0", 2), (b"a1", 1)]


def test_after_max_deliveries_the_head_goes_to_the_dead_letter_queue_and_the_queue_moves_on(world):
    store, clock, consumption = world
    c = consumption(delivery_attempts_max=2)
    put(store, 0, b"a0", b"a1")
    assert bodies(c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None)) == [b"a0"]
    clock.advance(INVISIBLE_MS / 1000)
    assert bodies(c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None)) == [b"a0"]
    clock.advance(INVISIBLE_MS / 1000)
    assert c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None) == [], "out of attempts: held until it is moved"
    assert asyncio.run(c.bury()) == 1                    # (a receive moves it right after the pop)
    assert bodies(c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None)) == [b"a1"]
    assert [m.body for m in store.get("x", "%DLQ%ordered", 0, 0).messages] == [b"a0"]
    # what the metrics count (tidemq_messages_got_total{topic,status})
    assert c.got.snapshot() == {("T", "OK"): 2, ("T", "REDELIVERED"): 1, ("T", "DEAD_LETTERED"): 1}


def forward(c, group, handle):
    return asyncio.run(c.forward_to_dlq(spb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name=group), topic=pb.Resource(name="T"), receipt_handle=handle, message_id="m",
        delivery_attempt=3, max_delivery_attempts=3))).status.code


def test_forward_to_the_dead_letter_queue_moves_acks_and_frees_the_queue(world):
    store, clock, consumption = world
    c = consumption()
    put(store, 0, b"a0", b"a1")
    [a0] = c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None)
    handle = a0.system_properties.receipt_handle
    assert forward(c, ORDERED, handle) == Code.OK
    dead = store.get("x", "%DLQ%ordered", 0, 0).messages
    assert [(m.body, m.msg_id) for m in dead] == [(b"a0", a0.system_properties.message_id)]
    assert forward(c, ORDERED, handle) == Code.OK, "a resent forward: done already, stored once"
    assert len(store.get("x", "%DLQ%ordered", 0, 0).messages) == 1
    assert bodies(c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)) == [b"a1"], "acked: the queue moves on"
    clock.advance(INVISIBLE_MS / 1000)
    [a1] = c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)
    assert a1.body == b"a1" and a1.system_properties.delivery_attempt == 2


def test_forward_with_a_forged_or_stale_handle_is_refused(world):
    store, clock, consumption = world
    c = consumption()
    put(store, 0, b"a0")
    [a0] = c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None)
    old = a0.system_properties.receipt_handle
    assert forward(c, ORDERED, "T:0:0:1:0123456789abcdef") == Code.INVALID_RECEIPT_HANDLE
    assert forward(c, "another-group", old) == Code.INVALID_RECEIPT_HANDLE
    r = c.change_invisible(spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name=ORDERED), topic=pb.Resource(name="T"), receipt_handle=old,
        invisible_duration={"seconds": 5}, message_id="m"))
    assert r.status.code == Code.OK
    assert forward(c, ORDERED, old) == Code.INVALID_RECEIPT_HANDLE, "superseded by the change"
    assert store.queue_count("%DLQ%ordered") == 0
    assert forward(c, ORDERED, r.receipt_handle) == Code.OK


def test_a_changed_invisible_time_is_the_one_that_counts_and_the_old_handle_is_stale(world):
    store, clock, consumption = world
    c = consumption()
    put(store, 0, b"a0")
    [a0] = c.pop_batch("g", "T", 1, INVISIBLE_MS, None)
    old = a0.system_properties.receipt_handle

    def change(handle, seconds):
        return c.change_invisible(spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name="g"), topic=pb.Resource(name="T"), receipt_handle=handle,
            invisible_duration={"seconds": seconds}, message_id="m"))

    r = change(old, 60)
    assert r.status.code == Code.OK and r.receipt_handle != old
    clock.advance(INVISIBLE_MS / 1000)
    assert c.pop_batch("g", "T", 8, INVISIBLE_MS, None) == [], "lengthened: not back after the first time"
    assert change(old, 60).status.code == Code.INVALID_RECEIPT_HANDLE, "the handle before the change is stale"
    clock.advance(60 - INVISIBLE_MS / 1000 - 0.001)
    assert c.pop_batch("g", "T", 8, INVISIBLE_MS, None) == []
    clock.advance(0.001)
    again = c.pop_batch("g", "T", 8, INVISIBLE_MS, None)
    assert [(m.body, m.system_properties.delivery_attempt) for m in again] == [(b"a0", 2)]


def test_a_waiting_receive_of_a_fifo_group_wakes_up_on_the_ack_that_frees_its_queue(world):
    """The receive waits (long polling up to 10 minutes, the held message invisible for an hour):
    only the ack's wake can end it within the test's own bound."""
    import asyncio

    store, clock, consumption = world
    c = consumption(long_polling_s_max=600.0)
    put(store, 0, b"a0", b"a1")
    [a0] = c.pop_batch(ORDERED, "T", 1, 3_600_000, None)
    pops = []
    real_pop = c.pop_batch

    def counting_pop(*a, **kw):
        got = real_pop(*a, **kw)
        pops.append(bodies(got))
        return got

    c.pop_batch = counting_pop

    req = spb.ReceiveMessageRequest(group=pb.Resource(name=ORDERED), message_queue=pb.MessageQueue(
        topic=pb.Resource(name="T")), batch_size=8, invisible_duration={"seconds": 10},
        long_polling_timeout={"seconds": 600})

    async def scenario():
        async def receive():
            return [r async for r in c.receive(req, HourContext())]
        waiting = asyncio.ensure_future(receive())
        while not pops:                       # the receive ran until it waits (no thread: nothing else runs)
            await asyncio.sleep(0)
        assert pops == [[]] and not waiting.done(), "held: the receive found nothing and waits"
        ack(c, ORDERED, a0)
        return await asyncio.wait_for(waiting, PATIENCE_S)

    resps = asyncio.run(scenario())
    assert [r.message.body for r in resps if r.HasField("message")] == [b"a1"]
    assert pops == [[], [b"a1"]], "woken once, by the ack"


def test_a_damaged_record_is_never_delivered_and_does_not_hold_its_queue(world):
    """Issue 12: a record failing its CRC (damaged on disk under the running store) is skipped by
    ReceiveMessage, counted, and the queue goes on after it, in order too."""
    store, clock, consumption = world
    c = consumption()
    put(store, 0, b"a0", b"a1", b"a2")
    g = store.get("g", "T", 0, 1, max_count=1)
    a1 = g.messages[0]
    seg = store.segments.find(a1.commitlog_offset)
    seg.mapping[a1.commitlog_offset - seg.start_offset + 88] ^= 0x01      # the body's first byte
    assert bodies(c.pop_batch("unordered", "T", 8, INVISIBLE_MS, None)) == [b"a0", b"a2"]
    first = c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None)
    assert bodies(first) == [b"a0"]
    ack(c, ORDERED, first[0])
    assert bodies(c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)) == [b"a2"], "in order, past the damaged one"
    assert store.stats()["records_damaged"] >= 2


def test_an_ack_with_too_many_entries_is_refused_whole_and_invisible_times_are_bounded(world):
    store, clock, consumption = world
    c = consumption(ack_entries_max=4, invisible_duration_s_max=3600)
    put(store, 0, b"a0", b"a1")
    got = c.pop_batch("g", "T", 2, INVISIBLE_MS, None)
    handles = [m.system_properties.receipt_handle for m in got]

    def ack_request(hs):
        return spb.AckMessageRequest(group=pb.Resource(name="g"), topic=pb.Resource(name="T"), entries=[
            spb.AckMessageEntry(message_id="m", receipt_handle=h) for h in hs])

    r = c.ack(ack_request(handles + ["x:0:0:0:0"] * 3))
    assert r.status.code == Code.PAYLOAD_TOO_LARGE and "ack_entries_max=4" in r.status.message and not r.entries
    assert len(c.pop.state("g", "T", 0).inflight) == 2, "nothing acked"

    def change(seconds, nanos=0):
        return c.change_invisible(spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name="g"), topic=pb.Resource(name="T"), receipt_handle=handles[0],
            invisible_duration={"seconds": seconds, "nanos": nanos}, message_id="m")).status

    for seconds, nanos in ((3601, 0), (1 << 62, 0), (-1, 0), (0, 0), (-(1 << 62), 0)):
        st = change(seconds, nanos)
        assert st.code == Code.ILLEGAL_INVISIBLE_TIME and "invisible_duration_s_max" in st.message, (seconds, st)
    assert change(3600).code == Code.OK
    r = c.ack(ack_request(handles[1:]))
    assert r.status.code == Code.OK


def test_two_receives_burying_at_once_move_a_dead_letter_once(world):
    """The dead-letter put may wait (SYNC_FLUSH, SYNC replication): a second receive that finds the
    same message out of attempts meanwhile must not move it again (it was stored twice in the DLQ,
    and the second bury's bookkeeping raised KeyError, failing that receive)."""
    store, clock, consumption = world
    c = consumption(delivery_attempts_max=1)
    put(store, 0, b"a0")
    assert bodies(c.pop_batch("g", "T", 1, INVISIBLE_MS, None)) == [b"a0"]
    clock.advance(INVISIBLE_MS / 1000)

    async def main():
        entered, gate = asyncio.Event(), asyncio.Event()

        class WaitingPuts:                      # a put that waits for its fsync / followers (broker/puts.py)
            async def run(self, fn, *args):
                entered.set()
                await gate.wait()
                return fn(*args)

        c.puts = WaitingPuts()
        assert c.pop_batch("g", "T", 1, INVISIBLE_MS, None) == []          # out of attempts: to bury
        first = asyncio.create_task(c.bury())
        await entered.wait()
        assert c.pop_batch("g", "T", 1, INVISIBLE_MS, None) == []          # another receive, meanwhile
        second = asyncio.create_task(c.bury())
        await asyncio.sleep(0)
        gate.set()
        return await asyncio.gather(first, second, return_exceptions=True)

    got = asyncio.run(main())
    assert not [r for r in got if isinstance(r, BaseException)], got
    assert sum(got) == 1
    assert [m.body for m in store.get("x", "%DLQ%g", 0, 0).messages] == [b"a0"], "moved once"
    assert c.pop_batch("g", "T", 1, INVISIBLE_MS, None) == [] and not c._dying
    assert asyncio.run(c.bury()) == 0
    assert len(store.get("x", "%DLQ%g", 0, 0).messages) == 1


def test_a_forward_resent_while_the_first_is_storing_moves_the_message_once(world):
    """A FIFO push consumer resends ForwardMessageToDeadLetterQueue until it sees OK: a resend that
    comes while the first one's dead-letter put waits answers OK once that is done, storing nothing."""
    store, clock, consumption = world
    c = consumption()
    put(store, 0, b"a0", b"a1")
    [a0] = c.pop_batch(ORDERED, "T", 1, INVISIBLE_MS, None)
    handle = a0.system_properties.receipt_handle

    async def main():
        entered, gate = asyncio.Event(), asyncio.Event()

        class WaitingPuts:
            async def run(self, fn, *args):
                entered.set()
                await gate.wait()
                return fn(*args)

        c.puts = WaitingPuts()
        req = spb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name=ORDERED), topic=pb.Resource(name="T"), receipt_handle=handle, message_id="m",
            delivery_attempt=3, max_delivery_attempts=3)
        first = asyncio.create_task(c.forward_to_dlq(req))
        await entered.wait()
        second = asyncio.create_task(c.forward_to_dlq(req))
        await asyncio.sleep(0)
        gate.set()
        return [r.status.code for r in await asyncio.gather(first, second)]

    assert asyncio.run(main()) == [Code.OK, Code.OK]
    assert [m.body for m in store.get("x", "%DLQ%ordered", 0, 0).messages] == [b"a0"], "stored once"
    assert bodies(c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)) == [b"a1"]


def test_an_in_flight_message_not_readable_now_stays_in_flight_and_comes_back(world):
    """A message in flight whose record is not readable when its invisible time ends (a promoted
    leader's high watermark not yet where the old leader's was: store.set_commit_limit; the store
    not running: SERVICE_NOT_AVAILABLE) was taken for "cleaned from the store" and dropped: done for
    the group, never delivered again, though nobody acked it."""
    store, clock, consumption = world
    c = consumption()
    put(store, 0, b"a0")
    put(store, 1, b"b0")
    got = c.pop_batch("g", "T", 8, INVISIBLE_MS, None)
    assert sorted(bodies(got)) == [b"a0", b"b0"]
    clock.advance(INVISIBLE_MS / 1000)
    store.set_commit_limit(lambda: 0)                   # nothing readable for now
    assert c.pop_batch("g", "T", 8, INVISIBLE_MS, None) == []
    store.set_commit_limit(None)
    again = c.pop_batch("g", "T", 8, INVISIBLE_MS, None)
    assert sorted((m.body, m.system_properties.delivery_attempt) for m in again) == [(b"a0", 2), (b"b0", 2)]
    ordered = c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None)
    assert sorted(bodies(ordered)) == [b"a0", b"b0"]
    clock.advance(INVISIBLE_MS / 1000)
    store.set_commit_limit(lambda: 0)
    assert c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None) == []
    store.set_commit_limit(None)
    assert sorted(bodies(c.pop_batch(ORDERED, "T", 8, INVISIBLE_MS, None))) == [b"a0", b"b0"]


def test_a_dead_letter_stored_before_a_kill_is_not_stored_again_after_the_restart(world):
    """bury stores the message in %DLQ%<group>, then notes it done in the pop journal. Killed between
    the two (the DLQ put waits for its fsync or followers: the record is in the log, the note is not),
    the restarted broker found it still in flight, out of attempts, and stored it in the DLQ again."""
    store, clock, consumption = world
    c = consumption(delivery_attempts_max=1)
    put(store, 0, b"a0", b"a1")
    got = c.pop_batch("g", "T", 8, INVISIBLE_MS, None)
    assert bodies(got) == [b"a0", b"a1"]
    clock.advance(INVISIBLE_MS / 1000)
    assert c.pop_batch("g", "T", 8, INVISIBLE_MS, None) == []
    [(key0, (m0, why))] = [(k, v) for k, v in c._dying.items() if k[3] == 0]
    assert asyncio.run(c._to_dlq("g", m0, why)) is None          # a0 stored ... and the broker is killed
    c.pop.flush()
    c2 = consumption(delivery_attempts_max=1)                     # the restart: the pop journal read back
    assert c2.pop_batch("g", "T", 8, INVISIBLE_MS, None) == []
    assert asyncio.run(c2.bury()) == 2
    dead = store.get("x", "%DLQ%g", 0, 0).messages
    assert sorted(m.body for m in dead) == [b"a0", b"a1"], "each once"


def test_a_cursor_past_the_queues_end_comes_back_to_it_and_nothing_sent_after_is_skipped(world):
    """A promoted follower under ASYNC replication opens its old leader's pop state, whose cursors
    may stand past what this log holds (the tail a failover takes back). The messages sent to the new
    leader then got offsets below the cursor: every group that had consumed that far skipped them,
    for good (acknowledged sends, never delivered)."""
    store, clock, consumption = world
    c = consumption()
    put(store, 0, b"a0", b"a1")
    for group in ("g", ORDERED):
        got = c.pop_batch(group, "T", 8, INVISIBLE_MS, None)
        assert bodies(got) == [b"a0", b"a1"]
        for m in got:
            ack(c, group, m)
        c.pop.skip_to(group, "T", 0, 5)          # the old leader's cursor: 3 messages this log never got
    c.pop.deliver("g", "T", 0, 3, 16, clock.now_ms())   # ... one of them in flight, out of attempts
    c.pop.flush()
    promoted = consumption()                      # the new leader's service, built from that state
    assert promoted.cursors_within_queues() == 2
    put(store, 0, b"n2", b"n3", b"n4", b"n5")    # sent to the new leader
    for group in ("g", ORDERED):
        assert bodies(promoted.pop_batch(group, "T", 8, INVISIBLE_MS, None)) == [b"n2", b"n3", b"n4", b"n5"], group
    assert not promoted._dying, "n3 is a new message: the old delivery's attempts do not count for it"
    promoted.pop.flush()
    again = consumption()                         # the cursor's move back was journaled
    assert again.pop.state("g", "T", 0).cursor == 6 and again.cursors_within_queues() == 0


def test_a_receive_held_by_a_fetch_quota_hands_out_nothing_whose_invisible_time_ran_out_meanwhile(world):
    """A fetch quota delays a receive's answer after its messages were popped (protection/quotas.py:
    the debt's delay, up to quota_throttle_ms_max). Their invisible time counted from the pop: a delay
    longer than it let another consumer receive the message again while the first answer was still
    held, and the first consumer got a message whose handle was already stale (delivered twice at
    once). The invisible time now counts from when the answer goes out. (The quota's delay is real
    time, 0.3 s here; the store's clock is the test's, moved 0.2 s while it waits: past the 0.1 s
    invisible time of a pop-time count, within the delay.)"""
    from tidemq.broker.protection.quotas import Quotas

    class Held(Quotas):
        """The answer's charge seen (``charged``, once the loop runs): popped, its answer held now."""
        charged: asyncio.Event

        def charge(self, *a, **k):
            self.charged.set()
            return super().charge(*a, **k)

    store, clock, consumption = world
    c = consumption()
    c.quotas = Held(None, None, clock, 30.0)
    c.quotas.replace({"topic:T": {"fetch": 1000}})        # 1000 bytes a second; a full bucket to start
    put(store, 0, b"x" * 1300)                            # 300 bytes of debt: a 0.3 s delay

    req = spb.ReceiveMessageRequest(group=pb.Resource(name="g"), message_queue=pb.MessageQueue(
        topic=pb.Resource(name="T")), batch_size=8, invisible_duration={"nanos": 100_000_000},
        long_polling_timeout={"seconds": 0})

    async def scenario():
        async def receive():
            return [r async for r in c.receive(req, HourContext())]
        c.quotas.charged = asyncio.Event()
        first = asyncio.ensure_future(receive())
        await asyncio.wait_for(c.quotas.charged.wait(), PATIENCE_S)    # popped: its answer is held by the quota now
        assert c.pop.state("g", "T", 0).inflight
        clock.advance(0.2)
        other = c.pop_batch("g", "T", 8, 100)
        return await asyncio.wait_for(first, PATIENCE_S), other

    resps, other = asyncio.run(scenario())
    assert other == [], "nobody else is handed it while the first answer waits"
    [m] = [r.message for r in resps if r.HasField("message")]
    ack(c, "g", m)                                        # raises on a stale handle


def test_a_receive_waiting_for_a_damaged_units_walk_is_woken_when_it_ends_before_the_wait_begins(world):
    """A damaged consume-queue unit's walk of the log runs aside (store/unit_repair.py): the pop answers
    nothing while it runs and the receive waits for it (notify_readable). A walk kept between the pop
    and the start of that wait wakes it all the same: the receive hands out the message then, not an
    empty answer at the end of its long poll."""
    import glob
    import os
    import threading

    from tidemq.store.consume_queue import UNIT

    store, clock, consumption = world
    from tidemq.store import Message
    store.create_topic("O", 1)
    assert store.put(Message(topic="O", body=b"o0")).ok
    put(store, 0, b"a0")
    stranger = store.get("G", "O", 0, 0).messages[0].commitlog_offset
    assert bodies(store.get("G", "T", 0, 0).messages) == [b"a0"]          # dispatched: its unit is in the file
    [cq] = glob.glob(os.path.join(store.config.root_dir, "consumequeue", "T", "0", "*"))
    fd = os.open(cq, os.O_WRONLY)
    try:
        os.pwrite(fd, UNIT.pack(stranger, 100, 0), 0)   # a0's unit points at o0's intact record
    finally:
        os.close(fd)
    store.walk_units_aside()
    c = consumption(long_polling_s_max=600.0)
    real = c.pop_batch

    def pop_then_the_walk_ends(*a, **k):
        before = store.walks_kept()
        got = real(*a, **k)
        kept = threading.Event()
        if store.reader.repair.on_walked(kept.set, before):
            assert kept.wait(PATIENCE_S), "hang bound"
        return got
    c.pop_batch = pop_then_the_walk_ends

    req = spb.ReceiveMessageRequest(group=pb.Resource(name="g"), message_queue=pb.MessageQueue(
        topic=pb.Resource(name="T")), batch_size=1, invisible_duration={"seconds": 30},
        long_polling_timeout={"seconds": 600})

    async def receive():
        return [r async for r in c.receive(req, HourContext())]
    resps = asyncio.run(asyncio.wait_for(receive(), PATIENCE_S))       # (hang bound: not woken)
    assert bodies([r.message for r in resps if r.HasField("message")]) == [b"a0"], resps
