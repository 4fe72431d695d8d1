"""`tidemq serve --processes 2` through real processes and the official Python client: the topic's
queues split over the two members, every message sent received exactly once, a member killed with
kill -9 restarted by the parent over its own store (nothing it acknowledged lost), and a SIGTERM to
the parent stopping both members cleanly (no orphan)."""

import collections
import json
import os
import signal

from tidemq.broker.multi import MEMBERS_FILE, member_root, multi_dir
from tidemq.protocol.stubs import pb, sgrpc, spb

from ...support.brokers import SMALL, admin_call, stored
from ...support.official import msg, receive_all
from ...support.wait import wait_until

TOPIC = "Multi"


def members(root) -> list[dict]:
    with open(os.path.join(multi_dir(root), MEMBERS_FILE)) as fh:
        return json.load(fh)["members"]


def route(endpoint: str) -> list[tuple[int, int]]:
    """(queue id, port) of every queue QueryRoute on ``endpoint`` lists."""
    import grpc
    with grpc.insecure_channel(endpoint) as ch:
        r = sgrpc.MessagingServiceStub(ch).QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)),
                                                      timeout=60)
    assert r.status.code == pb.Code.OK, r.status
    return sorted((q.id, q.broker.endpoints.addresses[0].port) for q in r.message_queues)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_two_members_one_cluster_a_killed_member_restarted(broker_factory, clients, tmp_path):
    root = str(tmp_path / "multi")
    parent = broker_factory(root=root, env=SMALL, args=["--port", "0", "--processes", "2"])
    first = members(root)
    assert len(first) == 2
    r = admin_call(parent.endpoint, "CreateTopic", {"name": TOPIC, "queues": 4})
    assert r["ok"] and r["queues"] == 4, r
    ports = [int(m["endpoint"].rsplit(":", 1)[1]) for m in first]
    want_route = [(0, ports[0]), (1, ports[1]), (2, ports[0]), (3, ports[1])]
    assert route(first[0]["endpoint"]) == route(first[1]["endpoint"]) == want_route

    producer, consumer = clients
    p = producer(parent.endpoint, [TOPIC])
    sent = [p.send(msg(TOPIC, f"a{i}".encode())).message_id for i in range(40)]

    os.kill(first[1]["pid"], signal.SIGKILL)             # a member dies: the parent starts it again
    again = wait_until(lambda: (m := members(root))[1]["pid"] != first[1]["pid"] and m,
                       "the parent to restart member 1")
    assert again[1]["endpoint"] == first[1]["endpoint"] and again[0]["pid"] == first[0]["pid"]
    assert route(again[1]["endpoint"]) == want_route     # the restarted member serves (its store recovered)

    sent += [p.send(msg(TOPIC, f"b{i}".encode())).message_id for i in range(40)]
    c = consumer(parent.endpoint, "g", TOPIC)
    got = receive_all(c, len(sent))
    for m in got:
        c.ack(m)
    counts = collections.Counter(m.message_id for m in got)
    assert set(counts) == set(sent) and max(counts.values()) == 1

    assert parent.stop(signal.SIGTERM) == 0              # the parent stops its members and waits for them
    assert not alive(again[0]["pid"]) and not alive(again[1]["pid"])
    parts = [{m.msg_id for m in stored(member_root(root, i), TOPIC)} for i in range(2)]
    assert parts[0] and parts[1] and not parts[0] & parts[1]          # both members took sends
    assert parts[0] | parts[1] == set(sent)
