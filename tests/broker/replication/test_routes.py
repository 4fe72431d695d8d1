"""broker/replication/routes.py: QueryRoute's queues in a broker group: per queue one master queue
(broker id 0, READ_WRITE) whose endpoints are every member's leader port (else the leader, else the
broker itself), then one READ queue per follower (ids 1, 2, ... in endpoint order)."""

from tidemq.broker.replication import routes
from tidemq.protocol.stubs import pb

TOPIC = pb.Resource(name="T")
VIEW = {"group": "g", "leader": "127.0.0.1:8081",
        "members": {"g-0": {"endpoint": "127.0.0.1:8081", "leader_endpoint": "127.0.0.1:9081"},
                    "g-2": {"endpoint": "127.0.0.1:8281", "leader_endpoint": "127.0.0.1:9281"},
                    "g-1": {"endpoint": "127.0.0.1:8181", "leader_endpoint": "127.0.0.1:9181"}}}


def addresses(broker):
    return [f"{a.host}:{a.port}" for a in broker.endpoints.addresses]


def test_endpoints_split_host_and_port():
    e = routes.endpoints(["10.0.0.1:81", "::1:9000"])
    assert e.scheme == pb.AddressScheme.IPv4
    assert [(a.host, a.port) for a in e.addresses] == [("10.0.0.1", 81), ("::1", 9000)]


def test_the_write_endpoints_are_every_members_leader_port():
    assert routes.leader_addresses(VIEW, "fallback:1") == ["127.0.0.1:9081", "127.0.0.1:9181", "127.0.0.1:9281"]


def test_without_leader_ports_the_leader_then_the_broker_itself():
    members = {k: {"endpoint": v["endpoint"]} for k, v in VIEW["members"].items()}
    assert routes.leader_addresses({**VIEW, "members": members}, "127.0.0.1:1") == ["127.0.0.1:8081"]
    assert routes.leader_addresses({}, "127.0.0.1:1") == ["127.0.0.1:1"]
    assert routes.leader_broker({}, "127.0.0.1:1").name == "tidemq"


def test_followers_are_read_only_brokers_numbered_from_one():
    fs = routes.follower_brokers(VIEW)
    assert [(b.name, b.id, addresses(b)) for b in fs] == [("g", 1, ["127.0.0.1:8181"]), ("g", 2, ["127.0.0.1:8281"])]
    assert routes.follower_brokers({"group": "g", "leader": "a:1", "members": {"m": {"endpoint": "a:1"}}}) == []


def test_group_queues_lists_each_queue_master_first_then_its_followers():
    qs = routes.group_queues(TOPIC, 2, VIEW, "fallback:1")
    assert [(q.id, q.permission, q.broker.id) for q in qs] == [
        (0, pb.Permission.READ_WRITE, 0), (0, pb.Permission.READ, 1), (0, pb.Permission.READ, 2),
        (1, pb.Permission.READ_WRITE, 0), (1, pb.Permission.READ, 1), (1, pb.Permission.READ, 2)]
    assert all(q.topic.name == "T" and list(q.accept_message_types) == routes.TYPES for q in qs)
    assert addresses(qs[0].broker) == routes.leader_addresses(VIEW, "fallback:1")


def test_group_queues_of_the_queues_a_group_owns():
    qs = routes.group_queues(TOPIC, 8, {"group": "b", "leader": "h:1"}, "h:1", queue_ids=[5, 7])
    assert [(q.id, q.broker.name, addresses(q.broker)) for q in qs] == [(5, "b", ["h:1"]), (7, "b", ["h:1"])]


def test_no_member_is_named_writable_while_the_group_has_no_write_endpoint():
    """No leader known and no leader ports (an election, leader ports off): no master queue at all
    (RocketMQ's route has no broker id 0 then), never the answering follower's own endpoint; its
    members are still listed, read only."""
    members = {k: {"endpoint": v["endpoint"]} for k, v in VIEW["members"].items()}
    qs = routes.group_queues(TOPIC, 1, {"group": "g", "leader": "", "members": members}, "127.0.0.1:8181")
    assert [(q.permission, q.broker.id, addresses(q.broker)) for q in qs] == [
        (pb.Permission.READ, 1, ["127.0.0.1:8081"]), (pb.Permission.READ, 2, ["127.0.0.1:8181"]),
        (pb.Permission.READ, 3, ["127.0.0.1:8281"])]
    # with leader ports, they are the write endpoint whoever leads (each forwards to the leader)
    qs = routes.group_queues(TOPIC, 1, {**VIEW, "leader": ""}, "127.0.0.1:8181")
    assert (qs[0].permission, addresses(qs[0].broker)) == (pb.Permission.READ_WRITE, routes.leader_addresses(VIEW, ""))
    assert len(qs) == 4


def test_a_route_waits_for_the_members_as_long_as_its_client_does():
    from tidemq.broker.replication.routes import VIEW_WAIT_S, VIEW_WAIT_S_MAX, view_wait_s
    assert view_wait_s(None) == VIEW_WAIT_S                  # no deadline: the default wait
    assert view_wait_s(30.0) == 30.0 - 0.25                  # a busy coordinator is waited out ...
    assert view_wait_s(3.0) == 2.75                          # ... while the client still waits for the answer
    assert view_wait_s(3600.0) == VIEW_WAIT_S_MAX
    assert 0 < view_wait_s(0.1) <= 0.1 and 0 < view_wait_s(-1.0)
