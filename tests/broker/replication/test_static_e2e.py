"""Broker groups without a coordinator, real processes on loopback: the follower's copy is
byte-identical and serves reads while refusing writes with the leader's name; SYNC puts wait for
the follower (FLUSH_SLAVE_TIMEOUT when it is stopped, SLAVE_NOT_AVAILABLE when it is gone, and a
resend of the timed-out message is never stored twice); a follower stopped with SIGSTOP catches
up without a gap; after a manual failover the old leader's diverged tail (ASYNC writes the
follower never had: exactly the lag reported at the kill) is cut and never served.

The SIGSTOP test counts on no timing: what the stopped follower's socket had buffered it takes
after SIGCONT, and it catches up on the rest either way.

A feature across modules, kept whole: it tests broker/replication/node.py (roles, promotion by
hand), follower.py (the copy, the cut of a diverged tail), leader.py and acks.py (SYNC waits),
store/replica.py and store/epochs.py, with routes.py and forward.py (the leader ports)."""

import os
import signal
import subprocess
import sys
import threading

import pytest

from tidemq.client import Producer, PullConsumer
from tidemq.protocol.stubs import Code

from ...support.brokers import REPO, admin_call
from ...support.group import Group
from ...support.wait import wait_until
from .test_routes_e2e import route as routed


def _segments(root):
    d = os.path.join(root, "commitlog")
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d)) if n.isdigit()}


def _caught_up(g, leader, follower):
    """The follower has the leader's whole log, and the leader knows it (its ACK arrived)."""
    s = g.status(follower)
    return s is not None and s["log_end"] == g.status(leader)["log_end"] and s["replica"]["connected"] \
        and g.in_sync(leader, follower)


@pytest.fixture
def group(tmp_path):
    made = []

    def make(mode="ASYNC", env=None, leader_ports=True):
        g = Group(str(tmp_path), 2, mode=mode, env=env, leader_ports=leader_ports)
        made.append(g)
        g.start_static()
        return g
    yield make
    for g in made:
        for i in range(g.n):         # a SIGSTOPped broker must be continued to die cleanly
            if g.alive(i):
                g.signal(i, signal.SIGCONT)
        g.kill_all()


def test_follower_copy_is_byte_identical_serves_reads_refuses_writes(group):
    g = group()
    with Producer(g.endpoint(0)) as p:
        sent = [b"m%05d" % i + b"x" * 2000 for i in range(3000)]      # ~6 MiB: segments of 4 MiB roll
        for i in range(0, len(sent), 500):
            assert all(r.ok for r in p.send_batch("T", sent[i:i + 500], keys=None))
    wait_until(lambda: _caught_up(g, 0, 1), "the follower caught up")
    assert sorted(g.read_topic(1, "T")) == sorted(sent)
    with Producer(g.endpoint(1)) as p:
        r = p.send_batch("T", [b"refused"])[0]
    assert r.code == Code.FORBIDDEN and g.endpoint(0) in r.error
    assert "leader is" in admin_call(g.endpoint(1), "CreateTopic", {"name": "U"})["error"]
    with PullConsumer(g.endpoint(1)) as c:
        assert c.queue_count("T") == 8            # the route lists each queue once per member: counted once
    g.stop_all()
    a, b = _segments(g.root(0)), _segments(g.root(1))
    assert list(a) == list(b) and len(a) >= 2 and a == b
    g.start_static()                              # a restart keeps the roles and the epoch
    assert g.status(0)["epochs"] == g.status(1)["epochs"] == [[1, 0]]
    with Producer(g.endpoint(0)) as p:
        assert p.send_batch("T", [b"after restart"])[0].ok


def test_sync_waits_for_the_follower(group):
    # the follower stays in the in-sync set however long it is stopped here (replica_lag_time_max_ms)
    g = group("SYNC", env={"TIDEMQ_REPLICATION_TIMEOUT_MS": "300", "TIDEMQ_REPLICA_LAG_TIME_MAX_MS": "600000"})
    with Producer(g.endpoint(0), timeout_s=60) as p:
        assert all(r.ok for r in p.send_batch("T", [b"a%d" % i for i in range(20)]))
        g.signal(1, signal.SIGSTOP)
        r = p.send_batch("T", [b"while-stopped"])[0]
        assert r.code == Code.SLAVE_PERSISTENCE_TIMEOUT and "replication_timeout_ms" in r.error
        # a resend (SendRecords, same id) is appended again neither now nor once confirmed
        again = p.send_batch("T", [b"while-stopped", b"new"], message_ids=[r.message_id, "fresh-1"])
        assert again[0].code == Code.SLAVE_PERSISTENCE_TIMEOUT and "not yet confirmed" in again[0].error
        g.signal(1, signal.SIGCONT)
        wait_until(lambda: _caught_up(g, 0, 1), "the follower caught up")
        confirmed = p.send_batch("T", [b"while-stopped"], message_ids=[r.message_id])[0]
        assert confirmed.ok and confirmed.duplicate
    assert g.read_topic(0, "T").count(b"while-stopped") == 1


