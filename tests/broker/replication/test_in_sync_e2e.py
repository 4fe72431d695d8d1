"""A SYNC send right after a failover, through real processes on a real ZooKeeper (node.until_in_sync,
proxy.py in_sync), by either lane (SendMessage; tidemq.Data's SendRecords, tidemq.client's bulk path): a group of two whose leader is killed leaves the new leader's in-sync set short of
in_sync_replicas_min (1), so a send is refused, typed (HA_NOT_AVAILABLE, before anything is
written: issue 27); the killed member started again, a send made the moment it is up waits for it
to come back into the set and is stored, instead of being refused until it has caught up."""

import grpc
import pytest

from tidemq.protocol.send_frame import decode_response, encode_request
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.group import Group
from ...support.wait import wait_until
from ...support.zookeeper import zookeeper  # noqa: F401  (fixture)


def send_message(endpoint: str, mid: str) -> int:
    m = pb.Message(topic=pb.Resource(name="T"), body=mid.encode(),
                   system_properties=pb.SystemProperties(message_id=mid, message_type=pb.MessageType.NORMAL))
    with grpc.insecure_channel(endpoint) as ch:
        r = sgrpc.MessagingServiceStub(ch).SendMessage(spb.SendMessageRequest(messages=[m]), timeout=60)
    return r.status.code


def send_records(endpoint: str, mid: str) -> int:
    with grpc.insecure_channel(endpoint) as ch:
        head, entries = decode_response(ch.unary_unary("/tidemq.Data/SendRecords")(
            encode_request("T", [mid.encode()], [mid.encode()]), timeout=60))
    return entries[0][0] if entries else head["code"]


@pytest.mark.parametrize("send", [send_message, send_records], ids=["SendMessage", "SendRecords"])
def test_a_send_as_a_member_comes_back_after_a_failover_is_stored_not_refused(tmp_path, zookeeper, send):  # noqa: F811
    # the wait for the member coming back is bounded by replication_timeout_ms (3 s by default): a
    # restart, reconnection and catch-up can take longer on a loaded machine, so 60 s here (the send's
    # own deadline, 60 s, halves it: 30 s); the short default's refusal is what the clients retry
    g = Group(str(tmp_path), 2, coordinator=zookeeper, mode="SYNC", env={"TIDEMQ_REPLICATION_TIMEOUT_MS": "60000"})
    try:
        g.start_all()
        old = g.wait_leader()
        assert send(g.endpoint(old), "m-0") == Code.OK            # (the topic made, the follower in the set)
        g.wait_in_sync(old, [1 - old])
        g.kill(old)
        new = g.wait_leader(exclude={old})
        end = g.status(new)["log_end"]
        # nobody to wait for: refused at once (while its role still changes, a send is answered
        # INTERNAL_SERVER_ERROR, "send again", nothing put: the clients send again, as here)
        code = wait_until(lambda: (c,) if (c := send(g.endpoint(new), "m-1")) != Code.INTERNAL_SERVER_ERROR else None,
                          "an answer once the new leader's role changed")[0]
        assert code == Code.HA_NOT_AVAILABLE
        assert g.status(new)["log_end"] == end, "refused before anything was written"
        g.start(old)                                               # up: registered with the coordinator
        assert send(g.endpoint(new), "m-2") == Code.OK             # waited for it, not refused
        assert g.status(new)["in_sync"] == [f"g-{new}", f"g-{old}"]
    finally:
        g.kill_all()
