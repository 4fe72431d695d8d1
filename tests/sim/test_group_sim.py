"""The seeded simulation of a broker group (group_sim.py): random runs per replication mode
(two thirds of --sim-seeds N of each: 100 by default), and the scenarios of issue 27 scripted on the same group,
deterministic: a lagging follower never elected while an up-to-date member of the in-sync set
lives (the "378 lost" reproduction, and the unforced one: every session expires at once and the
lagging member registers first); a paused ASYNC leader that wakes up acknowledges nothing; a
follower whose disk is full leaves the in-sync set once, and writes are then refused before
anything is written."""

import asyncio
import errno

import pytest

from tidemq.store import Message

from .group_sim import LAG_MS, PUT_WAIT_S, SEGMENT_FILES, SESSION_S, GroupSim


def pytest_generate_tests(metafunc):
    if "group_seed" in metafunc.fixturenames:
        # two thirds of --sim-seeds per replication mode (a group's run costs more than the store's):
        # 100 of each by default, a few hundred runs in all
        metafunc.parametrize("group_seed", range(max(1, metafunc.config.getoption("sim_seeds") * 2 // 3)))


def test_a_seed_replays_byte_for_byte_in_another_process():
    """``python -m tests.sim.group_sim SEED`` prints the same group log, trace and figures in every
    process: nothing in a run depends on what differs between processes (addresses, the string hash
    seed, the dedup key drawn per process). Seed 8 chose its second leader by the order the
    coordinator woke its watchers in (a set of clients: their addresses), and its followers' last
    lines by the order asyncio.all_tasks listed the tasks left (a set too)."""
    import os
    import re
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    outs = set()
    for hash_seed in ("1", "2"):
        p = subprocess.run([sys.executable, "-m", "tests.sim.group_sim", "8"], cwd=root, capture_output=True,
                           text=True, timeout=300, env={**os.environ, "PYTHONHASHSEED": hash_seed})
        assert p.returncode == 0, p.stderr[-2000:]
        # (the one real-time figure: how long a recovery took)
        outs.add(re.sub(r"recovery in \d+ ms", "recovery in N ms", p.stdout + p.stderr))
    assert len(outs) == 1, "the same seed ran differently in two processes"


@pytest.mark.parametrize("mode", ["SYNC", "ASYNC"])
def test_group_survives_kills_pauses_partitions_and_disk_faults(group_seed, mode):
    sim = GroupSim(group_seed, mode).run()
    st = sim.stats
    assert st.sent > 0 and st.older_epoch_acks == 0 and st.twice == 0
    if mode == "SYNC":
        assert st.lost == 0 and st.served_then_cut == 0


def settled(sim: GroupSim) -> bool:
    """One leader, every other member in its in-sync set (as recorded)."""
    leaders = sim.leaders()
    return len(leaders) == 1 and sim.isr() is not None and sorted(sim.isr()) == sorted(sim.members)


def leader_name(sim: GroupSim) -> str:
    return sim.leaders()[0].name


async def quiet_group(sim: GroupSim) -> tuple:
    """A settled group whose producer stopped (a scenario's own puts only): (leader, follower, follower)."""
    await sim.until(lambda: settled(sim), "a settled group")
    sim._producing = False
    await asyncio.sleep(0.5)
    lead = sim.members[leader_name(sim)]
    return (lead, *[sim.members[n] for n in sorted(sim.members) if n != lead.name])


def test_the_378_lost_reproduction_never_elects_the_lagging_follower():
    """SYNC, in_sync_replicas_min=1, three members: a follower stopped 5 s (the leader drops it from
    the recorded set before any put goes on without it: the puts wait meanwhile); the leader killed
    and the stopped follower continued; when the leader's node is gone, the up-to-date follower
    stopped for less than its session. The lagging one is never elected: the election waits."""
    seen = {}

    async def script(sim: GroupSim) -> None:
        await sim.until(lambda: settled(sim), "a settled group")
        await asyncio.sleep(0.5)
        lead = leader_name(sim)
        up_to_date, lagging = [n for n in sorted(sim.members) if n != lead]
        sim.members[lagging].pause()
        await asyncio.sleep(5.0)
        assert lagging not in sim.isr(), "dropped from the record (replica_lag_time_max_ms)"
        acked_before = sim.stats.acked
        await asyncio.sleep(0.5)
        assert sim.stats.acked > acked_before, "the puts went on without it once it was dropped"
        epoch = max(sim.coord.began)
        dead_session = sim.members[lead].node.coordinator.c.session_id
        gone = asyncio.Event()

        def expired(sid: int) -> None:                   # the moment the leader's node goes
            if sid == dead_session:
                sim.members[up_to_date].pause()
                gone.set()
        sim.coord.on_expire = expired
        sim.members[lead].kill()
        sim.members[lagging].resume()
        await gone.wait()
        await asyncio.sleep(1.2)                         # less than its session: it stays a live member
        assert max(sim.coord.began) == epoch, "nobody was elected while it was stopped"
        sim.members[up_to_date].resume()
        await sim.until(lambda: max(sim.coord.began) > epoch, "an election")
        seen["new"] = sim.coord.leaders[max(sim.coord.began)]
        seen["lagging"], seen["up_to_date"] = lagging, up_to_date
        await asyncio.sleep(1.0)

    sim = GroupSim(1, "SYNC", min_in_sync=1, sync_flush=False, script=script).run()
    assert seen["new"] == seen["up_to_date"] != seen["lagging"]
    assert sim.stats.lost == 0 and sim.stats.acked > 50, sim.stats


def test_all_sessions_expire_at_once_and_the_lagging_member_registers_first():
    """The unforced case: a coordinator stall expires every session; the follower whose disk is full
    (out of the in-sync set, far behind) reaches the coordinator first: it is not elected."""
    seen = {}

    async def script(sim: GroupSim) -> None:
        await sim.until(lambda: settled(sim), "a settled group")
        lead = leader_name(sim)
        lagging = sorted(n for n in sim.members if n != lead)[1]
        sim.members[lagging].fio.fail("pwrite", errno.ENOSPC, SEGMENT_FILES, times=1_000_000)
        await sim.until(lambda: lagging not in sim.isr(), "the full follower out of the set")
        await asyncio.sleep(1.0)
        epoch = max(sim.coord.began)
        for n in sim.members:
            sim.coord.cut(n)                           # the coordinator stalls for everyone
        await asyncio.sleep(SESSION_S + 0.5)
        sim.coord.heal(lagging)                        # the lagging member registers first
        await asyncio.sleep(3.0)
        assert max(sim.coord.began) == epoch, "no member of the set is alive: nobody is elected"
        for n in sim.members:
            sim.coord.heal(n)
        await sim.until(lambda: max(sim.coord.began) > epoch, "an election")
        seen["new"], seen["lagging"] = sim.coord.leaders[max(sim.coord.began)], lagging
        await asyncio.sleep(1.0)

    sim = GroupSim(2, "SYNC", min_in_sync=1, sync_flush=False, script=script).run()
    assert seen["new"] != seen["lagging"]
    assert sim.stats.lost == 0, sim.stats


def test_a_paused_async_leader_acknowledges_nothing_when_it_wakes_up():
    """ASYNC: the leader stopped 6 s (past its session), a new leader elected; the old one's pending
    and new puts when it runs again are refused (its lease ran out), never acknowledged."""
    seen = {}

    async def script(sim: GroupSim) -> None:
        await sim.until(lambda: settled(sim), "a settled group")
        lead = sim.members[leader_name(sim)]
        epoch = max(sim.coord.began)
        lead.pause()
        pending = asyncio.get_running_loop().create_task(lead.serve_put([Message("SimT", b"-1|while stopped")]))
        await asyncio.sleep(6.0)
        assert max(sim.coord.began) > epoch, "a new leader was elected meanwhile"
        assert lead.node.leading, "the stopped leader still thinks it leads"
        lead.resume()
        seen["pending"] = await pending
        seen["after"] = await lead.serve_put([Message("SimT", b"-2|after waking")])
        await asyncio.sleep(1.0)

    sim = GroupSim(3, "ASYNC", sync_flush=False, script=script).run()
    for res in (seen["pending"], seen["after"]):
        assert res[0] == "refused", res
        assert res[1].name in ("LEASE_EXPIRED", "NOT_LEADER"), res
    assert sim.stats.older_epoch_acks == 0


def test_a_follower_with_a_full_disk_leaves_the_set_once_and_writes_are_refused_unwritten():
    """SYNC, in_sync_replicas_min=2, three members: a follower's disk refuses every write. It leaves
    the recorded in-sync set once (no flapping while it retries), puts waiting then are answered
    appended-but-unconfirmed (their resends never stored twice), and every later put is refused
    before anything is written (the "49 writes stored though reported failed" of issue 27)."""
    seen = {}

    async def script(sim: GroupSim) -> None:
        await sim.until(lambda: settled(sim), "a settled group")
        lead = sim.members[leader_name(sim)]
        full = sorted(n for n in sim.members if n != lead.name)[0]
        sim.members[full].fio.fail("pwrite", errno.ENOSPC, SEGMENT_FILES, times=1_000_000)
        end_before = lead.store.replica.end
        await sim.until(lambda: full not in sim.isr(), "the full follower out of the set")
        removed_at = sim.now()
        refused_before = sim.stats.refused
        await asyncio.sleep(8.0)                      # it keeps retrying meanwhile
        seen["full"] = full
        seen["flaps"] = sum(1 for _t, _e, m in sim.coord.isr_history if full in m and _t > removed_at)
        seen["refused"] = sim.stats.refused - refused_before
        seen["appended_after"] = lead.store.replica.end - end_before
        seen["local_errors"] = sim.members[full].node.client.status()["local_errors"]

    sim = GroupSim(4, "SYNC", min_in_sync=2, sync_flush=False, script=script).run()
    assert seen["flaps"] == 0, "never back in the set while its disk is full"
    assert seen["refused"] > 20, "puts refused before anything was written"
    assert seen["local_errors"] < 8.0 / 0.1, "it retries with a growing pause, not every 100 ms"
    assert sim.stats.lost == 0 and LAG_MS < 8000


@pytest.mark.parametrize("lagging_stop_s, up_to_date_stop_s", [(0.4, 0.3), (1.5, 0.8), (5.0, 1.2), (5.0, 1.45),
                                                                (0.9, 1.2), (3.0, 0.0)])
def test_whatever_the_timing_no_member_outside_the_recorded_set_is_elected(lagging_stop_s, up_to_date_stop_s):
    """The 378-lost shape at other timings: however long the lagging follower was stopped (shorter or
    longer than replica_lag_time_max_ms) and the up-to-date one (less than its session), the member
    elected was in the recorded set when the epoch began, and nothing acknowledged is lost."""
    seen = {}

    async def script(sim: GroupSim) -> None:
        await sim.until(lambda: settled(sim), "a settled group")
        await asyncio.sleep(0.3)
        lead = leader_name(sim)
        up_to_date, lagging = [n for n in sorted(sim.members) if n != lead]
        sim.members[lagging].pause()
        await asyncio.sleep(lagging_stop_s)
        epoch = max(sim.coord.began)
        dead_session = sim.members[lead].node.coordinator.c.session_id

        def expired(sid: int) -> None:
            if sid == dead_session and up_to_date_stop_s:
                sim.members[up_to_date].pause()
                asyncio.get_running_loop().call_later(up_to_date_stop_s, sim.members[up_to_date].resume)
        sim.coord.on_expire = expired
        sim.members[lead].kill()
        sim.members[lagging].resume()
        await sim.until(lambda: max(sim.coord.began) > epoch, "an election")
        new_epoch = max(sim.coord.began)
        began = sim.coord.began[new_epoch]
        record = [m for t, e, m in sim.coord.isr_history if t < began][-1]
        seen["elected"], seen["record"] = sim.coord.leaders[new_epoch], record
        await asyncio.sleep(1.0)

    sim = GroupSim(5, "SYNC", min_in_sync=1, sync_flush=False, script=script).run()
    assert seen["elected"] in seen["record"], seen
    assert sim.stats.lost == 0 and sim.stats.served_then_cut == 0, sim.stats


@pytest.mark.parametrize("mode", ["SYNC", "ASYNC"])
def test_a_leader_whose_commit_log_fsync_fails_steps_down_and_a_member_of_the_set_leads(mode):
    """SYNC_FLUSH: the leader's commit-log fsync fails (store/log_failure.py: its log cut back to the
    durable end, its only directory failed). It acknowledges nothing from then on, leaves the recorded
    in-sync set and gives up its lease (node.py: on_log_failed); a member of the set is elected; after
    a restart it copies the new leader's log (its own started over). Nothing acknowledged is lost, no
    consumer was served what was cut, no write acknowledged by the old epoch after the new began."""
    seen = {}

    async def script(sim: GroupSim) -> None:
        await sim.until(lambda: settled(sim), "a settled group")
        await asyncio.sleep(0.5)
        lead = sim.members[leader_name(sim)]
        epoch = max(sim.coord.began)
        lead.fio.fail("fsync", errno.EIO, SEGMENT_FILES)
        await sim.until(lambda: lead.store.log_failures, "the leader's commit log failed")
        failed_at = sim.now()
        acked = sim.stats.acked
        await sim.until(lambda: max(sim.coord.began) > epoch, "an election")
        seen["elected"] = sim.coord.leaders[max(sim.coord.began)]
        seen["old"] = lead.name
        seen["took_s"] = sim.coord.began[max(sim.coord.began)] - failed_at
        seen["acked_by_old"] = sum(1 for a in sim.acks.values() if a.member == lead.name and a.at_s >= failed_at)
        seen["record"] = sim.isr()
        await asyncio.sleep(1.0)
        seen["acked_after"] = sim.stats.acked - acked

    sim = GroupSim(6, mode, min_in_sync=1, sync_flush=True, script=script).run()
    assert seen["elected"] != seen["old"] and seen["old"] not in seen["record"], seen
    assert seen["acked_by_old"] == 0, "nothing acknowledged by the failed leader after its failure"
    assert seen["acked_after"] > 0, "the group takes writes again"
    assert seen["took_s"] < SESSION_S, "it stepped down: no need to wait for its session to expire"
    st = sim.stats
    assert st.lost == 0 and st.twice == 0 and st.older_epoch_acks == 0 and st.served_then_cut == 0, st


def test_sync_reads_stop_at_the_high_watermark_on_the_leader_and_the_followers_and_wake_when_it_moves():
    """SYNC, both followers in the recorded set, one stopped (less than replica_lag_time_max_ms): a
    put the leader appended and the running follower copied is not served by either (get, get_raw,
    the max offset every result carries: what a failover could take back); a long poll armed on the
    leader (store.notify_readable) is woken when the stopped follower runs again and confirms it,
    and then both serve it (the high watermark carried in the frames)."""
    from tidemq.store import GetStatus, PutStatus
    seen = {}

    async def script(sim: GroupSim) -> None:
        lead, stopped, running = await quiet_group(sim)
        stopped.pause()
        sim.bodies[-1] = b"-1|held"
        lead.node.acks.timeout_s = 0.0               # the store's own waiting put: answered at once
        [r] = lead.store.put_batch([Message("SimT", sim.bodies[-1], queue_id=0)])
        lead.node.acks.timeout_s = PUT_WAIT_S
        assert r.status is PutStatus.FLUSH_SLAVE_TIMEOUT, "appended, not confirmed by the whole set"
        q, off, end = 0, r.queue_offset, r.commitlog_offset + r.size
        await sim.until(lambda: running.store.replica.end >= end, "the running follower copied it")
        woken = asyncio.Event()
        loop = asyncio.get_running_loop()
        seen["armed"] = lead.store.notify_readable(lambda: loop.call_soon_threadsafe(woken.set))
        for m in (lead, running):
            seen[m.name, "get"] = m.store.get("c", "SimT", q, off, 1).status
            seen[m.name, "raw"] = m.store.get_raw("SimT", q, off, 1).status
            seen[m.name, "max"] = m.store.readable_max_offset("SimT", q)
        await asyncio.sleep(0.3)
        seen["woken early"] = woken.is_set()
        stopped.resume()
        await asyncio.wait_for(woken.wait(), 5.0)
        await sim.until(lambda: running.node.read_limit() >= end, "the follower heard of the new high watermark")
        for m in (lead, running):
            seen[m.name, "after"] = m.store.get("c", "SimT", q, off, 1).status
        seen["names"] = lead.name, running.name
        seen["off"] = off

    sim = GroupSim(7, "SYNC", min_in_sync=1, sync_flush=False, chaos=False, script=script).run()
    lead, running = seen["names"]
    assert seen["armed"] and not seen["woken early"]
    for m in (lead, running):
        assert seen[m, "get"] is GetStatus.OFFSET_OVERFLOW_ONE and seen[m, "raw"] is GetStatus.OFFSET_OVERFLOW_ONE, seen
        assert seen[m, "max"] == seen["off"], "its max offset does not name it"
        assert seen[m, "after"] is GetStatus.FOUND
    assert sim.stats.lost == 0 and sim.stats.served_then_cut == 0


def test_a_follower_never_serves_what_a_failed_fsync_of_the_leader_cuts():
    """SYNC + SYNC_FLUSH (issue 32.3's window): the leader appends a put and sends it before its group
    commit's fsync ends; both followers stopped meanwhile fall out of the in-sync set (the leader is
    its only member), one runs again and copies the put before the leader's fsync ends; then that
    fsync fails (FaultyFileIO) and the leader's log is cut at its durable end for good (it alone may
    be elected). A consumer reading the follower all along is never served the put: the high
    watermark the leader tells its followers counts its own durable end (acks.py). With the
    followers' confirmations alone (or the leader's log end while the set is empty) it was served,
    then cut."""
    from tidemq.store import GetStatus, PutReason
    seen = {}

    async def script(sim: GroupSim) -> None:
        lead, copier, other = await quiet_group(sim)
        lead.flush_open.clear()                      # its fsync ends when this script says
        copier.pause()
        other.pause()
        before = lead.store.replica.end
        sim.bodies[-1] = b"-1|not durable on the leader"
        put = asyncio.get_running_loop().create_task(lead.serve_put([Message("SimT", sim.bodies[-1], queue_id=0)]))
        await sim.until(lambda: lead.store.replica.end > before, "the leader appended it")
        end = lead.store.replica.end
        await sim.until(lambda: not lead.node.acks.isr and sim.isr() == [lead.name],
                        "both followers out of the in-sync set (replica_lag_time_max_ms)")
        seen["durable before"] = lead.store.replica.confirmed()
        copier.resume()
        cursor, deadline = 0, sim.now() + 2.0
        while sim.now() < deadline and not (copier.store.replica.end >= end and sim.now() > seen.setdefault("copied", sim.now()) + 0.003):
            if copier.store.replica.end < end:
                seen.pop("copied", None)
            g = copier.store.get("c", "SimT", 0, cursor, 64)      # a consumer of the follower, all along
            if g.status is GetStatus.FOUND:
                for msg in g.messages:
                    sim.served[msg.commitlog_offset] = int(bytes(msg.body).split(b"|", 1)[0])
                    cursor = msg.queue_offset + 1
            await asyncio.sleep(0.0002)
        seen["copier end"], seen["copier hw"] = copier.store.replica.end, copier.node.read_limit()
        seen["isr at the failure"] = sorted(lead.node.acks.isr)
        seen["served it"] = -1 in sim.served.values()
        lead.fio.fail("fsync", errno.EIO, SEGMENT_FILES, times=1)
        lead.store.group_commit.step()               # the fsync covering it fails: cut at the durable end
        lead.flush_open.set()
        seen["answer"] = await put
        seen["cut"] = lead.store.commit_log.failed_for(end) is not None
        seen["end"], seen["before"] = end, before
        other.resume()

    sim = GroupSim(3, "SYNC", min_in_sync=1, sync_flush=True, chaos=False, script=script).run()
    assert seen["durable before"] <= seen["before"] < seen["end"], seen
    assert seen["copier end"] >= seen["end"] and seen["isr at the failure"] == [], "the window was reached"
    assert seen["copier hw"] <= seen["before"] and not seen["served it"], seen
    assert seen["answer"] == ("refused", PutReason.FLUSH_FAILED) and seen["cut"], "taken out of the leader's log"
    st = sim.stats
    assert st.served_then_cut == 0 and st.lost == 0 and st.twice == 0, st


@pytest.mark.parametrize("seed", [546, 772])
def test_a_timer_that_fires_a_hair_before_its_deadline_does_not_spin_the_leaders_stream(seed):
    """Seeds whose leader's stream waited for the rest of HW_HEARTBEAT_DELAY_S when a float's rounding
    left ~1e-13 s of it: the loop fires such a timer at once (within its clock's resolution) and the
    stream waited again, forever (the simulation's loop: a livelock; a real one burns a CPU until the
    clock ticks). Now it is due."""
    st = GroupSim(seed, "SYNC").run().stats
    assert st.sent > 0 and st.lost == 0 and st.twice == 0 and st.served_then_cut == 0


def test_a_failed_leaders_followers_keep_one_log_and_serve_nothing_it_cut():
    """SYNC + SYNC_FLUSH, both followers in the recorded set, the leader's group commit's fsync held.
    One follower's stream breaks (a reset) while it is stopped at the leader's durable end D; the other
    copies a put the leader appended. The fsync fails: the leader's log is cut at D (log_failure.py),
    sealed there with a BLANK, and goes on in a new segment. Its step down is slow (ZooKeeper's round
    trips: its coordinator's step_down fails for 0.3 s here); meanwhile the first follower runs again and connects anew, still in the set.
    The failed leader sends nothing more in that epoch (node.log_failed_in_epoch) and its high
    watermark stays at D: the follower that copied the put never serves it, and after healing every
    member's log is the new leader's. Before: the first follower was sent the BLANK at D and confirmed
    the new segment, the high watermark went past D with the other's confirmation, the other served
    the put, and whichever then led, the other's log was not its own (SimFailure: "m2's log differs
    from the leader m1's after healing"; test_log_failure_group_e2e.py's served-then-cut)."""
    from tidemq.store import GetStatus
    seen = {}

    async def script(sim: GroupSim) -> None:
        lead, held, copier = await quiet_group(sim)
        gc, slow_until = lead.node.coordinator, [float("inf")]
        step_down = gc.step_down
        gc.step_down = lambda: sim.now() >= slow_until[0] and step_down()     # (False: it goes on leading)
        lead.flush_open.clear()                      # its fsync ends when this script says
        held.pause()                                 # at the leader's durable end (and in the set)
        sim.net.reset(lead.name, held.name)
        before = lead.store.replica.end
        sim.bodies[-1] = b"-1|not durable on the leader"
        put = asyncio.get_running_loop().create_task(lead.serve_put([Message("SimT", sim.bodies[-1], queue_id=0)]))
        await sim.until(lambda: lead.store.replica.end > before, "the leader appended it")
        end = lead.store.replica.end
        await sim.until(lambda: copier.store.replica.confirmed() >= end, "the other follower has it on its disk")
        seen["isr at the failure"] = sorted(lead.node.acks.isr)
        lead.fio.fail("fsync", errno.EIO, SEGMENT_FILES, times=1)
        lead.store.group_commit.step()               # the fsync covering it fails: cut at the durable end
        lead.flush_open.set()
        held.resume()
        slow_until[0] = sim.now() + 0.3
        failed_at, cursor, seen["hw"], seen["held"] = sim.now(), 0, 0, []
        while sim.now() < failed_at + 2.0 and not copier.node.leading and copier.node.leader_endpoint == lead.endpoint:
            seen["hw"] = max(seen["hw"], copier.node.read_limit() or 0)
            if not seen["held"] or seen["held"][-1][1] != held.store.replica.end:
                seen["held"].append((round(sim.now() - failed_at, 4), held.store.replica.end))
            g = copier.store.get("c", "SimT", 0, cursor, 64)      # a consumer of that follower
            if g.status is GetStatus.FOUND:
                for msg in g.messages:
                    sim.served[msg.commitlog_offset] = int(bytes(msg.body).split(b"|", 1)[0])
                    cursor = msg.queue_offset + 1
            await asyncio.sleep(0.001)
        seen["served it"] = -1 in sim.served.values()
        seen["answer"] = await put
        seen["before"], seen["end"] = before, end

    sim = GroupSim(3, "SYNC", min_in_sync=1, sync_flush=True, chaos=False, script=script).run()
    assert len(seen["isr at the failure"]) == 2, "the window was reached: both followers in the set"
    assert seen["hw"] <= seen["before"] and not seen["served it"], seen
    st = sim.stats
    assert st.served_then_cut == 0 and st.lost == 0 and st.twice == 0, st
