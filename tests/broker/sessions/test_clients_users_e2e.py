"""A user within its own bound of the client table cannot forget another user's live client
(sessions/clients.py), in a real broker: authentication on (the table's ids are ``user<TAB>id``), the
bounds and the idle limit set by the environment, the renewal running on its own. A push consumer's
client (heartbeats only) receives a message with auto_renew; another user then sends heartbeats under
16 fresh client ids (within its own bound, past the table's). Before, the table forgot the oldest
client of anyone: the consumer, which then counted as gone, so the broker released its message
(visible at once) and a second consumer of the group received it while the first was still consuming
it. The same outcome with the clock moved by hand: consume/test_renew.py's
test_another_users_flood_never_releases_a_live_auto_renewing_consumers_message.

Forgetting matters only past client_idle_s_max from the start (a client unknown until then counts as
alive), and the consumer counts as alive only within client_idle_s_max of its heartbeat: the idle
limit is small (3 s), and a round that outlasted it (a busy machine) proves nothing either way, so it
is played again under a fresh group and fresh ids, never skipped and never passed. The clock reads
only decide whether a round counts; the outcome asserted is which messages the second consumer got."""

import time

import grpc

from tidemq.client import admin
from tidemq.protocol.signing import date_time, signed_metadata
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.auth import AUTH
from ...support.brokers import make_topic
from ...support.wait import PATIENCE_S, patience, wait_until

SUPER = ("tidemq-ak", "s3cret-sk")
MALLORY = ("mallory", "secret-of-mallory")
IDLE_S = 3.0
MARGIN_S = 0.5          # the test's clock against the broker's: a round counts only this far inside the limit
ENV = {**AUTH, "TIDEMQ_CLIENTS_MAX": "16", "TIDEMQ_CLIENTS_PER_USER_MAX": "16",
       "TIDEMQ_CLIENT_IDLE_S_MAX": str(IDLE_S), "TIDEMQ_AUTO_RENEW_CHECK_INTERVAL_MS": "100"}


def md(keys, client_id):
    return tuple(signed_metadata(keys[0], keys[1], date_time(time.time()))) + (("x-mq-client-id", client_id),)


def heartbeat(s, keys, cid, group):
    r = s.Heartbeat(spb.HeartbeatRequest(group=pb.Resource(name=group), client_type=pb.ClientType.PUSH_CONSUMER),
                    metadata=md(keys, cid), timeout=PATIENCE_S)
    assert r.status.code == Code.OK, r.status


def receive(s, cid, group, auto_renew: bool, poll_ms: int) -> list:
    req = spb.ReceiveMessageRequest(group=pb.Resource(name=group), message_queue=pb.MessageQueue(
        topic=pb.Resource(name="orders")), batch_size=32, auto_renew=auto_renew)
    req.long_polling_timeout.FromMilliseconds(poll_ms)
    if not auto_renew:
        req.invisible_duration.seconds = 300
    return [r.message.body for r in s.ReceiveMessage(req, metadata=md(SUPER, cid), timeout=PATIENCE_S)
            if r.HasField("message")]


def play(s, n: int) -> tuple[list, bool]:
    """One round under group ``g<n>`` (a new group reads the queue from its start): what the second
    consumer got, and whether the round stayed within client_idle_s_max of the first's heartbeat."""
    group = f"g{n}"
    heard = time.monotonic()        # before the heartbeat: the broker's is later
    heartbeat(s, SUPER, f"consumer-1-{n}", group)
    got = wait_until(lambda: receive(s, f"consumer-1-{n}", group, auto_renew=True, poll_ms=1000),
                     "the first consumer receiving the message")
    assert got == [b"m1"], got
    for i in range(16):                            # another user, within its own bound
        heartbeat(s, MALLORY, f"flood-{n}-{i}", group)
    # a release wakes the waiting receive (the renewal checks every 100 ms): 1 s covers several checks
    second = receive(s, f"consumer-2-{n}", group, auto_renew=False, poll_ms=1000)
    return second, time.monotonic() - heard <= IDLE_S - MARGIN_S


def test_another_users_clients_never_forget_a_live_auto_renewing_consumer(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "orders", 1)
    b = broker_factory(root=root, env=ENV)
    started = time.monotonic()      # after the broker started: its own start is earlier
    r = admin.call(b.endpoint, "CreateUser", {"name": MALLORY[0], "secret_key": MALLORY[1]}, timeout_s=PATIENCE_S,
                   metadata=md(SUPER, "admin"))
    assert r["ok"], r
    with grpc.insecure_channel(b.endpoint) as ch:
        s = sgrpc.MessagingServiceStub(ch)
        r = s.SendMessage(spb.SendMessageRequest(messages=[pb.Message(
            topic=pb.Resource(name="orders"), body=b"m1", system_properties=pb.SystemProperties(
                message_id=f"0AUSERS{time.time_ns()}", message_type=pb.MessageType.NORMAL))]),
            metadata=md(SUPER, "producer"), timeout=PATIENCE_S)
        assert r.entries[0].status.code == Code.OK, r
        # an unknown client counts as alive for client_idle_s_max after the start (its clients come
        # back): past that, one forgotten counts as gone, which is what is tested here
        wait_until(lambda: time.monotonic() - started > IDLE_S + MARGIN_S, "the start's window passing",
                   interval_s=0.05)
        rounds = []
        end = time.monotonic() + patience()        # a hang bound, shared with the test's other waits
        while time.monotonic() < end:
            second, counts = play(s, len(rounds))
            rounds.append((second, counts))
            if counts:
                break
        assert rounds and rounds[-1][1], f"no round stayed within client_idle_s_max: {rounds}"
        assert rounds[-1][0] == [], "the first consumer's message was released while it consumed it"
