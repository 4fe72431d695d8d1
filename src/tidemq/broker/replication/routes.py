"""QueryRoute in a broker group: per queue, the group's write endpoint and its followers.

Each queue is listed once as the group's master queue (broker id 0, READ_WRITE), whose endpoints
are every member's leader port when the group has them (``leader_port``): every member serves its
leader port, the leader itself and a follower by forwarding to the leader (forward.py), so gRPC's
pick_first (how the official clients connect to an endpoint list) works with any of them, and
goes on after a failover without a new route. Without leader ports, the
leader's own endpoint; with neither (no leader known: an election under way, leader ports off) no
master queue at all, as RocketMQ's route has no broker id 0 while a group has no master: never a
follower's own endpoint as the writable broker. Then once per follower (broker id 1, 2, ..., READ
only, its own endpoint): producers and pop consumers of the official clients take only master
queues; tidemq.client and the Spark source read from a follower when the leader is down
(docs/broker-protocol.md, 4.12).

Every member answers the same route: the members are the coordinator's, read again when its watch
says they changed (coordinator.py), and a route waits for that read (node.fresh_view) for what is
left of the client's deadline (``view_wait_s``: a busy coordinator or machine is waited out while the
client still waits); a member that cannot read them in time answers ``INCOMPLETE`` instead of a route
missing members.
"""

from __future__ import annotations

from ...protocol.stubs import Code, pb

VIEW_WAIT_S = 2.0            # a route waits this long for the coordinator's members, when its client set no deadline
VIEW_WAIT_S_MAX = 30.0       # ... and never longer than this, whatever its deadline
VIEW_WAIT_MARGIN_S = 0.25    # the answer's way back within the client's deadline
INCOMPLETE = Code.PROXY_TIMEOUT   # the route's status when they could not be (the clients ask again)

TYPES = [pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION,
         pb.MessageType.LITE, pb.MessageType.PRIORITY]      # every type (a topic's own type: its leader's send path)


def view_wait_s(remaining_s: float | None) -> float:
    """How long a route waits for the coordinator's members: what is left of its client's deadline
    (``remaining_s``, None: none set) less the answer's way back, within (0, VIEW_WAIT_S_MAX]."""
    if remaining_s is None:
        return VIEW_WAIT_S
    return min(VIEW_WAIT_S_MAX, max(0.05, remaining_s - VIEW_WAIT_MARGIN_S))


def endpoints(addresses: list[str]) -> "pb.Endpoints":
    out = pb.Endpoints(scheme=pb.AddressScheme.IPv4)
    for a in addresses:
        host, _, port = a.rpartition(":")
        out.addresses.append(pb.Address(host=host, port=int(port)))
    return out


def leader_addresses(view: dict, fallback: str) -> list[str]:
    members = view.get("members") or {}
    ports = sorted({m["leader_endpoint"] for m in members.values() if m.get("leader_endpoint")})
    if ports:
        return ports
    return [view.get("leader") or fallback]


def leader_broker(view: dict, fallback: str) -> "pb.Broker":
    return pb.Broker(name=view.get("group") or "tidemq", id=0, endpoints=endpoints(leader_addresses(view, fallback)))


def follower_brokers(view: dict) -> list["pb.Broker"]:
    members = view.get("members") or {}
    leader = view.get("leader")
    eps = sorted(m["endpoint"] for m in members.values() if m.get("endpoint") and m["endpoint"] != leader)
    return [pb.Broker(name=view.get("group") or "tidemq", id=i + 1, endpoints=endpoints([ep]))
            for i, ep in enumerate(eps)]


def group_queues(topic: "pb.Resource", n: int, view: dict, fallback: str, queue_ids=None) -> list:
    """The route of ``topic``'s queues (``queue_ids``, default all ``n``) held by one group: a
    master queue when the group has a write endpoint (``fallback``, the answering broker's own, only
    for a view that names no members: one that knows none), then its followers' READ queues."""
    writable = leader_addresses(view, fallback if not view.get("members") else "")
    master = pb.Broker(name=view.get("group") or "tidemq", id=0, endpoints=endpoints(writable)) \
        if any(writable) else None
    followers = follower_brokers(view)
    out = []
    for q in (range(n) if queue_ids is None else queue_ids):
        if master is not None:
            out.append(pb.MessageQueue(topic=topic, id=q, permission=pb.Permission.READ_WRITE, broker=master,
                                       accept_message_types=TYPES))
        for b in followers:
            out.append(pb.MessageQueue(topic=topic, id=q, permission=pb.Permission.READ, broker=b,
                                       accept_message_types=TYPES))
    return out
