"""Telemetry streams: settings answered, and commands the broker starts (orphan checks).

Each open stream is a :class:`Session`, keyed by the ``x-mq-client-id`` metadata
seen when it opened (not by its first settings command: a Python client whose
stream was rebuilt after a broker restart sends no settings for up to 300 s,
docs/broker-protocol.md P10). What a client declared in earlier settings (its
type and topics) is remembered by client id for the broker's lifetime, so a
settings-less stream of a known producer is still usable.

A command for a client is queued on its session (bounded by ``outbox_max``: a stream
that does not drain gets no more) and written by the stream's own handler.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable

from ...protocol.stubs import Code, pb, spb, status

log = logging.getLogger("tidemq.broker")

OUTBOX_MAX = 1024           # commands queued for one stream at most
KNOWN_CLIENTS_MAX = 10_000  # client ids whose settings are remembered at most


@dataclass
class Known:
    producer: bool = False
    topics: frozenset[str] = frozenset()


@dataclass
class Session:
    client_id: str
    outbox: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(OUTBOX_MAX))


class Sessions:
    def __init__(self, on_open: Callable[[str], None] = lambda cid: None,
                 on_close: Callable[[str], None] = lambda cid: None, outbox_max: int = OUTBOX_MAX,
                 known_clients_max: int = KNOWN_CLIENTS_MAX) -> None:
        """``on_open`` / ``on_close``: told the client id of each stream that opens / ends (clients.py)."""
        self.open: dict[str, list[Session]] = {}
        self.known: dict[str, Known] = {}
        self.on_open = on_open
        self.on_close = on_close
        self.outbox_max = outbox_max
        self.known_clients_max = known_clients_max

    def _learn(self, client_id: str, s: "pb.Settings") -> None:
        if s.client_type == pb.ClientType.PRODUCER or s.HasField("publishing"):
            k = Known(True, frozenset(t.name for t in s.publishing.topics))
        else:
            k = Known(False)
        self.known.pop(client_id, None)
        self.known[client_id] = k
        while len(self.known) > self.known_clients_max:
            self.known.pop(next(iter(self.known)))

    def producer_for(self, topic: str, client_id: str = "") -> Session | None:
        """A live stream of the client ``client_id`` (the sender), else of a producer that
        declared ``topic``; None when no such stream is open."""
        if client_id and self.open.get(client_id):
            return self.open[client_id][-1]
        for cid, sessions in self.open.items():
            k = self.known.get(cid)
            if sessions and k is not None and k.producer and topic in k.topics:
                return sessions[-1]
        return None

    def send(self, session: Session, cmd: "spb.TelemetryCommand") -> bool:
        try:
            session.outbox.put_nowait(cmd)
            return True
        except asyncio.QueueFull:
            return False

    async def serve(self, client_id: str, request_iterator, closing: asyncio.Event,
                    reply: Callable[["pb.Settings"], "pb.Settings"]) -> AsyncIterator:
        """The stream: answer every settings command with OK and ``reply(settings)``, write
        queued commands; until the client ends it or ``closing`` is set."""
        session = Session(client_id, asyncio.Queue(self.outbox_max))
        self.open.setdefault(client_id, []).append(session)
        self.on_open(client_id)
        it = request_iterator.__aiter__()
        nxt = asyncio.ensure_future(it.__anext__())
        out = asyncio.ensure_future(session.outbox.get())
        stop = asyncio.ensure_future(closing.wait())
        try:
            while True:
                done, _ = await asyncio.wait({nxt, out, stop}, return_when=asyncio.FIRST_COMPLETED)
                if stop in done:                     # the broker is stopping
                    return
                if out in done:
                    yield out.result()
                    out = asyncio.ensure_future(session.outbox.get())
                if nxt in done:
                    try:
                        cmd = nxt.result()
                    except StopAsyncIteration:       # the client ended the stream
                        return
                    nxt = asyncio.ensure_future(it.__anext__())
                    if cmd.HasField("settings"):
                        self._learn(client_id, cmd.settings)
                        yield spb.TelemetryCommand(status=status(Code.OK), settings=reply(cmd.settings))
                    # thread stack traces, verification results: nothing to say
        finally:
            lst = self.open.get(client_id, [])
            if session in lst:
                lst.remove(session)
            if not lst:
                self.open.pop(client_id, None)
            self.on_close(client_id)
            # the broker stopping, or the client cancelling the call: pending reads are dropped
            # and their outcome collected (no "Task exception was never retrieved")
            for f in (nxt, out, stop):
                if not f.done():
                    f.cancel()
                f.add_done_callback(lambda f: f.cancelled() or f.exception())


def client_id_of(context) -> str:
    for k, v in context.invocation_metadata() or ():
        if k == "x-mq-client-id":
            return v
    return ""
