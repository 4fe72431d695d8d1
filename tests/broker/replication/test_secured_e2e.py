"""A broker group with authentication and TLS on (client certificates required), real processes on
loopback: the follower of a secured leader replicates (its channel signed with its own keys, over TLS
with its certificate); the leader port refuses unsigned calls, on the leader and through a follower's
forwarding; users and ACLs reach the follower with the state, and after the leader is killed and the
follower promoted, the new leader enforces the same policies; a member with wrong keys is refused,
and both sides say so in one line.

A feature across modules, kept whole: broker/protection (access, members, acl), replication/follower.py
and forward.py (the channels), replication/state.py (the copy of users and ACLs), server.py (the
leader port behind the guard, TLS with client CAs)."""

import time

import grpc
import pytest

from tidemq.client import ClientError, Producer
from tidemq.client.settings import TlsOptions
from tidemq.protocol.signing import date_time, signed_metadata
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.auth import make_ca_and_certificates
from ...support.group import Group
from ...support.wait import wait_until

AK, SK = "tidemq-ak", "s3cret-sk"


@pytest.fixture
def secured(tmp_path):
    certs_dir = tmp_path / "certs"
    certs_dir.mkdir()
    certs = make_ca_and_certificates(str(certs_dir))
    ca, _ = certs["ca"]
    cert, key = certs["member"]
    ccert, ckey = certs["client"]
    read = lambda p: open(p, "rb").read()  # noqa: E731
    tls = TlsOptions(read(ca), read(ccert), read(ckey))
    env = {"TIDEMQ_ACCESS_KEY": AK, "TIDEMQ_SECRET_KEY": SK, "TIDEMQ_TLS_CERT_FILE": cert, "TIDEMQ_TLS_KEY_FILE": key,
           "TIDEMQ_TLS_CA_FILE": ca, "TIDEMQ_TLS_CLIENT_CA_FILE": ca, "TIDEMQ_REPLICATION_STATE_INTERVAL_MS": "100"}
    g = Group(str(tmp_path), 3, mode="ASYNC", env=env, client={"access_key": AK, "secret_key": SK, "tls": tls})
    yield g, tls
    g.kill_all()


def _caught_up(g, leader, follower):
    s = g.status(follower)
    return s is not None and s["log_end"] == g.status(leader)["log_end"] and s["replica"]["connected"]


def test_a_secured_group(secured):
    g, tls = secured
    g.start_static([1])                    # the follower's signed, TLS channel: connected and in sync
    with Producer(g.endpoint(0), access_key=AK, secret_key=SK, tls=tls) as p:
        sent = [b"m%04d" % i for i in range(200)]
        assert p.send_batch("T", sent).all_ok()
    wait_until(lambda: _caught_up(g, 0, 1), "the follower caught up")
    # (the topic's queues reach the follower with its copy of the state, the messages with the log)
    wait_until(lambda: sorted(g.read_topic(1, "T")) == sorted(sent) or None,
               "a follower of a secured leader replicates: every message readable there")

    # the leader port: unsigned calls refused on the leader's and through the follower's forwarding
    route = spb.QueryRouteRequest(topic=pb.Resource(name="T"))
    signed = signed_metadata(AK, SK, date_time(time.time()))
    for i in (0, 1):
        with grpc.secure_channel(f"127.0.0.1:{g.leader_ports[i]}", tls.credentials()) as ch:
            stub = sgrpc.MessagingServiceStub(ch)
            r = stub.QueryRoute(route, timeout=60)
            assert r.status.code == Code.UNAUTHORIZED, (i, r.status)
            assert stub.QueryRoute(route, metadata=signed, timeout=60).status.code == Code.OK, i
            r = list(stub.PullMessage(spb.PullMessageRequest(message_queue=pb.MessageQueue(topic=pb.Resource(
                name="T"), id=0)), timeout=60))
            assert r[0].status.code == Code.UNAUTHORIZED, i
        with grpc.insecure_channel(f"127.0.0.1:{g.leader_ports[i]}") as ch:       # plaintext: no answer
            with pytest.raises(grpc.RpcError):
                sgrpc.MessagingServiceStub(ch).QueryRoute(route, metadata=signed, timeout=5)

    # users and ACLs: made on the leader, copied to the follower with the state
    assert g.admin(0, "CreateUser", {"name": "app-a", "secret_key": "secret-of-app-a"})["ok"]
    assert g.admin(0, "Grant", {"user": "app-a", "resource": "topic:orders*", "actions": ["pub"]})["ok"]
    refused = g.admin(1, "CreateUser", {"name": "app-b", "secret_key": "secret-of-app-b"})
    assert (refused["ok"], refused["code"]) == (False, "NOT_LEADER"), "users are the leader's"
    wait_until(lambda: any(u["name"] == "app-a" for u in g.admin(1, "ListUsers")["users"]) or None,
               "the follower's copy of the users")
    wait_until(lambda: g.admin(1, "ListAcl", {"user": "app-a"})["policies"]["app-a"] or None,
               "the follower's copy of the policies")

    # the leader killed, the follower promoted: the same policies, enforced by the new leader
    g.kill(0)
    assert g.admin(1, "Promote")["ok"]
    g.wait_leader(exclude={0})
    with Producer(g.endpoint(1), access_key="app-a", secret_key="secret-of-app-a", tls=tls) as p:
        wait_until(lambda: p.send_batch("orders-1", [b"x"]).all_ok() or None, "app-a sends on the new leader")
        r = p.send_batch("junk", [b"x"])
        assert [x.code for x in r] == [Code.FORBIDDEN] and "'app-a' may not pub on topic 'junk'" in r[0].error
    with Producer(g.endpoint(1), access_key="app-a", secret_key="wrong-secret", tls=tls) as p:
        with pytest.raises(ClientError, match="UNAUTHORIZED"):
            p.send_batch("orders-1", [b"x"])

    # a member with wrong keys: refused by the leader, and it says so, once, plainly
    g.start(2, leader=1, env={"TIDEMQ_SECRET_KEY": "not-the-groups"})
    log = g.procs[2].log_path
    wait_until(lambda: "the leader refused our signature" in open(log).read() or None,
               "the member with wrong keys says why it is refused")
    text = open(log).read()
    assert text.count("refused our signature") == 1, "once per cause, not per retry"
    leader_log = open(g.procs[1].log_path).read()
    assert "refused /tidemq.Replication/" in leader_log and "access key 'tidemq-ak'" in leader_log
