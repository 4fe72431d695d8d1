"""QueryRoute in a broker group of real processes on a real ZooKeeper (routes.py, node.fresh_view,
forward.py's route): a route names every member the coordinator holds when it answers (a member
that just started is in the leader's next route, with no timer to wait out), and a follower's
leader port answers a route while the leader it follows is gone (killed, an election under way),
naming the live members, instead of UNAVAILABLE (what made the readers given the leader ports fall
back to one endpoint)."""

import grpc

from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.group import Group
from ...support.wait import wait_until
from ...support.zookeeper import zookeeper  # noqa: F401  (fixture)

TOPIC = "Routed"


def route(endpoint: str, ok: bool = True, topic: str = TOPIC) -> tuple[int, set[str], set[str]]:
    """(status code, queue 0's write endpoints, queue 0's read-only members' endpoints); ``ok``: the
    status must be OK (its message in the failure)."""
    with grpc.insecure_channel(endpoint) as ch:
        r = sgrpc.MessagingServiceStub(ch).QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic)),
                                                      timeout=30)
    assert not ok or r.status.code == Code.OK, (endpoint, r.status.code, r.status.message)
    write, read = set(), set()
    for q in r.message_queues:
        if q.id == 0:
            addrs = {f"{a.host}:{a.port}" for a in q.broker.endpoints.addresses}
            (write if q.permission == pb.Permission.READ_WRITE else read).update(addrs)
    return r.status.code, write, read


def test_a_started_member_is_in_the_next_route_and_a_followers_leader_port_routes_while_its_leader_is_gone(
        tmp_path, zookeeper):  # noqa: F811
    g = Group(str(tmp_path), 3, coordinator=zookeeper, mode="ASYNC")
    lp = [f"127.0.0.1:{p}" for p in g.leader_ports]
    try:
        g.start(0)
        assert g.wait_leader() == 0
        # auto-created by the leader's service at once: a member says "leader" only once that service is in
        # place (node.installing; before, its follower's answered TOPIC_NOT_FOUND a moment after it said so)
        assert route(g.endpoint(0))[0] == Code.OK
        for i in (1, 2):
            g.start(i)                                       # registered before it says it is ready
            code, write, read = route(g.endpoint(0))
            assert code == Code.OK
            assert write == set(lp[:i + 1]), (i, write)
            assert read == {g.endpoint(j) for j in range(1, i + 1)}, (i, read)
        # both followers have the topic (the state copy), then the leader goes
        wait_until(lambda: all(route(g.endpoint(i), ok=False)[0] == Code.OK for i in (1, 2)), "the topic on the followers")
        g.kill(0)
        for i in (1, 2):
            code, write, read = route(lp[i])                 # its leader is dead, or being replaced
            assert code == Code.OK, code
            assert {lp[1], lp[2]} <= write, write
            assert read <= {g.endpoint(j) for j in range(3)} and read & {g.endpoint(1), g.endpoint(2)}, read
    finally:
        g.kill_all()
