"""A member added, then one removed, while a client sends (day-2 operations), through real processes
on a real ZooKeeper, SYNC replication: a sender of a bounded count sends one message a call to the
leader, sending the same message id again after any answer but OK (an error, a timeout, a refusal:
what a client does); meanwhile a fourth member is started (it registers with the coordinator, copies
the log and joins the in-sync set) and then a follower of the first three is stopped (it leaves the
set once it is behind), by SIGTERM or kill -9. Counted on every member left: an acknowledged message missing (lost) or
stored twice -- both must be 0 -- and each member's copy is the leader's."""

import threading

import grpc
import pytest

from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.group import Group
from ...support.zookeeper import zookeeper  # noqa: F401  (fixture)

N = 600                   # messages sent
ADD_AT, REMOVE_AT = 150, 350   # acknowledged so far when the member is added, when one is removed
TRIES_MAX = 2400          # sends of one message id at most (each answer but OK: sent again after BACKOFF_S)
BACKOFF_S = 0.05          # (a client's back-off between two sends of one id, not a bound of the test)


def send(stub, mid: str) -> int:
    m = pb.Message(topic=pb.Resource(name="T"), body=mid.encode(),
                   system_properties=pb.SystemProperties(message_id=mid, message_type=pb.MessageType.NORMAL))
    try:
        r = stub.SendMessage(spb.SendMessageRequest(messages=[m]), timeout=30)
    except grpc.RpcError as e:
        return -int(e.code().value[0])
    return r.entries[0].status.code if r.entries else r.status.code


@pytest.mark.parametrize("removal", ["stop", "kill", "kill-leader"])
def test_a_member_added_then_one_removed_while_sending_loses_nothing_and_stores_nothing_twice(tmp_path, zookeeper,  # noqa: F811
                                                                                               removal):
    g = Group(str(tmp_path), 4, coordinator=zookeeper, mode="SYNC",
              env={"TIDEMQ_REPLICATION_TIMEOUT_MS": "20000", "TIDEMQ_REPLICA_LAG_TIME_MAX_MS": "2000"})
    acked: list[str] = []
    answers: dict[int, int] = {}
    gave_up: list[str] = []
    reached = {ADD_AT: threading.Event(), REMOVE_AT: threading.Event()}
    go_on = {ADD_AT: threading.Event(), REMOVE_AT: threading.Event()}
    try:
        for i in range(3):
            g.start(i)
        leader = g.wait_leader()
        others = [i for i in range(3) if i != leader]
        g.wait_in_sync(leader, others)

        def sender():
            at = leader
            pause = threading.Event()                   # (never set: a back-off)
            ch = grpc.insecure_channel(g.endpoint(at))
            try:
                for k in range(N):
                    mid = f"M{k:05d}"
                    for _ in range(TRIES_MAX):
                        code = send(sgrpc.MessagingServiceStub(ch), mid)
                        answers[code] = answers.get(code, 0) + 1
                        if code == Code.OK:
                            acked.append(mid)
                            break
                        pause.wait(BACKOFF_S)
                        now = g.leader()                # (the leader gone: the client finds the new one)
                        if now is not None and now != at:
                            ch.close()
                            at, ch = now, grpc.insecure_channel(g.endpoint(now))
                    else:
                        gave_up.append(mid)
                    if len(acked) in reached:           # the change made while the sender waits: mid-stream
                        reached[len(acked)].set()
                        go_on[len(acked)].wait(300)
            finally:
                ch.close()
        t = threading.Thread(target=sender, daemon=True)
        t.start()
        assert reached[ADD_AT].wait(300), "sender reached the add"
        g.start(3)                                                  # added
        go_on[ADD_AT].set()
        g.wait_in_sync(leader, [3])
        assert reached[REMOVE_AT].wait(300), "sender reached the removal"
        gone = leader if removal == "kill-leader" else others[0]
        go_on[REMOVE_AT].set()
        if removal == "stop":
            assert g.procs[gone].stop() == 0                        # removed (while the sender goes on)
        else:
            g.kill(gone)                                            # or lost: kill -9
        t.join(600)
        assert not t.is_alive()
        left = [i for i in range(4) if i != gone]
        if removal == "kill-leader":
            leader = g.wait_leader(exclude={gone})
        g.wait_in_sync(leader, [i for i in left if i != leader])
        assert gave_up == [], (gave_up[:5], answers)
        for i in left:
            bodies = g.read_topic(i, "T")
            counts: dict[bytes, int] = {}
            for b in bodies:
                counts[b] = counts.get(b, 0) + 1
            lost = [m for m in acked if m.encode() not in counts]
            twice = [b for b, n in counts.items() if n > 1]
            print(f"member {i}: {len(bodies)} records, {len(acked)} acknowledged, lost {len(lost)}, "
                  f"twice {len(twice)}; answers {answers}")
            assert (lost, twice) == ([], []), (i, lost[:5], twice[:5], answers)
        assert g.status(leader)["in_sync"] == [f"g-{leader}", *sorted(f"g-{i}" for i in left if i != leader)]
    finally:
        for ev in go_on.values():
            ev.set()
        g.kill_all()
