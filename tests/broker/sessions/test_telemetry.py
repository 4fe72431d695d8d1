"""Telemetry sessions: settings answered OK, commands queued for a client's stream (bounded),
a producer found by the client id or by a topic it declared, settings remembered (bounded)."""

import asyncio

from tidemq.broker.sessions.telemetry import Session, Sessions
from tidemq.protocol.stubs import Code, pb, spb


def producer_settings(*topics) -> "spb.TelemetryCommand":
    return spb.TelemetryCommand(settings=pb.Settings(
        client_type=pb.ClientType.PRODUCER,
        publishing=pb.Publishing(topics=[pb.Resource(name=t) for t in topics])))


class Client:
    """A client's side of one stream: requests put in, the stream ended by end()."""

    def __init__(self):
        self.requests: asyncio.Queue = asyncio.Queue()

    def __aiter__(self):
        return self

    async def __anext__(self):
        item = await self.requests.get()
        if item is None:
            raise StopAsyncIteration
        return item

    def end(self):
        self.requests.put_nowait(None)


async def scenario():
    events = []
    sessions = Sessions(on_open=lambda c: events.append(("open", c)), on_close=lambda c: events.append(("close", c)),
                        outbox_max=2, known_clients_max=2)
    closing = asyncio.Event()
    client = Client()
    replies = []
    answered = asyncio.Event()

    async def stream():
        async for reply in sessions.serve("c1", client, closing, lambda s: pb.Settings(
                publishing=pb.Publishing(max_body_size=4 << 20))):
            replies.append(reply)
            answered.set()

    task = asyncio.ensure_future(stream())
    client.requests.put_nowait(producer_settings("Orders"))
    await asyncio.wait_for(answered.wait(), 60)
    out = {"first": replies[0], "open_after_settings": dict(sessions.open)}
    out["by_topic"] = sessions.producer_for("Orders") is not None
    out["other_topic"] = sessions.producer_for("Other")
    out["by_client"] = sessions.producer_for("Other", client_id="c1") is not None
    session = sessions.producer_for("Orders")
    cmd = spb.TelemetryCommand(recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
        transaction_id="tx1"))
    answered.clear()
    out["queued"] = sessions.send(session, cmd)
    await asyncio.wait_for(answered.wait(), 60)
    out["command"] = replies[-1]
    client.end()
    await asyncio.wait_for(task, 60)
    out["open_after_end"] = dict(sessions.open)
    out["events"] = events
    out["known_before"] = sorted(sessions.known)
    for cid in ("c2", "c3"):
        sessions._learn(cid, producer_settings("X").settings)
    out["known_after"] = sorted(sessions.known)
    # a stream that does not drain takes outbox_max commands, then no more
    stuck = Sessions(outbox_max=2)
    s = Session("c9", asyncio.Queue(2))
    out["bounded"] = [stuck.send(s, cmd) for _ in range(3)]
    return out


def test_a_stream_end_to_end():
    out = asyncio.run(scenario())
    first = out["first"]
    assert first.status.code == Code.OK and first.settings.publishing.max_body_size == 4 << 20
    assert out["by_topic"] and out["other_topic"] is None and out["by_client"]
    assert out["queued"] and out["command"].recover_orphaned_transaction_command.transaction_id == "tx1"
    assert out["open_after_end"] == {} and out["events"] == [("open", "c1"), ("close", "c1")]
    assert out["known_before"] == ["c1"] and out["known_after"] == ["c2", "c3"], "the oldest forgotten first"
    assert out["bounded"] == [True, True, False]


def test_with_authentication_on_a_client_id_is_its_users_own():
    """The broker keys clients by user and x-mq-client-id: one user naming another's id is another client."""
    from tidemq.broker.protection.access import IDENTITY, Identity
    from tidemq.broker.sessions.telemetry import client_header_of, client_id_of

    from ...support.grpc_context import SendContext

    ctx = SendContext(client_id="host@1@2")
    assert client_id_of(ctx) == client_header_of(ctx) == "host@1@2", "authentication off: as sent"
    token = IDENTITY.set(Identity("app-a", "ipv4:127.0.0.1:1"))
    try:
        assert client_id_of(ctx) == "app-a\thost@1@2" and client_header_of(ctx) == "host@1@2"
        assert client_id_of(SendContext(client_id="")) == "", "no client id: none"
    finally:
        IDENTITY.reset(token)


def test_a_producer_declaring_too_many_topics_is_refused_and_nothing_is_learned():
    """Declared topics are remembered per client (known): one settings command of ~4 MiB could name
    ~900,000 of them. Past PUBLISHING_TOPICS_MAX: BAD_REQUEST, the stream stays open, nothing kept."""
    from tidemq.broker.sessions.telemetry import PUBLISHING_TOPICS_MAX

    async def go():
        sessions = Sessions()
        client = Client()
        replies = []

        async def stream():
            async for reply in sessions.serve("c1", client, asyncio.Event(), lambda s: s):
                replies.append(reply)
        task = asyncio.ensure_future(stream())
        client.requests.put_nowait(producer_settings(*(f"t{i}" for i in range(PUBLISHING_TOPICS_MAX + 1))))
        client.requests.put_nowait(producer_settings(*(f"t{i}" for i in range(PUBLISHING_TOPICS_MAX))))
        client.end()
        await asyncio.wait_for(task, 60)
        return replies, sessions.known
    replies, known = asyncio.run(go())
    assert [r.status.code for r in replies] == [Code.BAD_REQUEST, Code.OK]
    assert len(known["c1"].topics) == PUBLISHING_TOPICS_MAX
