"""A policy's source addresses judge a call by its client's address, also when a follower's leader port
forwarded it (protection/forwarded.py, replication/forward.py): real brokers (a leader and a follower,
authentication on), clients reaching the follower's leader port from other loopback addresses (through
a proxy that connects from 127.0.0.2 / 127.0.0.3), and a client that forges the forwarded-for header.
Before, the leader saw the follower's address (127.0.0.1) for every forwarded call: a network allowed
was refused through any follower, one denied was let in."""

import time

import grpc
import pytest

from tidemq.protocol.signing import date_time, signed_metadata
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.brokers import admin_call
from ...support.group import Group, running_group
from ...support.proxy import HoldingProxy
from ...support.wait import PATIENCE_S

AK, SK = "tidemq-ak", "s3cret-sk"
APP, APP_SK = "app", "secret-of-app"


@pytest.fixture
def group(tmp_path):
    env = {"TIDEMQ_ACCESS_KEY": AK, "TIDEMQ_SECRET_KEY": SK}
    with running_group(str(tmp_path), 2, mode="ASYNC", env=env, client={"access_key": AK, "secret_key": SK}) as g:
        yield g


def _send(endpoint: str, topic: str, extra=()) -> int:
    """One SendMessage signed by APP (the send path's pub check); its status code."""
    with grpc.insecure_channel(endpoint) as ch:
        r = sgrpc.MessagingServiceStub(ch).SendMessage(spb.SendMessageRequest(messages=[pb.Message(
            topic=pb.Resource(name=topic), body=b"x", system_properties=pb.SystemProperties(
                message_id=f"0AFWD{time.time_ns()}", message_type=pb.MessageType.NORMAL))]),
            metadata=signed_metadata(APP, APP_SK, date_time(time.time())) + list(extra), timeout=PATIENCE_S)
    return r.status.code


def _route(endpoint: str, topic: str, extra=()) -> int:
    """One QueryRoute signed by APP (the guard's check: pub or sub on the topic); its status code."""
    with grpc.insecure_channel(endpoint) as ch:
        r = sgrpc.MessagingServiceStub(ch).QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic)),
                                                      metadata=signed_metadata(APP, APP_SK, date_time(time.time()))
                                                      + list(extra), timeout=PATIENCE_S)
    return r.status.code


def test_source_addresses_judge_a_forwarded_call_by_its_client(group):
    g = group
    assert g.admin(0, "CreateUser", {"name": APP, "secret_key": APP_SK})["ok"]
    # "near": pub only from 127.0.0.2; "far": pub from anywhere but 127.0.0.3 (deny wins)
    assert g.admin(0, "Grant", {"user": APP, "resource": "topic:near", "actions": ["pub"],
                                "source_ips": ["127.0.0.2/32"]})["ok"]
    assert g.admin(0, "Grant", {"user": APP, "resource": "topic:far", "actions": ["pub"]})["ok"]
    assert g.admin(0, "Grant", {"user": APP, "resource": "topic:far", "actions": ["pub"], "decision": "deny",
                                "source_ips": ["127.0.0.3/32"]})["ok"]
    follower = f"127.0.0.1:{g.leader_ports[1]}"
    assert g.status(1)["role"] == "follower"
    with HoldingProxy(g.leader_ports[1], source="127.0.0.2") as two, \
            HoldingProxy(g.leader_ports[1], source="127.0.0.3") as three:
        # the allowed network, through the follower: allowed (the send path and the guard alike)
        assert _send(two.endpoint, "near") == Code.OK
        assert _route(two.endpoint, "near") == Code.OK
        # the denied network, through the follower: refused
        assert _send(three.endpoint, "far") == Code.FORBIDDEN
        assert _route(three.endpoint, "far") == Code.FORBIDDEN
        # and from 127.0.0.1 (the follower's own address): near refused, far allowed
        assert _send(follower, "near") == Code.FORBIDDEN
        assert _send(follower, "far") == Code.OK

        # a client's own forwarded-for header counts for nothing: to the leader, or through the follower
        forged = [("x-tidemq-forwarded-for", "ipv4:127.0.0.2:1234"), ("x-tidemq-forwarded-sign", "1 00")]
        for ep in (g.endpoint(0), f"127.0.0.1:{g.leader_ports[0]}", follower):
            assert _send(ep, "near", forged) == Code.FORBIDDEN, ep
            assert _route(ep, "near", forged) == Code.FORBIDDEN, ep
        # ... nor does it hide a denied client behind an allowed address
        assert _send(three.endpoint, "far", [("x-tidemq-forwarded-for", "ipv4:127.0.0.1:1")]) == Code.FORBIDDEN
        # an admin change through the follower: audited with its client's address
        r = admin_call(two.endpoint, "Grant", {"user": APP, "resource": "topic:audited", "actions": ["sub"]},
                       keys=(AK, SK))
        assert r["ok"], r

    # the refusal log names the client's address, not the follower's
    g.kill_all()
    log = open(g.procs[0].log_path).read()
    assert "from ipv4:127.0.0.3:" in log and "may not pub on topic 'far'" in log
    assert "audit: tidemq-ak from ipv4:127.0.0.2:" in log and "(forwarded by ipv4:127.0.0.1:" in log


@pytest.mark.parametrize("auth", [True, False])
def test_streams_through_a_follower_are_counted_by_their_clients_connection(tmp_path, auth):
    """The bounds on open streams (protection/streams.py) count a forwarded call on its client's
    connection, not the follower's (else every client of a follower would share one bound): with
    authentication on as the leader verified it, off as the follower says it."""
    from tidemq.protocol.stubs import Code as C

    from .test_streams_e2e import Telemetry, connection
    env = {"TIDEMQ_STREAMS_PER_CONNECTION_MAX": "2"}
    if auth:
        env.update({"TIDEMQ_ACCESS_KEY": AK, "TIDEMQ_SECRET_KEY": SK})
    g = Group(str(tmp_path), 2, mode="ASYNC", env=env, client={"access_key": AK, "secret_key": SK} if auth else {})
    opened, chans = [], []
    try:
        g.start_static()
        follower = f"127.0.0.1:{g.leader_ports[1]}"
        chans += [connection(follower) for _ in range(3)]
        for i, ch in enumerate(chans):                   # three clients, one stream each: 3 > 2, all open
            opened.append(Telemetry(ch, (AK, SK), f"c{i}"))
            assert opened[-1].first == C.OK, i
        opened.append(Telemetry(chans[0], (AK, SK), "c0-b"))
        assert opened[-1].first == C.OK
        third = Telemetry(chans[0], (AK, SK), "c0-c")
        assert third.first == C.TOO_MANY_REQUESTS, "the client's own connection's bound"
    finally:
        for t in opened:
            t.close()
        for ch in chans:
            ch.close()
        g.kill_all()