def test_sync_sends_from_many_threads_each_wait_for_the_follower_and_it_stays_in_sync_idle(group):
    """SYNC puts awaited on the leader's event loop (broker/puts.py): 8 producers' sends, each
    answered OK only with the follower holding it; then idle for many heartbeat intervals (the
    follower answers a HEARTBEAT unless an ACK moved its offset since the last one): it never left
    the in-sync set."""
    import threading
    g = group("SYNC", env={"TIDEMQ_REPLICA_LAG_TIME_MAX_MS": "1500"})     # a HEARTBEAT every 0.375 s idle
    bodies = [[b"t%d-%d" % (t, i) for i in range(40)] for t in range(8)]
    oks, errors = [], []

    def send(t):
        try:
            with Producer(g.endpoint(0), timeout_s=60) as p:
                for i in range(0, 40, 4):
                    before = g.status(0)["log_end"]
                    rs = p.send_batch("T", bodies[t][i:i + 4])
                    # OK only once the follower has it: its log then ends past where the leader's did
                    oks.append(all(r.ok for r in rs) and g.status(1)["log_end"] > before)
        except Exception as e:  # noqa: BLE001 - said below
            errors.append(e)
    threads = [threading.Thread(target=send, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and oks == [True] * 80
    after = g.status(1)["replica"]
    wait_until(lambda: g.status(1)["replica"]["heartbeats"] >= after["heartbeats"] + 12,
               "12 heartbeats (3 x replica_lag_time_max_ms) with nothing written")
    leader = g.status(0)
    f = next(f for f in leader["followers"] if f["member"] == "g-1")
    assert f["in_sync"] and f["left_isr"] == 0 and f["lag_bytes"] == 0
    assert g.status(1)["replica"]["acks_sent"] > after["acks_sent"], "idle heartbeats answered"
    assert sorted(g.read_topic(1, "T")) == sorted(b for bs in bodies for b in bs)


def test_a_follower_gone_leaves_the_in_sync_set_then_writes_are_refused_unwritten(group):
    g = group("SYNC", env={"TIDEMQ_REPLICA_LAG_TIME_MAX_MS": "500"})
    with Producer(g.endpoint(0), timeout_s=60) as p:
        assert all(r.ok for r in p.send_batch("T", [b"a%d" % i for i in range(20)]))
        g.kill(1)
        # no confirmation of the leader's end for replica_lag_time_max_ms: out of the set (before that a
        # put is appended and waits); then a put is refused before anything is written
        wait_until(lambda: g.status(0)["in_sync"] == ["g-0"], "the follower out of the in-sync set")
        r = p.send_batch("T", [b"no-follower"])[0]
        assert r.code == Code.HA_NOT_AVAILABLE and "in_sync_replicas_min" in r.error
        g.start(1, leader=0)
        wait_until(lambda: p.send_batch("T", [b"back"])[0].ok, "a SYNC write accepted again")
    bodies = g.read_topic(0, "T")
    assert b"no-follower" not in bodies and b"back" in bodies


def test_resend_of_an_unconfirmed_put_is_not_stored_twice(group, clients):
    """The official client resends a message answered SLAVE_PERSISTENCE_TIMEOUT with the same id. (No
    leader ports: the route names the leader itself, never the stopped follower's forwarding port.)"""
    from ...support.official import msg
    g = group("SYNC", env={"TIDEMQ_REPLICATION_TIMEOUT_MS": "300"}, leader_ports=False)
    producer, _ = clients
    p = producer(g.endpoint(0), ["T"])

    def warm() -> bool:
        """A send the follower confirms within the short timeout (on a busy machine one may not be)."""
        try:
            p.send(msg("T", b"warm"))
            return True
        except Exception:  # noqa: BLE001 - not confirmed in time: stored once, try another
            return False
    wait_until(warm, "a send confirmed by the running follower")
    g.signal(1, signal.SIGSTOP)
    with pytest.raises(Exception):
        p.send(msg("T", b"once"))                  # 3 attempts, each answered "not confirmed"
    g.signal(1, signal.SIGCONT)
    wait_until(lambda: _caught_up(g, 0, 1), "the follower caught up")
    assert g.read_topic(0, "T").count(b"once") == 1


def test_stopped_follower_catches_up_without_a_gap(group):
    g = group()
    with Producer(g.endpoint(0)) as p:
        p.send_batch("T", [b"before%d" % i for i in range(100)])
        wait_until(lambda: _caught_up(g, 0, 1), "the follower caught up")
        g.signal(1, signal.SIGSTOP)
        for k in range(20):
            assert all(r.ok for r in p.send_batch("T", [b"during%d-%d" % (k, i) for i in range(100)]))
        lag = next(f["lag_bytes"] for f in g.status(0)["followers"])
        assert lag > 0
        g.signal(1, signal.SIGCONT)
    wait_until(lambda: _caught_up(g, 0, 1), "the follower caught up after SIGCONT")
    assert sorted(g.read_topic(1, "T")) == sorted(g.read_topic(0, "T"))
    assert len(g.read_topic(1, "T")) == 2100


def test_diverged_old_leader_is_cut_and_never_serves_the_diverged_records(group):
    g = group()
    with Producer(g.endpoint(0)) as p:
        assert all(r.ok for r in p.send_batch("T", [b"agreed%d" % i for i in range(200)]))
        wait_until(lambda: _caught_up(g, 0, 1), "the follower caught up")
        g.kill(1)                  # (a stopped follower would still take what its socket buffered)
        diverged = p.send_batch("T", [b"diverged%d" % i for i in range(50)], keys=[["dk"]] * 50)
        assert all(r.ok for r in diverged)             # ASYNC: acknowledged after the local write
    lag_at_kill = next(f["lag_bytes"] for f in g.status(0)["followers"])
    g.kill(0)
    g.start(1, leader=0)                              # back, its leader gone: promoted by hand
    promote = subprocess.run([sys.executable, "-m", "tidemq.cli.main", "replication", "promote", "--endpoint",
                              g.endpoint(1)], capture_output=True, text=True, cwd=REPO, timeout=120,
                             env={**os.environ, "TIDEMQ_METRICS_PORT": "0"})
    assert promote.returncode == 0 and "epoch 2" in promote.stdout, promote.stderr
    end_at_promotion = g.status(1)["log_end"]
    with Producer(g.endpoint(1)) as p:
        assert all(r.ok for r in p.send_batch("T", [b"new%d" % i for i in range(30)]))
    g.start(0, leader=1)                              # the old leader comes back as a follower
    wait_until(lambda: _caught_up(g, 1, 0), "the old leader caught up with the new one")
    old = g.status(0)
    assert old["replica"]["truncated_bytes"] == lag_at_kill       # the ASYNC loss is the lag at the kill
    assert old["epochs"] == [[1, 0], [2, end_at_promotion]]
    bodies = g.read_topic(0, "T")
    assert not any(b.startswith(b"diverged") for b in bodies)
    assert sorted(bodies) == sorted(g.read_topic(1, "T")) and len(bodies) == 230
    assert admin_call(g.endpoint(0), "Query", {"topic": "T", "key": "dk"})["messages"] == []
    g.stop_all()
    assert _segments(g.root(0)) == _segments(g.root(1))


def test_lag_in_status_metrics_and_page(tmp_path):
    import urllib.request

    from ...support.brokers import free_port
    g = Group(str(tmp_path), 2, mode="ASYNC")
    metrics = free_port()
    try:
        g.start_static(leader_env={"TIDEMQ_METRICS_PORT": str(metrics)})
        with Producer(g.endpoint(0)) as p:
            p.send_batch("T", [b"x" * 100] * 10)
        g.signal(1, signal.SIGSTOP)
        try:
            with Producer(g.endpoint(0)) as p:
                p.send_batch("T", [b"y" * 100] * 10)
            text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=60).read().decode()
            lag = [line for line in text.splitlines() if line.startswith('tidemq_replication_lag_bytes{group="g",member="g-1"}')]
            assert lag and float(lag[0].split()[-1]) > 0
            assert 'tidemq_replication_leader{group="g"} 1.0' in text
            page = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/", timeout=60).read().decode()
            assert 'id="replication"' in page and "g-1" in page
            out = subprocess.run([sys.executable, "-m", "tidemq.cli.main", "status", "--endpoint", g.endpoint(0)],
                                 capture_output=True, text=True, cwd=REPO, timeout=120,
                                 env={**os.environ, "TIDEMQ_METRICS_PORT": "0", "COLUMNS": "200"})
            assert "broker group g: g-0 is leader" in out.stdout and "g-1" in out.stdout, out.stdout
        finally:
            g.signal(1, signal.SIGCONT)
    finally:
        g.kill_all()


def test_a_followers_route_names_a_follower_that_joined_after_it(tmp_path):
    """No coordinator: a follower takes its leader's view of the group when its copy starts, and again
    when a route is asked of it (node.fresh_view), so a follower that joined later is in its route
    (a read-only broker, and its leader port among the write endpoints), as in the leader's."""
    def route(endpoint):
        return routed(endpoint, ok=False, topic="T")

    g = Group(str(tmp_path), 3, mode="ASYNC")
    try:
        g.start_static([1])
        with Producer(g.endpoint(0)) as p:                  # the topic, on the followers too
            assert p.send_batch("T", [b"x"])[0].ok
        g.start(2, leader=0)                                # joins after 1 took the leader's view
        g.wait_in_sync(0, [1, 2])
        lp = {f"127.0.0.1:{p}" for p in g.leader_ports}
        followers = {g.endpoint(1), g.endpoint(2)}
        assert route(g.endpoint(0)) == (Code.OK, lp, followers)
        wait_until(lambda: route(g.endpoint(1))[0] == Code.OK, "the topic on follower 1 (its state copy)")
        assert route(g.endpoint(1)) == (Code.OK, lp, followers)
    finally:
        g.kill_all()


def test_a_follower_never_serves_what_its_leaders_failed_fsync_cuts(tmp_path):
    """SYNC + SYNC_FLUSH: the follower may have a record (and confirm it) before the leader's own
    fdatasync of it ends; if that fdatasync fails, the leader cuts its log there and -- a static
    group's leader -- leads a new epoch from the cut, and the follower cuts what it has after it. So
    the high watermark the follower serves up to counts the leader's own durable end (acks.py): the
    record is not served while the leader's fdatasync is held (the shim's gate), and after the
    failure nothing that was served is gone. (With the high watermark of the followers' confirmations
    only, the held record was served, then cut.)"""
    from ...store.test_log_failure_e2e import build_shim
    so = build_shim(tmp_path)
    fail, hold = tmp_path / "fail-the-next-fdatasync", tmp_path / "hold-it"
    g = Group(str(tmp_path), 2, mode="SYNC", env={"TIDEMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH",
                                                  "TIDEMQ_SYNC_FLUSH_TIMEOUT_MS": "600000",
                                                  "TIDEMQ_REPLICATION_TIMEOUT_MS": "600000",
                                                  "TIDEMQ_REPLICA_LAG_TIME_MAX_MS": "600000"})
    try:
        logs = [tmp_path / "leader-log-a", tmp_path / "leader-log-b"]       # the log goes on in the other
        g.start_static(leader_env={"LD_PRELOAD": so, "FSYNC_SHIM_FAIL_FILE": str(fail),
                                   "FSYNC_SHIM_HOLD_FILE": str(hold), "FSYNC_SHIM_MATCH": "/leader-log-",
                                   "TIDEMQ_COMMITLOG_DIRS": ",".join(map(str, logs))})
        before = [b"before%d" % i for i in range(20)]
        with Producer(g.endpoint(0), timeout_s=600) as p:
            assert all(r.ok for r in p.send_batch("T", before))
            wait_until(lambda: g.status(1)["high_watermark"] == g.status(0)["log_end"], "the follower serves all")
            assert sorted(g.read_topic(1, "T")) == sorted(before)
            hold.touch()
            fail.touch()                                  # the leader's next fdatasync waits, then fails
            answer = []
            sender = threading.Thread(target=lambda: answer.extend(p.send_batch("T", [b"held"])))
            sender.start()

            def follower_has_it():
                lead = g.status(0)
                return lead["followers"][0]["confirmed_offset"] == lead["log_end"] and not fail.exists()
            wait_until(follower_has_it, "the follower confirmed the held record, the leader's fdatasync waiting")
            lead = g.status(0)
            assert lead["high_watermark"] < lead["log_end"], lead        # not past the leader's own durable end
            assert g.status(1)["high_watermark"] <= lead["high_watermark"]
            served = g.read_topic(1, "T")
            assert b"held" not in served and sorted(served) == sorted(before)
            hold.unlink()                                 # the fdatasync fails: the cut, a new epoch
            sender.join(600)
            assert answer                                  # (stored again by the broker's resend, or refused)
            wait_until(lambda: g.status(0)["epoch"] == 2 and _caught_up(g, 0, 1), "the follower on the new epoch")
            after = p.send_batch("T", [b"after"])[0]
            assert after.ok
        wait_until(lambda: g.status(1)["high_watermark"] == g.status(0)["log_end"], "the follower serves all")
        on_follower = g.read_topic(1, "T")
        assert set(served) <= set(on_follower) and b"after" in on_follower
        assert (b"held" in on_follower) == answer[0].ok, answer[0]
        assert sorted(on_follower) == sorted(g.read_topic(0, "T"))
    finally:
        hold.unlink(missing_ok=True)
        g.kill_all()


def test_a_send_forwarded_past_its_cap_while_the_leader_waits_for_a_stopped_follower_is_stored_once(tmp_path):
    """A SYNC leader waits for a follower of its in-sync set that was stopped (SIGSTOP, not yet out of
    the set: replica_lag_time_max_ms); a client sending through another member's leader port is cut
    at leader_port_forward_timeout_ms (UNAVAILABLE), and gRPC cancels the leader's handler, while the
    message is in the leader's log. The client sends it again with the same id, as the official
    clients do at once: each resend is answered from the log (not confirmed yet), never appended
    again -- the leader began on an empty log, so it looks nothing up in its index -- and once the
    follower runs again, the message is there once and a last resend is answered with its offset."""
    import grpc

    from tidemq.protocol.stubs import pb, spb

    g = Group(str(tmp_path), 3, mode="SYNC", env={"TIDEMQ_REPLICA_LAG_TIME_MAX_MS": "60000",
                                                   "TIDEMQ_REPLICATION_TIMEOUT_MS": "120000",
                                                   "TIDEMQ_LEADER_PORT_FORWARD_TIMEOUT_MS": "1000"})
    try:
        g.start_static()
        sp = pb.SystemProperties(message_id="forwarded-1", message_type=pb.MessageType.NORMAL, born_host="127.0.0.1")
        sp.born_timestamp.seconds = 1_700_000_000
        request = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="T"), body=b"the-one",
                                                              system_properties=sp)])
        with grpc.insecure_channel(f"127.0.0.1:{g.leader_ports[1]}") as ch:
            send = ch.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage",
                                  request_serializer=spb.SendMessageRequest.SerializeToString,
                                  response_deserializer=spb.SendMessageResponse.FromString)

            def answered_ok() -> bool:
                try:
                    return send(request, timeout=60).entries[0].status.code == Code.OK
                except grpc.RpcError:
                    return False                                      # (a busy machine: past the forward cap)
            wait_until(answered_ok, "the first message stored (the topic made)")
            g.signal(2, signal.SIGSTOP)
            request.messages[0].system_properties.message_id = "forwarded-2"
            answers = []
            for _ in range(3):                                        # the official client's attempts
                try:
                    answers.append(send(request, timeout=60).entries[0].status.code)
                except grpc.RpcError as e:
                    answers.append(e.code())
            g.signal(2, signal.SIGCONT)
            g.wait_in_sync(0, [1, 2])
            wait_until(answered_ok, "the resent message answered OK once the follower has it")
        assert answers[0] == grpc.StatusCode.UNAVAILABLE, answers       # cut by the forwarding member
        assert all(a in (grpc.StatusCode.UNAVAILABLE, Code.SLAVE_PERSISTENCE_TIMEOUT) for a in answers[1:]), answers
        assert g.read_topic(0, "T").count(b"the-one") == 2, "the first message and the resent one, once each"
    finally:
        for i in range(3):
            if g.alive(i):
                g.signal(i, signal.SIGCONT)
        g.kill_all()
